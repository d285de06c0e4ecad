//! MatmulReduceScatter over `R` simulated ranks: the functional reference of torch_npu
//! `npu_mm_reduce_scatter_base` / `aclnnMatmulReduceScatter`.
//!
//! Rank `r` holds `x1_r [M, K]` and `x2_r [K, N]`; `M` must be a multiple of `R`. The sum over
//! ranks of `x1_r @ x2_r` (plus `bias` as [`EpiloguePlacement`] says) is scattered along M:
//! rank `r` receives rows `[r * M / R, (r + 1) * M / R)`.
//!
//! Numerics are exactly those of [`super::matmul_all_reduce`] on one untiled buffer: the
//! reduce-scatter is the first phase of a ring all-reduce, and with `M` a multiple of `R` the
//! ring's chunk `c` is exactly rank `c`'s block of rows, reduced starting at rank `c + 1` and
//! ending at rank `c` (see [`super::reduction`]).
//!
//! [`EpiloguePlacement`]: super::problem::EpiloguePlacement

use super::error::Mc2Error;
use super::matmul_all_reduce::{matmul_all_reduce, MatmulAllReduceInputs};
use super::problem::{Mc2Numerics, Mc2Shape, RankOperands};
use crate::parallel::Threads;

/// The operands of a MatmulReduceScatter (no `x3` in this op).
#[derive(Clone, Copy, Debug)]
pub struct MatmulReduceScatterInputs<'a> {
    pub shape: Mc2Shape,
    pub ranks: &'a [RankOperands<'a>],
    pub bias: Option<&'a [f32]>,
}

/// Runs MatmulReduceScatter; `result[r]` is rank `r`'s `[M / R, N]`.
pub fn matmul_reduce_scatter(
    inputs: &MatmulReduceScatterInputs<'_>,
    numerics: &Mc2Numerics,
    threads: Threads,
) -> Result<Vec<Vec<f32>>, Mc2Error> {
    let ranks = inputs.ranks.len();
    if ranks != 0 && !inputs.shape.m.is_multiple_of(ranks) {
        return Err(Mc2Error::NotDivisibleByRanks {
            name: "M",
            value: inputs.shape.m,
            ranks,
        });
    }
    let full = matmul_all_reduce(
        &MatmulAllReduceInputs {
            shape: inputs.shape,
            ranks: inputs.ranks,
            bias: inputs.bias,
            x3: None,
        },
        numerics,
        threads,
    )?;
    let block = inputs.shape.m / ranks * inputs.shape.n;
    Ok(full.chunks(block).map(<[f32]>::to_vec).collect())
}
