//! `dynamic_quant`: per-token symmetric INT8 quantisation of bf16/f16 activations, as
//! `torch_npu.npu_dynamic_quant` / `aclnnDynamicQuant` compute it (docs/ascend.md, rows
//! `dynq.*`).
//!
//! Params (JSON, unknown keys rejected): `{"tokens": T, "hidden": H, "dtype": "bf16"|"f16",
//! "smooth": false, "groups": E}`. `smooth = true` adds the `smooth_scales` input (`[H]`, or
//! `[E, H]` with `groups`); `groups = E` (the MoE form) also adds `group_index` (I32 `[E]`,
//! cumulative row counts, the last equal to T): row `r` takes the smooth row of the first group
//! whose end exceeds `r`.
//!
//! Tensors: `x` `[T, H]` (the dtype), outputs `y` I8 `[T, H]` and `scale` F32 `[T]` (what the
//! dequantisation multiplies by).
//!
//! Recipes ([`DqRecipe`]): `ascend_a2` is the A2 kernel's arithmetic as its public source
//! writes it (ops-nn `quant/dynamic_quant/op_kernel/dynamic_quant.h`): x (times the smooth
//! scale, both widened to f32 exactly, one f32 product) -> row max of |v| -> the quotient
//! `r = fl32(127 / amax)` -> the output scale `fl32(1 / r)` (not `amax / 127`) -> `fl32(v * r)`
//! -> int32 by CAST_RINT (nearest, ties to even) -> half -> int8 (both exact). `ops_nn_golden`
//! is the same repository's test golden: `scale = fl32(amax * fl32(1 / 127))`, `v / scale`,
//! numpy's round (ties to even). `oracle`: the exact quantisation, `scale = amax / 127` and
//! `y = round_half_even(v * 127 / amax)` computed exactly (F64 outputs; `y` already integral).
//!
//! Every rounding point is explicit: f32 products and quotients are IEEE binary32 operations
//! (round to nearest even; Rust never contracts them), the cast to an integer is the recipe's
//! [`RoundingMode`] done on the exact f32 value with integer arithmetic, no platform math.
//! Rows are independent, so the result is the same for any thread count.
//!
//! Regimes: `rounding_ties` (rows whose quotient is a power of two and elements on exact .5
//! ties with an even integer part, under the case's recipe) and `quant_edge_rows` (all-zero
//! rows, a row whose largest magnitude is negative, a row holding the dtype's largest finite
//! value, a row of tiny values, and rows whose scale and quantised values tell the recipe's
//! scale and quotient forms apart). See [`DynamicQuant::impose`].

pub(crate) mod faults;
mod preset;
mod recipe;
#[cfg(test)]
mod tests;

use super::dynamic_quant_variants::DqShape;
use super::path::{odd_above_one, ParamPath};
use super::preset_family::{self, PresetFamily};
use super::regime::Regime;
use super::{
    input, parse_params, ElemType, GenContext, OpCost, OpDescription, OpError, OpFamily, Tensor,
    TensorMap, TensorSpec,
};
use crate::formats::{bf16, f16, Rounding};
use crate::parallel::{map_tasks, Threads};
use crate::variant::{Dispatch, Platform};
pub use recipe::*;

/// The op name.
pub const OP: &str = "dynamic_quant";

#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    tokens: usize,
    hidden: usize,
    #[serde(default = "default_dtype")]
    dtype: String,
    #[serde(default)]
    smooth: bool,
    #[serde(default)]
    groups: Option<usize>,
}

fn default_dtype() -> String {
    super::DEFAULT_DTYPE.into()
}

/// A validated case.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Case {
    tokens: usize,
    hidden: usize,
    dtype: ElemType,
    smooth: bool,
    groups: Option<usize>,
}

impl Case {
    fn smooth_rows(&self) -> usize {
        self.groups.unwrap_or(1)
    }

    /// What the host tiling sees of the case.
    fn shape(&self) -> DqShape {
        DqShape {
            rows: self.tokens,
            row_len: self.hidden,
            f16: self.dtype == ElemType::F16,
            smooth: self.smooth,
            groups: self.groups,
        }
    }
}

/// The kernel variant a case with these parameters runs on `platform` (the platform
/// [`DISPATCHING`] describes when `None`).
pub fn dispatch(
    params: &serde_json::Value,
    platform: Option<&Platform>,
) -> Result<Dispatch, OpError> {
    let c = DynamicQuant.case(params)?;
    Ok(super::dynamic_quant_variants::dispatch(
        &c.shape(),
        platform.unwrap_or(&super::dynamic_quant_variants::MODELLED),
    ))
}

/// The `dynamic_quant` op family.
pub struct DynamicQuant;

