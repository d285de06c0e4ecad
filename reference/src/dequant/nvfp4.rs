//! NVFP4 -> BF16/F16: groups of [`NV_GROUP_SIZE`] E2M1 codes along K share one E4M3FN block
//! scale `s`, and the tensor has one f32 global scale `g`. The order in which `q`, `s` and `g`
//! are multiplied is the recipe's [`ScaleOrder`]; the final rounding is the recipe's.
//!
//! - a NaN block scale (E4M3FN 0x7F/0xFF) or a NaN global scale makes the group NaN, as does
//!   `0 * Inf`; NaN outputs are the positive canonical NaN (or the pinned encoding);
//! - f32 steps are IEEE binary32 multiplications (ties to even, gradual underflow, overflow to
//!   ±Inf), exactly what `f32 * f32` is in Rust on every platform.
//!
//! Shapes: weights `[n, k]` packed under the recipe's layout (`n * k / 2` bytes), block scales
//! `[n, k / group]` row-major.

use super::decode::{exact_product, fp4_to_f32, round_exact_to_output, round_f32_to_output};
use super::error::{expect_len, DequantError};
use super::kernel::{check_shapes, dequantize_table_driven};
use super::recipe::{Fp4DequantRecipe, ScaleOrder};
use crate::formats::bf16::{bf16_to_f32, f32_to_bf16};
use crate::formats::Rounding;
use crate::parallel::Threads;

/// The NVFP4 group size.
pub const NV_GROUP_SIZE: usize = 16;

/// The output bits of one NVFP4 element: FP4 `code` (low nibble), E4M3FN `block_scale`, f32
/// `global_scale`. This is the reference semantics; [`dequantize`] evaluates it through tables.
#[inline]
pub fn element(code: u8, block_scale: u8, global_scale: f32, recipe: &Fp4DequantRecipe) -> u16 {
    let q = fp4_to_f32(code, recipe.element, recipe.fp4_subnormals);
    let s = recipe.scale_decode.e4m3(block_scale);
    let g = global_scale;
    let (out, r) = (recipe.output, recipe.rounding);
    match recipe.order {
        // q * s is exact in f32 (at most 6 significant bits, well inside the range).
        ScaleOrder::BlockThenGlobalF32 => round_f32_to_output((q * s) * g, out, r),
        ScaleOrder::CombinedScaleF32 => round_f32_to_output(q * (s * g), out, r),
        ScaleOrder::ExactOnce => round_exact_to_output(exact_product(&[q, s, g]), out, r),
        ScaleOrder::CombinedScaleBf16 => {
            let sg = s * g;
            let sg = if sg.is_nan() {
                f32::NAN
            } else {
                bf16_to_f32(f32_to_bf16(sg, Rounding::RNE))
            };
            round_f32_to_output(q * sg, out, r)
        }
    }
}

/// Dequantises NVFP4 weights `[n, k]` into `out` (`n * k` 16-bit values, row-major).
#[allow(clippy::too_many_arguments)]
pub fn dequantize_into(
    packed: &[u8],
    block_scales: &[u8],
    global_scale: f32,
    n: usize,
    k: usize,
    recipe: &Fp4DequantRecipe,
    threads: Threads,
    out: &mut [u16],
) -> Result<(), DequantError> {
    let count = check_shapes(
        packed.len(),
        block_scales.len(),
        "block_scales",
        n,
        k,
        recipe,
    )?;
    expect_len("out", count, out.len())?;
    dequantize_table_driven(
        packed,
        block_scales,
        recipe,
        |c, s| element(c, s, global_scale, recipe),
        out,
        threads,
    )
}

/// Dequantises NVFP4 weights `[n, k]` to a new row-major `Vec` of BF16/F16 bits.
pub fn dequantize(
    packed: &[u8],
    block_scales: &[u8],
    global_scale: f32,
    n: usize,
    k: usize,
    recipe: &Fp4DequantRecipe,
    threads: Threads,
) -> Result<Vec<u16>, DequantError> {
    let count = check_shapes(
        packed.len(),
        block_scales.len(),
        "block_scales",
        n,
        k,
        recipe,
    )?;
    let mut out = vec![0u16; count];
    dequantize_into(
        packed,
        block_scales,
        global_scale,
        n,
        k,
        recipe,
        threads,
        &mut out,
    )?;
    Ok(out)
}
