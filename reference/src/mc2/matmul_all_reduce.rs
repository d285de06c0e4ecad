//! MatmulAllReduce over `R` simulated ranks (`R` in 1, 2, 4, 8): the functional reference of
//! torch_npu `npu_mm_all_reduce_base` / `aclnnMatmulAllReduce`.
//!
//! `out = allreduce_sum_r(x1_r @ x2_r)` with `bias [N]` and `x3 [M, N]` placed as
//! [`EpiloguePlacement`] says (by default on rank 0, before its rounding: CANN documents
//! `allreduce(x1 @ x2 + bias + x3)`, each rank adding what it is given). For every output
//! element `(i, j)`:
//! 1. each rank's product `p_r = dot_f32(x1_r[i, :], x2_r[:, j])` (f32, the fixed 16-lane
//!    order of [`crate::dot`]);
//! 2. [`Accumulation::Kernel`]: with the epilogue on a rank, as the kernel does it
//!    (ops-transformer `mc2/matmul_all_reduce`: bias inside the matmul, x3 by a vector add on
//!    the rank's converted result before the all-reduce of the tile),
//!    `v_r = round_x3(round(p_r + bias[j]) + x3[i, j])`, else `v_r = round(p_r)`, `round` to
//!    the output dtype with `output_rounding`, `round_x3` with `x3_rounding` (nearest even);
//!    then the all-reduce sums the `v_r` in the dtype
//!    in the given [`ReductionOrder`] (see [`super::reduction`]);
//!    [`Accumulation::HighPrecisionGolden`]: `p_r = (p_r + bias[j]) + x3[i, j]` in f32 on the
//!    epilogue's ranks, and the `p_r` are summed in f32 in rank order;
//! 3. with [`EpiloguePlacement::AfterReduce`]: `(s + bias[j]) + x3[i, j]` in f32; finally one
//!    rounding to the dtype (in kernel mode only when an epilogue term was added, since the
//!    dtype sum is already in the dtype).
//!
//! Tiling: the kernel splits M into tiles and all-reduces tile by tile, so the reduced buffer is
//! one tile (`rows * N` elements). Only the ring order depends on the buffer (its chunk
//! boundaries), so for rank order, binary tree and the high-precision golden the result is
//! independent of the tiling; with the ring order it is the per-tile computation, whatever the
//! order in which tiles are scheduled. [`matmul_all_reduce_tiled`] takes both the tiles and the
//! schedule.
//!
//! Computation: each rank's products `p_r` for a block of rows come from the blocked fixed-order
//! matmul ([`crate::gemm::lanes16`], the bits of `dot_f32` per element); the epilogue, the
//! per-rank rounding and the reduction then run element by element in fixed chunks of rows.
//! Every element is computed independently, so the bits do not depend on the thread count, the
//! block sizes or the CPU's vector forms.

use super::error::Mc2Error;
use super::problem::{
    check_operands, check_tensor, Accumulation, EpiloguePlacement, Mc2Numerics, Mc2Shape,
    RankOperands, X3Entry,
};
use super::reduction::{reduce_in_dtype_rounded, ring_chunk_of};
use crate::gemm::lanes16::{matmul_packed, Packed};
use crate::parallel::{fill_chunks, Threads};

/// Rows per parallel task of the element-wise reduction (fixed: the decomposition never depends
/// on the thread count).
const ROWS_PER_TASK: usize = 8;

/// The most per-rank products held at once (all ranks together): a tile is computed in blocks
/// of rows below this, so memory stays bounded whatever M is.
const PARTIALS_PER_BLOCK: usize = 1 << 24;

/// The operands of a MatmulAllReduce.
#[derive(Clone, Copy, Debug)]
pub struct MatmulAllReduceInputs<'a> {
    /// Per-rank shape (the same on every rank).
    pub shape: Mc2Shape,
    /// One entry per rank.
    pub ranks: &'a [RankOperands<'a>],
    /// Optional `bias [N]`.
    pub bias: Option<&'a [f32]>,
    /// Optional `x3 [M, N]`.
    pub x3: Option<&'a [f32]>,
}

