//! Operands and numerics parameters shared by the MC2 functional references.
//!
//! Tensors are row-major `f32` slices whose values must already lie on the input dtype's grid
//! (f16 or bf16): a value `v` is accepted iff rounding it to the dtype gives `v` back (any NaN
//! is accepted). Outputs are `f32` values on the output dtype's grid; [`encode_bits`] turns them
//! into the dtype's 16-bit encodings and [`decode_bits`] turns stored encodings into inputs. A `[B, S, K]` activation is the same memory as
//! `[B * S, K]`: use [`Mc2Shape::from_bsk`].

use super::error::Mc2Error;
use super::reduction::ReductionOrder;
use crate::formats::{bf16, f16, DType, Rounding};

/// Matmul shape of one rank: `x1 [m, k] x x2 [k, n]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mc2Shape {
    pub m: usize,
    pub k: usize,
    pub n: usize,
}

impl Mc2Shape {
    pub fn new(m: usize, k: usize, n: usize) -> Mc2Shape {
        Mc2Shape { m, k, n }
    }

    /// A `[B, S, K]` activation flattened to `M = B * S` rows (same memory).
    pub fn from_bsk(b: usize, s: usize, k: usize, n: usize) -> Result<Mc2Shape, Mc2Error> {
        let m = b.checked_mul(s).ok_or(Mc2Error::InvalidParameter {
            name: "B * S",
            value: format!("{b} * {s}"),
            reason: "overflows usize",
        })?;
        Ok(Mc2Shape { m, k, n })
    }
}

/// One rank's operands: `x1 [M, K]` and `x2 [K, N]`, row-major.
#[derive(Clone, Copy, Debug)]
pub struct RankOperands<'a> {
    pub x1: &'a [f32],
    pub x2: &'a [f32],
}

/// How the ranks' results are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Accumulation {
    /// As the kernel does it: each rank's f32 tile result is rounded to the output dtype, and
    /// the all-reduce sums in that dtype in the given order.
    Kernel(ReductionOrder),
    /// The high-precision golden of CANN's own tests: the ranks' f32 results are summed in f32
    /// in rank order and rounded once.
    HighPrecisionGolden,
}

/// Where `bias [N]` and `x3 [M, N]` enter.
///
/// CANN documents the fused op as `output = allreduce(x1 @ x2 + bias + x3)` (the
/// aclnnMatmulAllReduce and aclnnMatmulAllReduceV2 API pages): every rank adds the `bias` and
/// `x3` it is given to its own product, before the reduction. A suite states one copy of each,
/// so the caller passes them on rank 0 only, as vLLM's row-parallel linear layer passes its
/// bias on tensor-parallel rank 0 only: that is [`EpiloguePlacement::IntoRankZero`], the
/// default. The other two placements describe kernels (or callers) that do it another way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpiloguePlacement {
    /// Once, after the reduction: `round((reduced + bias) + x3)`, f32 adds left to right,
    /// one rounding to the output dtype (skipped when neither is present). Not what CANN
    /// documents: a kernel that does this is judged against rank 0's placement and fails.
    AfterReduce,
    /// Added in f32 to rank 0's product before its rounding: one copy enters the sum (the
    /// documented formula with bias and x3 passed to rank 0 only).
    #[default]
    IntoRankZero,
    /// Added in f32 to every rank's product before its rounding: `R` copies enter the sum (the
    /// documented formula with the same bias and x3 passed to every rank).
    IntoEveryRank,
}

/// Where `x3` enters a rank's result in [`Accumulation::Kernel`] mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum X3Entry {
    /// Added by a vector add to the rank's result already rounded to the dtype, then rounded
    /// again (the kernel's `matmul_all_reduce_add_x3`).
    #[default]
    RoundedResult,
    /// Added in f32 to the rank's product (with the bias) before its one rounding: the model
    /// before the kernel source was read, kept as a fault model that no preset uses.
    BeforeRounding,
}

fn rne() -> Rounding {
    Rounding::RNE
}

