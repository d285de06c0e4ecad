//! W4A16 matmul reference: `Y[M, N] = X[M, K] x dequant(W)[K, N]` with BF16 activations and
//! FP4 weights (MXFP4 or NVFP4) under a [`Fp4DequantRecipe`].
//!
//! Storage: `X` is `[M, K]` row-major BF16 bits. The weights are stored `[N, K]` (each output
//! column's K weights contiguous, groups of the recipe's size along K — the layout MX/NVFP4
//! checkpoints and the Ascend kernels use), so `dequant(W)[K, N]` is the transpose of the
//! stored matrix. `Y` is `[M, N]` row-major, in the recipe's output type.
//!
//! Arithmetic, in this fixed order:
//! 1. the weights are dequantised to the recipe's 16-bit type exactly as
//!    [`mxfp4::dequantize`]/[`nvfp4::dequantize`] do (including its final rounding);
//! 2. each `Y[m, n]` is the f32 dot product of `X[m, :]` and `W[n, :]` (both widened to f32
//!    exactly) by [`dot_f32`]: 16 lane accumulators, element `k` multiplied (one f32 rounding)
//!    and added (one f32 rounding) into lane `k % 16` in increasing `k`, lanes combined by the
//!    fixed tree `+8, +4, +2, +1`; no FMA;
//! 3. the f32 sum is rounded once to the output type with the recipe's rounding.
//!
//! Parallelism: step 2 runs through the blocked fixed-order matmul ([`crate::gemm::lanes16`]:
//! each element's bits are exactly `dot_f32`'s, the dequantised weights reused across M), then
//! fixed chunks of output rows; every output element is computed independently in the order
//! above, so `Y` is bitwise identical for any thread count and vector form.

use crate::dequant::decode::round_f32_to_output;
use crate::dequant::error::{checked_mul, expect_len, DequantError};
use crate::dequant::{mxfp4, nvfp4, Fp4DequantRecipe, HalfType, W4a16Accumulation};
use crate::dot::dot_f32;
use crate::formats::bf16::{bf16_to_f32, f32_to_bf16};
use crate::formats::f16::f16_to_f32;
use crate::formats::Rounding;
use crate::gemm::matmul_lanes16;
use crate::parallel::{fill_chunks, Threads};

/// The scales of a packed FP4 weight tensor.
#[derive(Clone, Copy, Debug)]
pub enum Fp4Scales<'a> {
    /// MXFP4: one E8M0 byte per group, `[n, k / group]` row-major.
    Mx { scales: &'a [u8] },
    /// NVFP4: one E4M3FN byte per group, `[n, k / group]` row-major, and the f32 global scale.
    Nv {
        block_scales: &'a [u8],
        global_scale: f32,
    },
}

/// A packed FP4 weight tensor stored `[n, k]` (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct Fp4Weights<'a> {
    /// `n * k / 2` bytes packed under the recipe's layout.
    pub packed: &'a [u8],
    pub scales: Fp4Scales<'a>,
    /// Output columns.
    pub n: usize,
    /// Reduction length (a multiple of the recipe's group size).
    pub k: usize,
}

/// Output rows per parallel chunk.
const ROWS_PER_CHUNK: usize = 4;

/// Dequantises the weights to f32 (exact widening of the recipe's 16-bit output).
pub fn dequantize_weights_f32(
    w: &Fp4Weights<'_>,
    recipe: &Fp4DequantRecipe,
    threads: Threads,
) -> Result<Vec<f32>, DequantError> {
    let bits = match w.scales {
        Fp4Scales::Mx { scales } => mxfp4::dequantize(w.packed, scales, w.n, w.k, recipe, threads)?,
        Fp4Scales::Nv {
            block_scales,
            global_scale,
        } => nvfp4::dequantize(
            w.packed,
            block_scales,
            global_scale,
            w.n,
            w.k,
            recipe,
            threads,
        )?,
    };
    let widen = match recipe.output {
        HalfType::Bf16 => bf16_to_f32,
        HalfType::F16 => f16_to_f32,
    };
    Ok(bits
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            crate::cancel::checkpoint_every(i);
            widen(b)
        })
        .collect())
}

/// `Y[m, n]` in the recipe's output type (bits), from BF16 activations `x` (`[m, k]`) and
/// packed FP4 weights `w` (`[n, k]`).
pub fn matmul(
    x: &[u16],
    m: usize,
    w: &Fp4Weights<'_>,
    recipe: &Fp4DequantRecipe,
    threads: Threads,
) -> Result<Vec<u16>, DequantError> {
    expect_len("x", checked_mul(m, w.k, "m * k")?, x.len())?;
    let y_len = checked_mul(m, w.n, "m * n")?;
    let wf = dequantize_weights_f32(w, recipe, threads)?;
    let xf: Vec<f32> = x.iter().map(|&b| bf16_to_f32(b)).collect();
    let (n, k) = (w.n, w.k);
    let mut y = vec![0u16; y_len];
    if n == 0 || k == 0 {
        // Empty reduction: every output is the rounded empty sum, +0.
        let zero = round_f32_to_output(0.0, recipe.output, recipe.rounding);
        y.iter_mut().for_each(|v| *v = zero);
        return Ok(y);
    }
    match recipe.accumulation {
        W4a16Accumulation::F32 => {
            // The blocked kernel: the bits of `dot_f32` per element, weights reused across M.
            let acc = matmul_lanes16(&xf, &wf, m, n, k, threads);
            fill_chunks(&mut y, ROWS_PER_CHUNK * n, threads, |ci, chunk| {
                let base = ci * ROWS_PER_CHUNK * n;
                for (e, out) in chunk.iter_mut().enumerate() {
                    *out = round_f32_to_output(acc[base + e], recipe.output, recipe.rounding);
                }
            });
        }
        W4a16Accumulation::Bf16PerGroup => {
            fill_chunks(&mut y, ROWS_PER_CHUNK * n, threads, |ci, chunk| {
                for (r, y_row) in chunk.chunks_exact_mut(n).enumerate() {
                    let row = ci * ROWS_PER_CHUNK + r;
                    let x_row = &xf[row * k..(row + 1) * k];
                    for (j, out) in y_row.iter_mut().enumerate() {
                        let w_row = &wf[j * k..(j + 1) * k];
                        let g = recipe.group_size;
                        let acc =
                            x_row
                                .chunks(g)
                                .zip(w_row.chunks(g))
                                .fold(0.0f32, |acc, (xs, ws)| {
                                    bf16_to_f32(f32_to_bf16(acc + dot_f32(xs, ws), Rounding::RNE))
                                });
                        *out = round_f32_to_output(acc, recipe.output, recipe.rounding);
                    }
                }
            });
        }
    }
    Ok(y)
}