/// Validated operands with `x2` transposed per rank.
pub(crate) struct Prepared<'a> {
    shape: Mc2Shape,
    x1: Vec<&'a [f32]>,
    /// Each rank's `x2` transposed to `[N, K]` and packed for the matmul kernels.
    x2p: Vec<Packed<'static>>,
    bias: Option<&'a [f32]>,
    x3: Option<&'a [f32]>,
    numerics: Mc2Numerics,
}

pub(crate) fn prepare<'a>(
    inputs: &MatmulAllReduceInputs<'a>,
    numerics: &Mc2Numerics,
    threads: Threads,
) -> Result<Prepared<'a>, Mc2Error> {
    check_operands(numerics, inputs.ranks, inputs.shape, inputs.bias)?;
    let Mc2Shape { m, k, n } = inputs.shape;
    let dt = numerics.dtype;
    if let Some(x3) = inputs.x3 {
        check_tensor("x3", x3, m, n, dt)?;
    }
    Ok(Prepared {
        shape: inputs.shape,
        x1: inputs.ranks.iter().map(|op| op.x1).collect(),
        x2p: inputs
            .ranks
            .iter()
            .map(|op| Packed::transposed(op.x2, k, n, -0.0, threads))
            .collect(),
        bias: inputs.bias,
        x3: inputs.x3,
        numerics: *numerics,
    })
}

impl Prepared<'_> {
    /// `(bias[j] present, x3[i, j] present)` added to `v` in f32, left to right.
    #[inline]
    fn add_epilogue(&self, v: f32, i: usize, j: usize) -> f32 {
        let mut v = v;
        if let Some(b) = self.bias {
            v += b[j];
        }
        if let Some(x3) = self.x3 {
            v += x3[i * self.shape.n + j];
        }
        v
    }

    fn has_epilogue(&self) -> bool {
        self.bias.is_some() || self.x3.is_some()
    }

    /// Whether rank `r` adds the epilogue to its own product.
    fn on_rank(&self, r: usize) -> bool {
        match self.numerics.epilogue {
            EpiloguePlacement::AfterReduce => false,
            EpiloguePlacement::IntoRankZero => r == 0,
            EpiloguePlacement::IntoEveryRank => true,
        }
    }

    /// One output element from its per-rank products `p[r]` (overwritten); `chunk` is its
    /// ring chunk within the reduced buffer.
    fn element(&self, i: usize, j: usize, chunk: usize, p: &mut [f32]) -> f32 {
        let nm = &self.numerics;
        let dt = nm.dtype;
        let after = nm.epilogue == EpiloguePlacement::AfterReduce && self.has_epilogue();
        match nm.accumulation {
            Accumulation::Kernel(order) => {
                // The kernel's epilogue on a rank: bias inside the matmul (f32, before the
                // conversion to the dtype), x3 by a vector add on the converted result (bf16:
                // widened to f32, added, CAST_RINT; f16: an f16 add, which is the f32 sum of
                // two f16 values rounded once to nearest even), so x3 costs a second rounding.
                for (r, v) in p.iter_mut().enumerate() {
                    let on_rank = self.on_rank(r);
                    if on_rank && let Some(b) = self.bias {
                        *v += b[j];
                    }
                    let x3 = self
                        .x3
                        .filter(|_| on_rank)
                        .map(|x3| x3[i * self.shape.n + j]);
                    match (nm.x3_entry, x3) {
                        (X3Entry::RoundedResult, Some(x)) => {
                            *v = dt.quantize_f32(
                                dt.quantize_f32(*v, nm.output_rounding) + x,
                                nm.x3_rounding,
                            );
                        }
                        (X3Entry::BeforeRounding, Some(x)) => {
                            *v = dt.quantize_f32(*v + x, nm.output_rounding);
                        }
                        (_, None) => *v = dt.quantize_f32(*v, nm.output_rounding),
                    }
                }
                let s = reduce_in_dtype_rounded(p, order, chunk, dt, nm.reduce_rounding);
                if after {
                    dt.quantize_f32(self.add_epilogue(s, i, j), nm.output_rounding)
                } else {
                    s
                }
            }
            Accumulation::HighPrecisionGolden => {
                for (r, slot) in p.iter_mut().enumerate() {
                    if self.on_rank(r) {
                        *slot = self.add_epilogue(*slot, i, j);
                    }
                }
                let mut s = p[0];
                for &v in &p[1..] {
                    s += v;
                }
                if after {
                    s = self.add_epilogue(s, i, j);
                }
                dt.quantize_f32(s, nm.output_rounding)
            }
        }
    }

    /// Computes the tile of rows `[row0, row0 + out.len() / N)` as one all-reduce buffer, in
    /// blocks of rows whose per-rank products fit [`PARTIALS_PER_BLOCK`].
    pub(crate) fn compute_tile(&self, row0: usize, out: &mut [f32], threads: Threads) {
        let Mc2Shape { k, n, .. } = self.shape;
        let len = out.len();
        let ranks = self.x1.len();
        let tile_rows = len / n;
        let block_rows = (PARTIALS_PER_BLOCK / (ranks * n)).max(1);
        let mut b0 = 0;
        while b0 < tile_rows {
            let h = block_rows.min(tile_rows - b0);
            let first = row0 + b0;
            let partials: Vec<Vec<f32>> = (0..ranks)
                .map(|r| {
                    let a = Packed::from_matrix(&self.x1[r][first * k..(first + h) * k], h, k, 0.0);
                    matmul_packed(&a, &self.x2p[r], threads)
                })
                .collect();
            let block = &mut out[b0 * n..(b0 + h) * n];
            fill_chunks(block, ROWS_PER_TASK * n, threads, |task, chunk| {
                let mut p = vec![0.0f32; ranks];
                let base = task * ROWS_PER_TASK * n;
                for (e, o) in chunk.iter_mut().enumerate() {
                    let in_block = base + e;
                    for (slot, part) in p.iter_mut().zip(&partials) {
                        *slot = part[in_block];
                    }
                    let idx = b0 * n + in_block;
                    let (i, j) = (row0 + idx / n, idx % n);
                    *o = self.element(i, j, ring_chunk_of(idx, len, ranks), &mut p);
                }
            });
            b0 += h;
        }
    }
}