/// The numerics parameters of an MC2 reference run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mc2Numerics {
    /// Input and output dtype (f16 or bf16).
    pub dtype: DType,
    /// Rounding of each f32 result to the output dtype (the all-reduce's own adds are always
    /// IEEE nearest-even, see [`super::reduction`]).
    pub output_rounding: Rounding,
    pub accumulation: Accumulation,
    pub epilogue: EpiloguePlacement,
    /// Kernel mode: where x3 enters the rank's result.
    #[serde(default)]
    pub x3_entry: X3Entry,
    /// Kernel mode: the rounding of the x3 vector add to the dtype (CAST_RINT in the kernel).
    #[serde(default = "rne")]
    pub x3_rounding: Rounding,
    /// Kernel mode: the rounding of each of the all-reduce's adds in the dtype (IEEE
    /// nearest-even, see [`super::reduction`]).
    #[serde(default = "rne")]
    pub reduce_rounding: Rounding,
}

impl Mc2Numerics {
    /// Kernel numerics with RNE output rounding and the epilogue on rank 0.
    pub fn kernel(dtype: DType, order: ReductionOrder) -> Mc2Numerics {
        Mc2Numerics {
            dtype,
            output_rounding: Rounding::RNE,
            accumulation: Accumulation::Kernel(order),
            epilogue: EpiloguePlacement::IntoRankZero,
            x3_entry: X3Entry::RoundedResult,
            x3_rounding: Rounding::RNE,
            reduce_rounding: Rounding::RNE,
        }
    }

    /// High-precision golden numerics with RNE output rounding, the epilogue on rank 0.
    pub fn high_precision(dtype: DType) -> Mc2Numerics {
        Mc2Numerics {
            dtype,
            output_rounding: Rounding::RNE,
            accumulation: Accumulation::HighPrecisionGolden,
            epilogue: EpiloguePlacement::IntoRankZero,
            x3_entry: X3Entry::RoundedResult,
            x3_rounding: Rounding::RNE,
            reduce_rounding: Rounding::RNE,
        }
    }

    /// The numerics as ledger knobs `mc2.<recipe>.<knob>` (docs/ascend.md); `recipe` is the
    /// MC2 recipe name these numerics were built for. The destructuring makes a new field a
    /// compile error until it is a knob (the dtype is the case's, not a recipe knob).
    pub fn knobs(&self, recipe: &str) -> Vec<crate::knob::Knob> {
        let Mc2Numerics {
            dtype: _,
            output_rounding,
            accumulation,
            epilogue,
            x3_entry,
            x3_rounding,
            reduce_rounding,
        } = self;
        let k = |field: &str, value: String| {
            crate::knob::Knob::new(format!("mc2.{recipe}.{field}"), value)
        };
        let rounding = crate::knob::rounding_name(output_rounding);
        let (per_rank, dtype, order, epilogue_precision) = match accumulation {
            Accumulation::Kernel(order) => (
                format!("each rank's f32 result rounded to the dtype, {rounding}"),
                if *reduce_rounding == Rounding::RNE {
                    "the output dtype (f16/bf16), IEEE nearest-even adds".to_string()
                } else {
                    format!(
                        "the output dtype (f16/bf16), adds rounded {}",
                        crate::knob::rounding_name(reduce_rounding)
                    )
                },
                order.name().to_string(),
                match (x3_entry, *x3_rounding == Rounding::RNE) {
                    (X3Entry::RoundedResult, true) => {
                        "bias added in f32 before the rank's rounding; x3 added to the rounded \
                         result and rounded again to nearest even"
                            .to_string()
                    }
                    (X3Entry::RoundedResult, false) => format!(
                        "bias added in f32 before the rank's rounding; x3 added to the rounded \
                         result and rounded again, {}",
                        crate::knob::rounding_name(x3_rounding)
                    ),
                    (X3Entry::BeforeRounding, _) => {
                        "bias then x3 added in f32 before the rank's one rounding".to_string()
                    }
                },
            ),
            Accumulation::HighPrecisionGolden => (
                "none: f32 partials".to_string(),
                "f32".to_string(),
                "rank order".to_string(),
                "bias then x3 added in f32, left to right, before the one rounding".to_string(),
            ),
        };
        vec![
            k("per_rank_rounding", per_rank),
            k("reduction_dtype", dtype),
            k("reduction_order", order),
            k("output_rounding", rounding),
            k("epilogue", format!("{epilogue:?}")),
            k("epilogue_precision", epilogue_precision),
        ]
    }

    pub(crate) fn check(&self) -> Result<(), Mc2Error> {
        match self.dtype {
            DType::F16 | DType::Bf16 => Ok(()),
            other => Err(Mc2Error::UnsupportedDType {
                dtype: other.name(),
            }),
        }
    }
}

