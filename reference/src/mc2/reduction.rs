//! The all-reduce's summation in the output dtype, in a chosen order.
//!
//! In the MC2 kernels each rank's tile result is already rounded to the output dtype (f16 or
//! bf16) and HCCL sums those values in that dtype: every partial sum is rounded back to the
//! dtype. One step `add_in_dtype(a, b)` is the IEEE sum rounded to nearest-even in the dtype,
//! computed as the f32 sum then one RNE rounding to the dtype. That is the correctly rounded
//! dtype sum: double rounding through a format with `p' >= 2p + 2` bits is innocuous for
//! addition (Figueroa, 1995), and f32 has 24 >= 2 * 11 + 2 (f16) and >= 2 * 8 + 2 (bf16); the
//! dtype's whole exponent range, subnormals included, lies inside f32's (bf16 shares it).
//!
//! Orders over `R` ranks for an element in chunk `c` of the reduced buffer:
//! - [`ReductionOrder::RankOrder`]: `((v0 + v1) + v2) + ...`, the same for every element;
//! - [`ReductionOrder::Ring`]: the reduce-scatter phase of a ring all-reduce. The buffer is cut
//!   into `R` contiguous chunks, chunk `c` covering elements `[floor(c L / R),
//!   floor((c+1) L / R))` of a buffer of `L` elements. Chunk `c` travels the ring starting at
//!   rank `c + 1` and ends at rank `c`, each rank adding its own value to the incoming partial
//!   sum: `((v_{c+1} + v_{c+2}) + ...) + v_c` (indices mod R). Rank `c` then holds chunk `c`
//!   fully reduced (which is also what a reduce-scatter leaves on rank `c`), and the gather
//!   phase copies it unchanged;
//! - [`ReductionOrder::BinaryTree`]: recursive halving, `(v0 + v1) + (v2 + v3)` etc.: at each
//!   level neighbours `(2i, 2i+1)` are added; an odd last element moves up unchanged.

use crate::formats::{DType, Rounding};

/// The order in which the all-reduce sums the ranks' values (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReductionOrder {
    RankOrder,
    Ring,
    BinaryTree,
}

impl ReductionOrder {
    pub const ALL: [ReductionOrder; 3] = [
        ReductionOrder::RankOrder,
        ReductionOrder::Ring,
        ReductionOrder::BinaryTree,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ReductionOrder::RankOrder => "rank_order",
            ReductionOrder::Ring => "ring",
            ReductionOrder::BinaryTree => "binary_tree",
        }
    }
}

/// `a + b` rounded once to `dtype` (nearest, ties to even).
#[inline(always)]
pub fn add_in_dtype(a: f32, b: f32, dtype: DType) -> f32 {
    dtype.quantize_f32(a + b, Rounding::RNE)
}

/// The first element of ring chunk `c` in a buffer of `len` elements over `ranks` ranks.
#[inline]
pub fn ring_chunk_start(c: usize, len: usize, ranks: usize) -> usize {
    ((c as u128 * len as u128) / ranks as u128) as usize
}

/// The ring chunk that holds element `index` of a buffer of `len` elements.
#[inline]
pub fn ring_chunk_of(index: usize, len: usize, ranks: usize) -> usize {
    // The largest c with floor(c * len / ranks) <= index.
    let mut c = ((index as u128 * ranks as u128) / len.max(1) as u128) as usize;
    c = c.min(ranks - 1);
    while c + 1 < ranks && ring_chunk_start(c + 1, len, ranks) <= index {
        c += 1;
    }
    while c > 0 && ring_chunk_start(c, len, ranks) > index {
        c -= 1;
    }
    c
}

/// Sums `values[r]` (one per rank, each already in `dtype`) in `dtype`, in `order`; `chunk` is
/// the element's ring chunk (ignored by the other orders).
pub fn reduce_in_dtype(values: &[f32], order: ReductionOrder, chunk: usize, dtype: DType) -> f32 {
    reduce_in_dtype_rounded(values, order, chunk, dtype, Rounding::RNE)
}

/// [`reduce_in_dtype`] with each add rounded to `dtype` by `rounding` (nearest even in the
/// kernels; another rule is a fault model).
pub fn reduce_in_dtype_rounded(
    values: &[f32],
    order: ReductionOrder,
    chunk: usize,
    dtype: DType,
    rounding: Rounding,
) -> f32 {
    let add_in_dtype = |a: f32, b: f32, dtype: DType| dtype.quantize_f32(a + b, rounding);
    let r = values.len();
    match r {
        0 => 0.0,
        1 => values[0],
        _ => match order {
            ReductionOrder::RankOrder => values[1..]
                .iter()
                .fold(values[0], |acc, &v| add_in_dtype(acc, v, dtype)),
            ReductionOrder::Ring => {
                let start = (chunk + 1) % r;
                let mut acc = values[start];
                for step in 1..r {
                    acc = add_in_dtype(acc, values[(start + step) % r], dtype);
                }
                acc
            }
            ReductionOrder::BinaryTree => {
                let mut level: Vec<f32> = values.to_vec();
                let mut len = r;
                while len > 1 {
                    let half = len.div_ceil(2);
                    for i in 0..half {
                        level[i] = if 2 * i + 1 < len {
                            add_in_dtype(level[2 * i], level[2 * i + 1], dtype)
                        } else {
                            level[2 * i]
                        };
                    }
                    len = half;
                }
                level[0]
            }
        },
    }
}
