//! Faults of MC2 matmul + all-reduce: tiles, ranks, the per-rank rounding, the reduction
//! order and its adds' tie rule, the epilogue (where x3 enters, its add's tie rule) and the
//! output rounding.

use crate::mc2::{Accumulation, EpiloguePlacement, ReductionOrder, X3Entry};
use crate::ops::fault::swap_rounding_ties;
use crate::ops::fault::tensors::{get_mut, param_usize};
use crate::ops::fault::{Edit, Fault, Requirement};
use crate::ops::{OpError, TensorMap};

const MC2: &[&str] = &["mc2_matmul_allreduce"];
const OP: &str = "mc2_matmul_allreduce";

/// The rows of the short last M tile are never computed (left 0).
fn drop_tail_tile(
    params: &serde_json::Value,
    _: &TensorMap,
    outputs: &mut TensorMap,
) -> Result<bool, OpError> {
    let tiles: Vec<usize> = params
        .get("tiles")
        .and_then(|t| t.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_u64())
                .map(|x| x as usize)
                .collect()
        })
        .unwrap_or_default();
    let (Some(&first), Some(&last)) = (tiles.first(), tiles.last()) else {
        return Ok(false);
    };
    if tiles.len() < 2 || last >= first {
        return Ok(false);
    }
    let (Some(m), Some(n)) = (param_usize(params, "m"), param_usize(params, "n")) else {
        return Ok(false);
    };
    let out = get_mut(OP, outputs, "out")?;
    let w = out.dtype.size_bytes();
    out.data[(m - last) * n * w..m * n * w].fill(0);
    Ok(true)
}

/// The last rank's contribution is missing (its x1 shard read as zeros).
fn skip_last_rank(params: &serde_json::Value, inputs: &mut TensorMap) -> Result<bool, OpError> {
    let ranks = param_usize(params, "ranks").unwrap_or(1);
    if ranks < 2 {
        return Ok(false);
    }
    let x1 = get_mut(OP, inputs, "x1")?;
    let shard = x1.data.len() / ranks;
    let len = x1.data.len();
    x1.data[len - shard..].fill(0);
    Ok(true)
}