/// The 16-bit encodings of output values (which are on the dtype grid, so this is exact).
pub fn encode_bits(values: &[f32], dtype: DType) -> Result<Vec<u16>, Mc2Error> {
    match dtype {
        DType::F16 => Ok(values
            .iter()
            .map(|&v| f16::f32_to_f16(v, Rounding::RNE))
            .collect()),
        DType::Bf16 => Ok(values
            .iter()
            .map(|&v| bf16::f32_to_bf16(v, Rounding::RNE))
            .collect()),
        other => Err(Mc2Error::UnsupportedDType {
            dtype: other.name(),
        }),
    }
}

/// The f32 values of 16-bit encodings (exact), to build inputs from stored f16/bf16 tensors.
pub fn decode_bits(bits: &[u16], dtype: DType) -> Result<Vec<f32>, Mc2Error> {
    match dtype {
        DType::F16 => Ok(bits.iter().map(|&b| f16::f16_to_f32(b)).collect()),
        DType::Bf16 => Ok(bits.iter().map(|&b| bf16::bf16_to_f32(b)).collect()),
        other => Err(Mc2Error::UnsupportedDType {
            dtype: other.name(),
        }),
    }
}

pub(crate) fn check_ranks(count: usize) -> Result<(), Mc2Error> {
    if matches!(count, 1 | 2 | 4 | 8) {
        Ok(())
    } else {
        Err(Mc2Error::UnsupportedRankCount { ranks: count })
    }
}

pub(crate) fn check_dims(shape: Mc2Shape) -> Result<(), Mc2Error> {
    if shape.m == 0 {
        return Err(Mc2Error::ZeroDimension { name: "M" });
    }
    if shape.n == 0 {
        return Err(Mc2Error::ZeroDimension { name: "N" });
    }
    Ok(())
}

fn product(a: usize, b: usize, name: &str) -> Result<usize, Mc2Error> {
    a.checked_mul(b).ok_or_else(|| Mc2Error::InvalidParameter {
        name: "shape",
        value: format!("{name}: {a} x {b}"),
        reason: "element count overflows usize",
    })
}

/// Checks a tensor's length and that every value lies on the dtype grid.
pub(crate) fn check_tensor(
    name: &str,
    data: &[f32],
    rows: usize,
    cols: usize,
    dtype: DType,
) -> Result<(), Mc2Error> {
    let expected = product(rows, cols, name)?;
    if data.len() != expected {
        return Err(Mc2Error::ShapeMismatch {
            tensor: name.to_string(),
            expected,
            actual: data.len(),
        });
    }
    for (i, &v) in data.iter().enumerate() {
        if !v.is_nan() && dtype.quantize_f32(v, Rounding::RNE).to_bits() != v.to_bits() {
            return Err(Mc2Error::OffGrid {
                tensor: name.to_string(),
                index: i,
                value: v,
                dtype: dtype.name(),
            });
        }
    }
    Ok(())
}

/// The checks every MC2 op makes first, in this order: the numerics, the rank count, the
/// dimensions, then each rank's `x1 [M, K]` and `x2 [K, N]` and the optional `bias [1, N]`
/// (length, and every value on the dtype grid).
pub(crate) fn check_operands(
    numerics: &Mc2Numerics,
    ranks: &[RankOperands<'_>],
    shape: Mc2Shape,
    bias: Option<&[f32]>,
) -> Result<(), Mc2Error> {
    numerics.check()?;
    check_ranks(ranks.len())?;
    check_dims(shape)?;
    let Mc2Shape { m, k, n } = shape;
    let dt = numerics.dtype;
    for (r, op) in ranks.iter().enumerate() {
        check_tensor(&format!("x1[rank {r}]"), op.x1, m, k, dt)?;
        check_tensor(&format!("x2[rank {r}]"), op.x2, k, n, dt)?;
    }
    if let Some(b) = bias {
        check_tensor("bias", b, 1, n, dt)?;
    }
    Ok(())
}

/// `x2 [K, N]` transposed to `[N, K]` so that each output element is one contiguous dot.
pub(crate) fn transpose(x2: &[f32], k: usize, n: usize) -> Vec<f32> {
    let mut t = vec![0.0f32; k * n];
    for kk in 0..k {
        for j in 0..n {
            t[j * k + kk] = x2[kk * n + j];
        }
    }
    t
}