/// MatmulAllReduce without tiling (the whole `[M, N]` output is one all-reduce buffer).
pub fn matmul_all_reduce(
    inputs: &MatmulAllReduceInputs<'_>,
    numerics: &Mc2Numerics,
    threads: Threads,
) -> Result<Vec<f32>, Mc2Error> {
    let m = inputs.shape.m;
    matmul_all_reduce_tiled(inputs, numerics, &[m], &[0], threads)
}

/// MatmulAllReduce with M split into `tiles` (heights, in row order, summing to M), each tile
/// all-reduced as its own buffer; the tiles are computed in `schedule` order (a permutation of
/// `0..tiles.len()`). The result does not depend on `schedule`.
pub fn matmul_all_reduce_tiled(
    inputs: &MatmulAllReduceInputs<'_>,
    numerics: &Mc2Numerics,
    tiles: &[usize],
    schedule: &[usize],
    threads: Threads,
) -> Result<Vec<f32>, Mc2Error> {
    let prepared = prepare(inputs, numerics, threads)?;
    let Mc2Shape { m, n, .. } = inputs.shape;
    if tiles.is_empty()
        || tiles.contains(&0)
        || tiles.iter().try_fold(0usize, |a, &t| a.checked_add(t)) != Some(m)
    {
        return Err(Mc2Error::BadTiling {
            m,
            tiles: tiles.to_vec(),
        });
    }
    let mut seen = vec![false; tiles.len()];
    let is_permutation = schedule.len() == tiles.len()
        && schedule
            .iter()
            .all(|&t| t < tiles.len() && !std::mem::replace(&mut seen[t], true));
    if !is_permutation {
        return Err(Mc2Error::BadSchedule {
            tiles: tiles.len(),
            schedule: schedule.to_vec(),
        });
    }
    let mut starts = Vec::with_capacity(tiles.len());
    let mut acc = 0;
    for &t in tiles {
        starts.push(acc);
        acc += t;
    }
    let mut out = vec![0.0f32; m * n];
    for &t in schedule {
        let (r0, rows) = (starts[t], tiles[t]);
        prepared.compute_tile(r0, &mut out[r0 * n..(r0 + rows) * n], threads);
    }
    Ok(out)
}