fn invalid(param: &str, message: impl Into<String>) -> OpError {
    OpError::invalid_param(OP, param, message)
}

fn failed(message: impl std::fmt::Display) -> OpError {
    OpError::failed(OP, message)
}

/// The columns whose smooth scale the regimes set to 1/2 (exact products), at most.
const POW2_COLUMNS: usize = 9;
/// Zero rows `quant_edge_rows` plants (each kills a wrong zero-row scale by one element).
const ZERO_ROWS: usize = 8;
/// Rows `quant_edge_rows` gives a scale-form witness.
const WITNESS_ROWS: usize = 8;
/// Rows `rounding_ties` plants, and the ties in each.
const TIE_ROWS: usize = 2;
const TIES_PER_ROW: usize = 8;

fn decode(dtype: ElemType, bits: u16) -> f32 {
    match dtype {
        ElemType::F16 => f16::f16_to_f32(bits),
        _ => bf16::bf16_to_f32(bits),
    }
}

fn encode(dtype: ElemType, v: f64) -> u16 {
    match dtype {
        ElemType::F16 => f16::f64_to_f16(v, Rounding::RNE),
        _ => bf16::f64_to_bf16(v, Rounding::RNE),
    }
}

/// The largest finite value of the dtype.
fn max_finite(dtype: ElemType) -> f32 {
    match dtype {
        ElemType::F16 => 65504.0,
        _ => bf16::bf16_to_f32(0x7F7F),
    }
}

impl DynamicQuant {
    fn specs(&self, c: &Case) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
        let mut inputs = vec![TensorSpec::new(
            "x",
            c.dtype,
            vec![c.tokens, c.hidden],
            &["t", "h"],
        )];
        if c.smooth {
            inputs.push(match c.groups {
                None => TensorSpec::new("smooth_scales", c.dtype, vec![c.hidden], &["h"]),
                Some(e) => {
                    TensorSpec::new("smooth_scales", c.dtype, vec![e, c.hidden], &["e", "h"])
                }
            });
        }
        if let Some(e) = c.groups {
            inputs.push(TensorSpec::new(
                "group_index",
                ElemType::I32,
                vec![e],
                &["e"],
            ));
        }
        let outputs = vec![
            TensorSpec::new("y", ElemType::I8, vec![c.tokens, c.hidden], &["t", "h"]),
            TensorSpec::new("scale", ElemType::F32, vec![c.tokens], &["t"]),
        ];
        (inputs, outputs)
    }

    /// The smooth row index of every token (`lookup` decides the boundary rows).
    fn row_groups(
        &self,
        c: &Case,
        group_index: Option<&[i64]>,
        lookup: GroupLookup,
    ) -> Result<Vec<usize>, OpError> {
        let Some(ends) = group_index else {
            return Ok(vec![0; c.tokens]);
        };
        let mut prev = 0i64;
        for (g, &e) in ends.iter().enumerate() {
            if e < prev {
                return Err(OpError::InvalidInput {
                    op: OP.into(),
                    input: "group_index".into(),
                    message: format!("entry {g} ({e}) is below the one before it ({prev}): the ends must not decrease"),
                });
            }
            prev = e;
        }
        if ends.last().copied() != Some(c.tokens as i64) {
            return Err(OpError::InvalidInput {
                op: OP.into(),
                input: "group_index".into(),
                message: format!(
                    "the last entry is {:?}, the API requires the number of rows ({})",
                    ends.last(),
                    c.tokens
                ),
            });
        }
        Ok((0..c.tokens)
            .map(|r| {
                let r = r as i64;
                ends.iter()
                    .position(|&e| match lookup {
                        GroupLookup::FirstEndAbove => e > r,
                        GroupLookup::FirstEndAtOrAbove => e >= r,
                    })
                    .unwrap_or(ends.len() - 1)
            })
            .collect())
    }

    /// The inputs decoded: x and smooth as f32 (exact), the row -> smooth row map.
    #[allow(clippy::type_complexity)]
    fn decoded(
        &self,
        c: &Case,
        inputs: &TensorMap,
        lookup: GroupLookup,
    ) -> Result<(Vec<u16>, Option<Vec<u16>>, Vec<usize>), OpError> {
        let (specs, _) = self.specs(c);
        let get = |name: &str| -> Result<&Tensor, OpError> {
            let spec = specs
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| failed(format!("no input `{name}`")))?;
            input(OP, inputs, spec)
        };
        let x = get("x")?.bits16().map_err(failed)?;
        let smooth = if c.smooth {
            Some(get("smooth_scales")?.bits16().map_err(failed)?)
        } else {
            None
        };
        let gi = if c.groups.is_some() {
            Some(get("group_index")?.to_i64_vec().map_err(failed)?)
        } else {
            None
        };
        let rows = self.row_groups(c, gi.as_deref(), lookup)?;
        Ok((x, smooth, rows))
    }

    /// Rows a set of regimes needs.
    fn rows_needed(regimes: &[Regime]) -> usize {
        regimes
            .iter()
            .map(|r| match r {
                Regime::RoundingTies => TIE_ROWS,
                Regime::QuantEdgeRows => ZERO_ROWS + 3 + WITNESS_ROWS,
                _ => 0,
            })
            .sum()
    }
}

