//! MXFP4 (OCP Microscaling v1.0) -> BF16/F16: groups of [`MX_GROUP_SIZE`] E2M1 codes along the
//! reduction axis K share one E8M0 scale `X = 2^(e-127)`; `v = X * P`.
//!
//! - a NaN scale (0xFF) makes the whole group NaN;
//! - overflow gives ±Inf (|P| >= 2 at e = 254, |P| >= 4 at e = 253 in BF16);
//! - subnormal results (0.5 * 2^-127 = BF16 0x0020) are kept unless the recipe's rounding
//!   flushes them ([`SubnormalPolicy::FlushToZero`](crate::formats::SubnormalPolicy));
//! - `e = 0` is `2^-127` (an f32 subnormal), never 0.
//!
//! Shapes: weights `[n, k]` (k along the reduction axis, a multiple of the recipe's group
//! size), packed two codes per byte under the recipe's layout (`n * k / 2` bytes), and scales
//! `[n, k / group]` row-major (one E8M0 byte per group).

use super::decode::{
    exact_product, fp4_to_f32, output_nan, round_exact_to_output, round_f32_to_output,
};
use super::error::{expect_len, DequantError};
use super::kernel::{check_shapes, dequantize_table_driven};
use super::recipe::{Fp4DequantRecipe, ScaleDecode, ScaleOrder};
use crate::parallel::Threads;

/// The OCP MX group size.
pub const MX_GROUP_SIZE: usize = 32;

/// The output bits of one MXFP4 element: FP4 `code` (low nibble) under the E8M0 `scale`.
/// This is the reference semantics; [`dequantize`] is a table-driven evaluation of it.
#[inline]
pub fn element(code: u8, scale: u8, recipe: &Fp4DequantRecipe) -> u16 {
    if scale == 0xFF && recipe.scale_decode != ScaleDecode::E8m0NanAsInf {
        return output_nan(recipe.output, recipe.rounding);
    }
    let q = fp4_to_f32(code, recipe.element, recipe.fp4_subnormals);
    let x = recipe.scale_decode.e8m0(scale);
    match recipe.order {
        // A scale misread as 0 or Inf (the fault catalogue's decoding bugs): IEEE f32 product.
        _ if x == 0.0 || x.is_infinite() => {
            round_f32_to_output(q * x, recipe.output, recipe.rounding)
        }
        ScaleOrder::ExactOnce => {
            round_exact_to_output(exact_product(&[q, x]), recipe.output, recipe.rounding)
        }
        // Formed in f32: exact, or ±Inf on overflow.
        _ => round_f32_to_output(q * x, recipe.output, recipe.rounding),
    }
}

/// Dequantises MXFP4 weights `[n, k]` into `out` (`n * k` 16-bit values, row-major).
pub fn dequantize_into(
    packed: &[u8],
    scales: &[u8],
    n: usize,
    k: usize,
    recipe: &Fp4DequantRecipe,
    threads: Threads,
    out: &mut [u16],
) -> Result<(), DequantError> {
    let count = check_shapes(packed.len(), scales.len(), "scales", n, k, recipe)?;
    expect_len("out", count, out.len())?;
    dequantize_table_driven(
        packed,
        scales,
        recipe,
        |c, s| element(c, s, recipe),
        out,
        threads,
    )
}

/// Dequantises MXFP4 weights `[n, k]` to a new row-major `Vec` of BF16/F16 bits.
pub fn dequantize(
    packed: &[u8],
    scales: &[u8],
    n: usize,
    k: usize,
    recipe: &Fp4DequantRecipe,
    threads: Threads,
) -> Result<Vec<u16>, DequantError> {
    let count = check_shapes(packed.len(), scales.len(), "scales", n, k, recipe)?;
    let mut out = vec![0u16; count];
    dequantize_into(packed, scales, n, k, recipe, threads, &mut out)?;
    Ok(out)
}