pub(crate) static FAULTS: &[Fault] = &[
    Fault {
        name: "mc2-tail-tile-dropped",
        family: "mc2",
        ops: MC2,
        requirement: Requirement::Quick,
        description: "when M is not a multiple of the tile, the short last tile's rows are never computed",
        edit: Edit::outputs(drop_tail_tile),
    },
    Fault {
        name: "mc2-last-rank-skipped",
        family: "mc2",
        ops: MC2,
        requirement: Requirement::Quick,
        description: "the all-reduce leaves out the last rank's partial result",
        edit: Edit::inputs(skip_last_rank),
    },
    Fault {
        name: "mc2-partials-not-rounded",
        family: "mc2",
        ops: MC2,
        requirement: Requirement::Quick,
        description: "the per-rank f32 results are summed in f32 and rounded once, where the kernel rounds each rank's partial to the dtype before the reduce",
        edit: Edit::recipe(crate::recipe_edit!(crate::mc2::Mc2Numerics, |n| match n.accumulation {
            Accumulation::Kernel(_) => {
                n.accumulation = Accumulation::HighPrecisionGolden;
                true
            }
            Accumulation::HighPrecisionGolden => false,
        })),
    },
    Fault {
        name: "mc2-reduce-order-changed",
        family: "mc2",
        ops: MC2,
        requirement: Requirement::Quick,
        description: "the all-reduce adds the ranks' partials in another order (rank order -> ring -> binary tree -> rank order)",
        edit: Edit::recipe(crate::recipe_edit!(crate::mc2::Mc2Numerics, |n| match n.accumulation {
            Accumulation::Kernel(o) => {
                n.accumulation = Accumulation::Kernel(match o {
                    ReductionOrder::RankOrder => ReductionOrder::Ring,
                    ReductionOrder::Ring => ReductionOrder::BinaryTree,
                    ReductionOrder::BinaryTree => ReductionOrder::RankOrder,
                });
                true
            }
            Accumulation::HighPrecisionGolden => false,
        })),
    },
    Fault {
        name: "mc2-reduce-order-changed-back",
        family: "mc2",
        ops: MC2,
        requirement: Requirement::Quick,
        description: "the all-reduce adds the ranks' partials in the third order (rank order -> binary tree -> ring -> rank order), the alternative mc2-reduce-order-changed does not take",
        edit: Edit::recipe(crate::recipe_edit!(crate::mc2::Mc2Numerics, |n| match n.accumulation {
            Accumulation::Kernel(o) => {
                n.accumulation = Accumulation::Kernel(match o {
                    ReductionOrder::RankOrder => ReductionOrder::BinaryTree,
                    ReductionOrder::BinaryTree => ReductionOrder::Ring,
                    ReductionOrder::Ring => ReductionOrder::RankOrder,
                });
                true
            }
            Accumulation::HighPrecisionGolden => false,
        })),
    },
    Fault {
        name: "mc2-reduce-ties-away",
        family: "mc2",
        ops: MC2,
        requirement: Requirement::Quick,
        description: "the all-reduce's adds in the dtype break exact ties away from zero instead of to even",
        edit: Edit::recipe(crate::recipe_edit!(crate::mc2::Mc2Numerics, |n| match n.accumulation {
            Accumulation::Kernel(_) => swap_rounding_ties(&mut n.reduce_rounding),
            Accumulation::HighPrecisionGolden => false,
        })),
    },
    Fault {
        name: "mc2-x3-before-rounding",
        family: "mc2",
        ops: MC2,
        requirement: Requirement::Quick,
        description: "x3 is added in f32 to rank 0's product before its one rounding, where the kernel adds it to the rank's already rounded result and rounds again",
        edit: Edit::recipe(crate::recipe_edit!(crate::mc2::Mc2Numerics, |n| match n.accumulation {
            Accumulation::Kernel(_) if n.x3_entry == X3Entry::RoundedResult => {
                n.x3_entry = X3Entry::BeforeRounding;
                true
            }
            _ => false,
        })),
    },
    Fault {
        name: "mc2-x3-add-ties-away",
        family: "mc2",
        ops: MC2,
        requirement: Requirement::Quick,
        description: "the x3 vector add's rounding to the dtype breaks exact ties away from zero (CAST_ROUND) instead of to even (CAST_RINT)",
        edit: Edit::recipe(crate::recipe_edit!(crate::mc2::Mc2Numerics, |n| match n.accumulation {
            Accumulation::Kernel(_) => swap_rounding_ties(&mut n.x3_rounding),
            Accumulation::HighPrecisionGolden => false,
        })),
    },
    Fault {
        name: "mc2-epilogue-per-rank",
        family: "mc2",
        ops: MC2,
        requirement: Requirement::Quick,
        description: "bias and x3 are added on every rank before the reduce (summed ranks times) instead of on rank 0 only (a caller that passes the same bias to every rank)",
        edit: Edit::recipe(crate::recipe_edit!(crate::mc2::Mc2Numerics, |n| {
            if n.epilogue == EpiloguePlacement::IntoEveryRank {
                return false;
            }
            n.epilogue = EpiloguePlacement::IntoEveryRank;
            true
        })),
    },
    Fault {
        name: "mc2-epilogue-after-reduce",
        family: "mc2",
        ops: MC2,
        requirement: Requirement::Quick,
        description: "bias and x3 are added once after the reduce (and rounded again) instead of into rank 0's product before its rounding, as CANN's formula allreduce(x1 @ x2 + bias + x3) has it",
        edit: Edit::recipe(crate::recipe_edit!(crate::mc2::Mc2Numerics, |n| {
            if n.epilogue == EpiloguePlacement::AfterReduce {
                return false;
            }
            n.epilogue = EpiloguePlacement::AfterReduce;
            true
        })),
    },
    Fault {
        name: "mc2-output-rounding-ties-swapped",
        family: "mc2",
        ops: MC2,
        requirement: Requirement::Quick,
        description: "the casts to the output dtype break ties away from zero instead of to even",
        edit: Edit::recipe(crate::recipe_edit!(crate::mc2::Mc2Numerics, |n| swap_rounding_ties(&mut n.output_rounding))),
    },
];