/// Claims about `dynamic_quant` (the A2 kernel's arithmetic) fixed in the code rather than a
/// recipe field (the MoE dispatch's quantisation rests on them too).
pub const CLAIMS: [&str; 7] = [
    "dynq.claim.widening",
    "dynq.claim.int_chain",
    "dynq.claim.f32_subnormals",
    "dynq.claim.tiny_rows",
    "dynq.claim.non_finite",
    "dynq.claim.ub_size",
    "dynq.claim.division",
];

impl OpFamily for DynamicQuant {
    fn faults(&self) -> Vec<&'static crate::ops::fault::Fault> {
        faults::FAULTS.iter().collect()
    }

    fn knob_family(&self) -> &'static str {
        "dynq"
    }
    fn kernel_variants(&self) -> &'static [&'static crate::variant::KernelVariant] {
        &super::dynamic_quant_variants::VARIANTS
    }
    fn dispatch(
        &self,
        recipe: &str,
        params: &serde_json::Value,
        platform: Option<&crate::variant::Platform>,
    ) -> Option<crate::variant::Dispatch> {
        if recipe == DISPATCHING {
            return dispatch(params, platform).ok();
        }
        crate::variant::Dispatch::named(self.kernel_variants(), recipe)
    }
    fn preset_knobs(
        &self,
        preset: &str,
        dtype: crate::formats::DType,
        edit: Option<&crate::recipe_edit::RecipeEdit>,
    ) -> Option<Vec<crate::knob::Knob>> {
        let _ = dtype;
        let variants = self.kernel_variants();
        preset_family::variant_preset_knobs(
            variants,
            preset,
            edit,
            DqRecipe::preset,
            DqRecipe::knobs,
            &CLAIMS,
        )
    }
    fn knob_ids(&self) -> Vec<String> {
        preset_family::variant_knob_ids(
            self.kernel_variants(),
            DqRecipe::preset,
            DqRecipe::knobs,
            &CLAIMS,
        )
    }

    fn name(&self) -> &'static str {
        OP
    }

    fn default_dtype(&self) -> Option<&'static str> {
        Some(super::DEFAULT_DTYPE)
    }

    fn recipes(&self) -> Vec<&'static str> {
        PRESETS.to_vec()
    }

    fn paths(&self, params: &serde_json::Value) -> Result<Vec<ParamPath>, OpError> {
        let p: Params = parse_params(OP, params)?;
        Ok(vec![
            ParamPath::new(
                "group_index",
                "MoE group indices: each row's smooth-scale row is its expert's, found from the running token counts (the MoE kernels)",
                p.groups.is_some(),
            ),
            ParamPath::new("smooth_scales", "smooth scales multiplied in before the row maximum", p.smooth),
            ParamPath::new(
                "odd_tokens",
                "an odd number of rows above 1: a row loop or a multi-row kernel that assumes pairs shows",
                odd_above_one(p.tokens),
            ),
            ParamPath::new(
                "odd_hidden",
                "an odd row length: the row's tail past its last 16-element block, which the kernels pad in UB, is judged",
                odd_above_one(p.hidden),
            ),
        ])
    }

    fn describe(&self, params: &serde_json::Value) -> Result<OpDescription, OpError> {
        let c = self.case(params)?;
        let (inputs, outputs) = self.specs(&c);
        let bytes = super::io_bytes(&inputs, &outputs);
        // Per element: the smooth product (when asked), |v| and the max, the scaling
        // multiply; the casts are not counted.
        let per = if c.smooth { 3.0 } else { 2.0 };
        Ok(OpDescription {
            inputs,
            outputs,
            cost: OpCost {
                flops: per * (c.tokens * c.hidden) as f64,
                bytes,
                compute: c.dtype,
            },
        })
    }

    fn generate(
        &self,
        params: &serde_json::Value,
        ctx: &mut GenContext,
    ) -> Result<TensorMap, OpError> {
        let c = self.case(params)?;
        super::refuse_non_finite(OP, &ctx.dist)?;
        let (specs, _) = self.specs(&c);
        let mut out = TensorMap::new();
        for s in &specs {
            let t = match s.name.as_str() {
                "x" => ctx.rounded_tensor(
                    c.dtype,
                    s.shape.clone(),
                    &super::special_values(c.dtype),
                    Rounding::RNE,
                ),
                "smooth_scales" => {
                    // SmoothQuant factors: positive, of order 1, in [0.25, 1).
                    let n: usize = s.shape.iter().product();
                    let bits: Vec<u16> = (0..n)
                        .map(|_| encode(c.dtype, 0.25 + 0.75 * ctx.unit()))
                        .collect();
                    Tensor::from_bits16(c.dtype, s.shape.clone(), &bits)
                }
                "group_index" => {
                    let e = c.groups.unwrap_or(1);
                    // E - 1 distinct cut points in 1..T: every group non-empty.
                    let mut cuts: Vec<usize> = (1..c.tokens).collect();
                    ctx.shuffle(&mut cuts);
                    let mut ends: Vec<i32> = cuts[..e - 1].iter().map(|&v| v as i32).collect();
                    ends.sort_unstable();
                    ends.push(c.tokens as i32);
                    Tensor::from_i32(vec![e], &ends)
                }
                other => return Err(failed(format!("no generator for `{other}`"))),
            };
            out.insert(s.name.clone(), t);
        }
        Ok(out)
    }

    fn regimes(&self) -> &'static [Regime] {
        &[Regime::RoundingTies, Regime::QuantEdgeRows]
    }

    fn check_regimes(&self, params: &serde_json::Value, regimes: &[Regime]) -> Result<(), OpError> {
        preset_family::only_own_regimes(OP, regimes)?;
        let c = self.case(params)?;
        let need = Self::rows_needed(regimes);
        if need > c.tokens {
            return Err(OpError::Regime {
                op: OP.into(),
                regime: regimes.last().map_or("", |r| r.name()).into(),
                message: format!(
                    "the declared regimes take {need} rows of their own, the case has {} tokens",
                    c.tokens
                ),
            });
        }
        if !regimes.is_empty() && c.hidden < POW2_COLUMNS + 1 {
            return Err(OpError::Regime {
                op: OP.into(),
                regime: regimes[0].name().into(),
                message: format!(
                    "hidden {} is below {}: the constructions place up to {POW2_COLUMNS} chosen elements in a row",
                    c.hidden,
                    POW2_COLUMNS + 1
                ),
            });
        }
        Ok(())
    }

    preset_family::preset_family_methods!();
}

