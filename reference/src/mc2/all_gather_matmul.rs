//! AllGatherMatmul over `R` simulated ranks: the functional reference of torch_npu
//! `npu_all_gather_base_mm` / `aclnnAllGatherMatmul`.
//!
//! Rank `r` holds `x1_r [M, K]` and `x2_r [K, N]`. The all-gather concatenates the `x1_r`
//! along M in rank order into `gathered [R * M, K]` (data movement: exact), and every rank
//! computes `out_r = gathered @ x2_r (+ bias) [R * M, N]`.
//!
//! Numerics: each element is `dot_f32` (fixed 16-lane order), plus `bias[j]` in f32 when
//! present, rounded ONCE to the output dtype with `output_rounding`. There is no cross-rank
//! sum, so [`Mc2Numerics::accumulation`] and [`Mc2Numerics::epilogue`] do not change the result
//! (both the kernel and the high-precision golden round the f32 result once); they are accepted
//! so that one numerics value drives all MC2 ops.

use super::error::Mc2Error;
use super::problem::{check_operands, transpose, Mc2Numerics, Mc2Shape, RankOperands};
use crate::dot::dot_f32;
use crate::parallel::{fill_chunks, Threads};

const ROWS_PER_TASK: usize = 8;

/// The operands of an AllGatherMatmul; `shape.m` is the rows PER RANK.
#[derive(Clone, Copy, Debug)]
pub struct AllGatherMatmulInputs<'a> {
    pub shape: Mc2Shape,
    pub ranks: &'a [RankOperands<'a>],
    pub bias: Option<&'a [f32]>,
}

/// Every rank's output and the gathered `x1` (the op's optional `gather_out`).
#[derive(Clone, Debug, PartialEq)]
pub struct AllGatherMatmulOutput {
    /// `outputs[r]` is rank `r`'s `[R * M, N]`.
    pub outputs: Vec<Vec<f32>>,
    /// `[R * M, K]`, rank 0's rows first.
    pub gathered_x1: Vec<f32>,
}

/// Runs AllGatherMatmul (see the module docs).
pub fn all_gather_matmul(
    inputs: &AllGatherMatmulInputs<'_>,
    numerics: &Mc2Numerics,
    threads: Threads,
) -> Result<AllGatherMatmulOutput, Mc2Error> {
    check_operands(numerics, inputs.ranks, inputs.shape, inputs.bias)?;
    let Mc2Shape { m, k, n } = inputs.shape;
    let dt = numerics.dtype;
    let gathered: Vec<f32> = inputs
        .ranks
        .iter()
        .flat_map(|op| op.x1.iter().copied())
        .collect();
    let rows = m * inputs.ranks.len();
    let outputs = inputs
        .ranks
        .iter()
        .map(|op| {
            let x2t = transpose(op.x2, k, n);
            let mut out = vec![0.0f32; rows * n];
            fill_chunks(&mut out, ROWS_PER_TASK * n, threads, |task, chunk| {
                let base = task * ROWS_PER_TASK * n;
                for (e, o) in chunk.iter_mut().enumerate() {
                    let (i, j) = ((base + e) / n, (base + e) % n);
                    let mut p = dot_f32(&gathered[i * k..(i + 1) * k], &x2t[j * k..(j + 1) * k]);
                    if let Some(b) = inputs.bias {
                        p += b[j];
                    }
                    *o = dt.quantize_f32(p, numerics.output_rounding);
                }
            });
            out
        })
        .collect();
    Ok(AllGatherMatmulOutput {
        outputs,
        gathered_x1: gathered,
    })
}