/// The recipe the regimes are constructed for: the case's, or the kernel variant the case's
/// shape lands on when the case is judged against the oracle (its ties and witnesses hold for
/// the exact arithmetic too).
fn regime_recipe(c: &Case, ctx: &GenContext) -> DqRecipe {
    ctx.recipe
        .as_deref()
        .and_then(|name| DynamicQuant::recipe_preset(c, name))
        .or_else(|| DynamicQuant::recipe_preset(c, DISPATCHING))
        .expect("every shape dispatches to a variant preset")
}

/// Every scale form and apply form, for the witnesses.
const SCALE_FORMS: [ScaleForm; 3] = [
    ScaleForm::QuotientThenReciprocal,
    ScaleForm::MaxTimesInverse,
    ScaleForm::MaxDivided,
];

impl DynamicQuant {
    /// A row max `a` (a positive dtype value of 2^-8..2^8) whose scale under the recipe's
    /// scale form differs from the scale of both other forms, drawn from the stream until
    /// found (about one draw in three for the kernel's form, one in twenty for the golden's).
    ///
    /// The apply forms (multiply by the quotient, divide by the scale) have no such witness
    /// among plain inputs: for 16-bit `x` and `a`, the exact `127 x / a` is either a tie
    /// exactly or at least about 2^-9 relative away from one, far beyond either form's f32
    /// error, so the two forms agree on every element except exact ties, and an exact tie
    /// needs `a = 127 * 2^j` (bf16), where both forms are exact.
    fn witness(
        &self,
        dtype: ElemType,
        rec: &DqRecipe,
        ctx: &mut GenContext,
    ) -> Result<f64, OpError> {
        for _ in 0..4096 {
            let e2 = ctx.below(16) as i32 - 8;
            let a = decode(dtype, encode(dtype, (1.0 + ctx.unit()) * pow2(e2)));
            let mine = rec.scale_and_factor(a).0;
            let distinct = SCALE_FORMS.iter().filter(|&&f| f != rec.scale).all(|&f| {
                let o = DqRecipe { scale: f, ..*rec };
                o.scale_and_factor(a).0.to_bits() != mine.to_bits()
            });
            if distinct {
                return Ok(a as f64);
            }
        }
        Err(failed(
            "quant_edge_rows: no scale-form witness found within the search bound",
        ))
    }
}

/// 2^k exactly (k within f64's normal range).
fn pow2(k: i32) -> f64 {
    f64::from_bits(((1023 + k as i64) as u64) << 52)
}
