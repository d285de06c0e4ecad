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

use super::dynamic_quant_variants::DqShape;
use super::path::{odd_above_one, ParamPath};
use super::preset_family::{self, PresetFamily};
use super::regime::Regime;
use super::{
    input, parse_params, ElemType, GenContext, OpCost, OpDescription, OpError, OpFamily, Tensor,
    TensorMap, TensorSpec,
};
use crate::formats::{bf16, f16, Rounding, RoundingMode};
use crate::knob::Knob;
use crate::parallel::{map_tasks, Threads};
use crate::variant::{Dispatch, Platform};

/// The op name.
pub const OP: &str = "dynamic_quant";

/// How the output scale (and the factor the values are multiplied or divided by) is formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleForm {
    /// `r = fl32(qmax / amax)`, `scale = fl32(1 / r)` (the A2 kernel: a vector Div of the
    /// constant by the row max, then a scalar reciprocal for the stored scale).
    QuotientThenReciprocal,
    /// `scale = fl32(amax * fl32(1 / qmax))` (the ops-nn test golden).
    MaxTimesInverse,
    /// `scale = fl32(amax / qmax)` (the formula of the API page taken literally).
    MaxDivided,
}

impl ScaleForm {
    /// The stored scale as a formula.
    pub fn formula(self) -> &'static str {
        match self {
            ScaleForm::QuotientThenReciprocal => "scale = fl32(1 / fl32(127 / max))",
            ScaleForm::MaxTimesInverse => "scale = fl32(max x fl32(1 / 127))",
            ScaleForm::MaxDivided => "scale = fl32(max / 127)",
        }
    }

    /// The other kernels' form: the reciprocal of the quotient and `max x fl32(1/127)` swap
    /// (the API's literal `max / 127` is its own fault).
    pub fn swapped(self) -> ScaleForm {
        match self {
            ScaleForm::QuotientThenReciprocal => ScaleForm::MaxTimesInverse,
            ScaleForm::MaxTimesInverse | ScaleForm::MaxDivided => ScaleForm::QuotientThenReciprocal,
        }
    }
}

/// How the values are brought to the integer range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApplyForm {
    /// `fl32(v * r)` with the quotient `r = fl32(qmax / amax)` (the kernel's Muls).
    MultiplyQuotient,
    /// `fl32(v / scale)` with the output scale (the golden's division).
    DivideByScale,
}

/// Where the smooth scales enter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SmoothOrder {
    /// `v = fl32(x * s)` before the row max (the kernel and the API formula).
    BeforeMax,
    /// The row max and scale from `x` alone, `s` multiplied in afterwards (a bug).
    AfterMax,
    /// `s` ignored (a bug).
    Skipped,
}

/// The scale of an all-zero row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZeroRow {
    /// Whatever the recipe's own arithmetic gives (`1 / (127 / 0) = 0`, `0 * (1/127) = 0`),
    /// and `y = 0` (the cast of the NaN `0 * Inf` or `0 / 0` is taken as 0: assumed).
    Arithmetic,
    /// The scale is NaN (a kernel that divides by the row max unguarded; a bug).
    NanScale,
}

/// How a row finds its smooth row under `group_index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupLookup {
    /// The first group whose cumulative end is greater than the row index (the kernel).
    FirstEndAbove,
    /// The first group whose end is at least the row index: the first row of each group takes
    /// the previous group's smooth row (an off-by-one; a bug).
    FirstEndAtOrAbove,
}

/// The numerics of one `dynamic_quant` computation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DqRecipe {
    /// The largest quantised magnitude the scale maps the row max to (127 for int8).
    pub qmax: f32,
    pub scale: ScaleForm,
    pub apply: ApplyForm,
    /// The f32 -> integer cast.
    pub rounding: RoundingMode,
    /// The saturation bounds of the int8 result.
    pub saturation: (i32, i32),
    pub smooth: SmoothOrder,
    /// One scale for the whole tensor instead of one per token (a bug).
    pub per_tensor: bool,
    pub zero_row: ZeroRow,
    /// Subnormal inputs read as zero (a bug of a denormals-are-zero load).
    pub flush_input_subnormals: bool,
    /// The row max taken of the signed values instead of their magnitudes (a bug).
    pub signed_max: bool,
    pub group_lookup: GroupLookup,
}

/// The recipe names: `ascend_a2` (the A2 host tiling's dispatch: each case runs the preset of
/// the kernel variant its shape lands on, [`super::dynamic_quant_variants`]), the variant
/// presets themselves, and `ops_nn_golden`.
pub const PRESETS: [&str; 10] = [
    "ascend_a2",
    "a2_plain",
    "a2_db_old",
    "a2_db",
    "a2_large_shape",
    "a2_moe",
    "a2_moe_large_shape",
    "a2_multi_row",
    "a2_single_row",
    "ops_nn_golden",
];

/// The recipe name that dispatches by shape.
pub const DISPATCHING: &str = "ascend_a2";

impl DqRecipe {
    /// The A2 kernels' arithmetic with the stored scale in `scale` form: x (times the smooth
    /// scale) widened to f32, the row max of the magnitudes, the quotient `fl32(127 / max)`
    /// the values are multiplied by, CAST_RINT to an integer.
    pub fn kernel(scale: ScaleForm) -> DqRecipe {
        DqRecipe {
            qmax: 127.0,
            scale,
            apply: ApplyForm::MultiplyQuotient,
            rounding: RoundingMode::NearestTiesToEven,
            saturation: (-128, 127),
            smooth: SmoothOrder::BeforeMax,
            per_tensor: false,
            zero_row: ZeroRow::Arithmetic,
            flush_input_subnormals: false,
            signed_max: false,
            group_lookup: GroupLookup::FirstEndAbove,
        }
    }

    /// A fixed preset by name: a variant's (its kernel's scale form) or the ops-nn golden's.
    /// `None` for [`DISPATCHING`], whose preset depends on the case's shape
    /// ([`super::dynamic_quant_variants::dispatch`]).
    pub fn preset(name: &str) -> Option<DqRecipe> {
        if name == "ops_nn_golden" {
            return Some(DqRecipe {
                scale: ScaleForm::MaxTimesInverse,
                apply: ApplyForm::DivideByScale,
                ..DqRecipe::kernel(ScaleForm::MaxTimesInverse)
            });
        }
        super::dynamic_quant_variants::scale_form(name).map(DqRecipe::kernel)
    }

    /// The ledger knobs of this recipe as preset `preset` (docs/ascend.md, ids
    /// `dynq.<preset>.<field>`).
    pub fn knobs(&self, preset: &str) -> Vec<Knob> {
        self.knobs_under(&format!("dynq.{preset}"))
    }

    /// The ledger knobs of this recipe with ids `<prefix>.<field>` (another op that quantises
    /// with this arithmetic names them under its own prefix); destructures the struct, so a
    /// new field does not compile until it has a knob.
    pub fn knobs_under(&self, prefix: &str) -> Vec<Knob> {
        let DqRecipe {
            qmax,
            scale,
            apply,
            rounding,
            saturation,
            smooth,
            per_tensor,
            zero_row,
            flush_input_subnormals,
            signed_max,
            group_lookup,
        } = self;
        vec![
            Knob::new(format!("{prefix}.qmax"), format!("{qmax}")),
            Knob::new(
                format!("{prefix}.scale"),
                format!("{scale:?}: {}", scale.formula()),
            ),
            Knob::new(format!("{prefix}.apply"), format!("{apply:?}")),
            Knob::new(
                format!("{prefix}.rounding"),
                crate::knob::rounding_name(&Rounding::ieee(*rounding)),
            ),
            Knob::new(
                format!("{prefix}.saturation"),
                format!("[{}, {}]", saturation.0, saturation.1),
            ),
            Knob::new(format!("{prefix}.smooth"), format!("{smooth:?}")),
            Knob::new(format!("{prefix}.per_tensor"), format!("{per_tensor}")),
            Knob::new(format!("{prefix}.zero_row"), format!("{zero_row:?}")),
            Knob::new(
                format!("{prefix}.flush_input_subnormals"),
                format!("{flush_input_subnormals}"),
            ),
            Knob::new(format!("{prefix}.signed_max"), format!("{signed_max}")),
            Knob::new(
                format!("{prefix}.group_lookup"),
                format!("{group_lookup:?}"),
            ),
        ]
    }

    /// The output scale and the factor of one row with row max `amax` (> 0, finite):
    /// `(scale, factor)`, where the quantised value is `v * factor` or `v / factor` by
    /// [`DqRecipe::apply`].
    pub fn scale_and_factor(&self, amax: f32) -> (f32, f32) {
        let r = self.qmax / amax;
        let scale = match self.scale {
            ScaleForm::QuotientThenReciprocal => 1.0 / r,
            ScaleForm::MaxTimesInverse => amax * (1.0 / self.qmax),
            ScaleForm::MaxDivided => amax / self.qmax,
        };
        match self.apply {
            ApplyForm::MultiplyQuotient => (scale, r),
            ApplyForm::DivideByScale => (scale, scale),
        }
    }

    /// The f32 value the recipe casts to an integer, for an element `v` of a row with
    /// `factor` (from [`DqRecipe::scale_and_factor`]).
    pub fn scaled(&self, v: f32, factor: f32) -> f32 {
        match self.apply {
            ApplyForm::MultiplyQuotient => v * factor,
            ApplyForm::DivideByScale => v / factor,
        }
    }

    /// The cast of an f32 to int8: the recipe's rounding to an integer, then saturation. NaN
    /// gives 0 and infinities the bounds (assumed: the source leaves them undefined).
    pub fn to_int8(&self, v: f32) -> i8 {
        let (lo, hi) = self.saturation;
        if v.is_nan() {
            return 0;
        }
        let i = round_to_int(v, self.rounding);
        i.clamp(lo as i64, hi as i64) as i8
    }
}

/// `v` rounded to an integer with `mode`, exactly (integer arithmetic on the f32's value;
/// magnitudes beyond 2^40 clamp, far outside int8 anyway).
pub fn round_to_int(v: f32, mode: RoundingMode) -> i64 {
    const LIMIT: f32 = 1099511627776.0; // 2^40
    if v >= LIMIT {
        return 1 << 40;
    }
    if v <= -LIMIT {
        return -(1 << 40);
    }
    // Exact: |v| < 2^40, so the truncation and the fraction are exact in f64.
    let x = v as f64;
    let t = x as i64; // toward zero
    let frac = x - t as f64; // exact, in (-1, 1)
    let away = if frac > 0.0 { 1 } else { -1 };
    let half = frac.abs();
    match mode {
        RoundingMode::TowardZero => t,
        RoundingMode::TowardPositive => t + i64::from(frac > 0.0),
        RoundingMode::TowardNegative => t - i64::from(frac < 0.0),
        RoundingMode::ToOdd => {
            if frac != 0.0 && t % 2 == 0 {
                t + away
            } else {
                t
            }
        }
        RoundingMode::NearestTiesToEven | RoundingMode::NearestTiesAway => {
            if half > 0.5 {
                t + away
            } else if half < 0.5 {
                t
            } else if mode == RoundingMode::NearestTiesAway || t % 2 != 0 {
                t + away
            } else {
                t
            }
        }
    }
}

/// The exact quantisation of one row of exact values `v` (f64; products of two 16-bit floats
/// are exact in f64): `(scale, y)` with `scale = amax / 127` (the f64 quotient, whose rounding
/// to f32 is the correctly rounded f32 quotient: `amax` has at most 22 significant bits, so no
/// f64 quotient lands on an f32 midpoint it is not exactly at) and `y = round_half_even(v *
/// 127 / amax)`: `v * 127` is exact and a tie of the quotient is exactly representable, so the
/// one f64 division decides it correctly.
pub fn oracle_row(v: &[f64]) -> (f64, Vec<i8>) {
    let amax = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if amax == 0.0 {
        return (0.0, vec![0; v.len()]);
    }
    let y = v
        .iter()
        .map(|&x| {
            let q = x * 127.0 / amax;
            let t = q as i64;
            let frac = q - t as f64;
            let away = if frac > 0.0 { 1 } else { -1 };
            let i = if frac.abs() > 0.5 || (frac.abs() == 0.5 && t % 2 != 0) {
                t + away
            } else {
                t
            };
            i.clamp(-128, 127) as i8
        })
        .collect();
    (amax / 127.0, y)
}

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
        super::dynamic_quant_variants::by_preset(preset)?;
        DqRecipe::preset(preset).map(|r| {
            let mut k = crate::recipe_edit::edited(r, edit).knobs(preset);
            k.extend(CLAIMS.iter().map(|&id| crate::knob::Knob::claim(id)));
            k
        })
    }
    fn knob_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = super::dynamic_quant_variants::VARIANTS
            .iter()
            .filter_map(|v| DqRecipe::preset(v.preset).map(|r| r.knobs(v.preset)))
            .flat_map(|k| k.into_iter().map(|k| k.id))
            .collect();
        ids.extend(CLAIMS.iter().map(|id| id.to_string()));
        ids
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

impl PresetFamily for DynamicQuant {
    type Case = Case;
    type Recipe = DqRecipe;
    const PRESETS: &'static [&'static str] = &PRESETS;

    fn case(&self, v: &serde_json::Value) -> Result<Case, OpError> {
        let p: Params = parse_params(OP, v)?;
        let dtype = super::x_dtype_16(OP, &p.dtype)?;
        if p.tokens == 0 || p.hidden == 0 {
            return Err(invalid(
                if p.tokens == 0 { "tokens" } else { "hidden" },
                "must be positive",
            ));
        }
        if p.tokens.checked_mul(p.hidden).is_none_or(|n| n > 1 << 30) {
            return Err(invalid("tokens/hidden", "more than 2^30 elements"));
        }
        if let Some(e) = p.groups {
            if !p.smooth {
                return Err(invalid(
                    "groups",
                    "group_index selects smooth rows: it needs `smooth = true`",
                ));
            }
            if e == 0 || e > p.tokens {
                return Err(invalid(
                    "groups",
                    format!(
                        "{e}: between 1 and tokens ({}), every group non-empty",
                        p.tokens
                    ),
                ));
            }
        }
        Ok(Case {
            tokens: p.tokens,
            hidden: p.hidden,
            dtype,
            smooth: p.smooth,
            groups: p.groups,
        })
    }

    fn run_oracle(
        &self,
        c: &Case,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let (x, smooth, rows) = self.decoded(c, inputs, GroupLookup::FirstEndAbove)?;
        let h = c.hidden;
        let parts = map_tasks(c.tokens, threads, |t| {
            let v: Vec<f64> = (0..h)
                .map(|j| {
                    let a = decode(c.dtype, x[t * h + j]) as f64;
                    match smooth.as_ref() {
                        Some(s) => a * decode(c.dtype, s[rows[t] * h + j]) as f64,
                        None => a,
                    }
                })
                .collect();
            oracle_row(&v)
        });
        let mut y = Vec::with_capacity(c.tokens * h);
        let mut scale = Vec::with_capacity(c.tokens);
        for (s, row) in parts {
            scale.push(s);
            y.extend(row.into_iter().map(f64::from));
        }
        Ok(TensorMap::from([
            ("y".to_string(), Tensor::of_f64(vec![c.tokens, h], &y)),
            ("scale".to_string(), Tensor::of_f64(vec![c.tokens], &scale)),
        ]))
    }

    /// Runs `recipe` (edited or not) on the inputs.
    fn run_recipe(
        &self,
        c: &Case,
        r: &DqRecipe,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let (x, smooth, rows) = self.decoded(c, inputs, r.group_lookup)?;
        let h = c.hidden;
        let dtype = c.dtype;
        let load = |bits: u16| -> f32 {
            if r.flush_input_subnormals && dtype.is_half_subnormal(bits) {
                if bits & 0x8000 != 0 {
                    -0.0
                } else {
                    0.0
                }
            } else {
                decode(dtype, bits)
            }
        };
        // The values the row max is taken of, per row (f32, the kernel's one rounding of
        // x * s), and the values quantised.
        let row_values = |t: usize| -> (Vec<f32>, Vec<f32>) {
            let xs: Vec<f32> = x[t * h..(t + 1) * h].iter().map(|&b| load(b)).collect();
            let Some(s) = smooth.as_ref() else {
                return (xs.clone(), xs);
            };
            let srow = &s[rows[t] * h..(rows[t] + 1) * h];
            let prod: Vec<f32> = xs
                .iter()
                .zip(srow)
                .map(|(&a, &b)| a * decode(dtype, b))
                .collect();
            match r.smooth {
                SmoothOrder::BeforeMax => (prod.clone(), prod),
                SmoothOrder::AfterMax => (xs, prod),
                SmoothOrder::Skipped => (xs.clone(), xs),
            }
        };
        let row_max = |vals: &[f32]| -> f32 {
            vals.iter().fold(0.0f32, |m, &v| {
                let a = if r.signed_max { v } else { v.abs() };
                if a > m {
                    a
                } else {
                    m
                }
            })
        };
        const ROWS_PER_TASK: usize = 16;
        let tasks = c.tokens.div_ceil(ROWS_PER_TASK);
        let global = if r.per_tensor {
            let maxima = map_tasks(tasks, threads, |i| {
                (i * ROWS_PER_TASK..((i + 1) * ROWS_PER_TASK).min(c.tokens))
                    .map(|t| row_max(&row_values(t).0))
                    .fold(0.0f32, f32::max)
            });
            Some(maxima.into_iter().fold(0.0f32, f32::max))
        } else {
            None
        };
        let parts = map_tasks(tasks, threads, |i| {
            let mut y = Vec::new();
            let mut scales = Vec::new();
            for t in i * ROWS_PER_TASK..((i + 1) * ROWS_PER_TASK).min(c.tokens) {
                let (for_max, vals) = row_values(t);
                let amax = global.unwrap_or_else(|| row_max(&for_max));
                let (scale, factor) = r.scale_and_factor(amax);
                let scale = if amax == 0.0 && r.zero_row == ZeroRow::NanScale {
                    f32::NAN
                } else {
                    scale
                };
                scales.push(scale);
                y.extend(vals.iter().map(|&v| r.to_int8(r.scaled(v, factor))));
            }
            (y, scales)
        });
        let (mut y, mut scale) = (Vec::with_capacity(c.tokens * h), Vec::new());
        for (py, ps) in parts {
            y.extend(py);
            scale.extend(ps);
        }
        Ok(TensorMap::from([
            ("y".to_string(), Tensor::from_i8(vec![c.tokens, h], &y)),
            (
                "scale".to_string(),
                Tensor::from_f32(vec![c.tokens], &scale),
            ),
        ]))
    }

    /// Makes every regime of `regimes` true (see the module doc and docs/suites.md).
    ///
    /// Chosen rows are rebuilt: one element at a "power-of-two column" (whose smooth scale,
    /// in every group, is set to exactly 1/2, so `x * s` is exact) carries the row max `A`,
    /// and every other element is `u * 0.95 * A` rounded to the dtype for a uniform `u` in
    /// (-1, 1) (so its product with a smooth scale below 1 stays below `A`). Then:
    /// - `rounding_ties`: `A = 127 * 2^-p`, so the recipe's quotient is exactly `2^p`, and 8
    ///   power-of-two columns hold `(2k + 1) * 2^(-p-1)` with `k` even: exact ties that ties
    ///   to even and ties away round apart. Checked with the recipe's own arithmetic.
    /// - `quant_edge_rows`: 8 all-zero rows (+0 or -0 per element); a row whose max is `-A`;
    ///   a row whose max is the dtype's largest finite value; a tiny row (f16: every element
    ///   subnormal; bf16: max 2^-118..2^-116, above 127 / f32max so the quotient stays
    ///   finite, with subnormal elements); 8 rows whose `A` gives a scale under the recipe's
    ///   scale form different from both other forms.
    fn impose(
        &self,
        c: &Case,
        regimes: &[Regime],
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError> {
        let rec = regime_recipe(c, ctx);
        let h = c.hidden;
        let dtype = c.dtype;
        let mut x = m
            .get("x")
            .ok_or_else(|| failed("no x"))?
            .bits16()
            .map_err(failed)?;
        // Power-of-two columns.
        let mut cols: Vec<usize> = (0..h).collect();
        ctx.shuffle(&mut cols);
        let p2: Vec<usize> = cols[..POW2_COLUMNS].to_vec();
        let half = encode(dtype, 0.5);
        let s_of = |_col: usize| if c.smooth { 0.5f64 } else { 1.0 };
        if c.smooth {
            let s = m
                .get_mut("smooth_scales")
                .ok_or_else(|| failed("no smooth_scales"))?;
            let mut bits = s.bits16().map_err(failed)?;
            for g in 0..c.smooth_rows() {
                for &col in &p2 {
                    bits[g * h + col] = half;
                }
            }
            *s = Tensor::from_bits16(dtype, s.shape.clone(), &bits);
        }
        let mut rows: Vec<usize> = (0..c.tokens).collect();
        ctx.shuffle(&mut rows);
        let mut next = rows.into_iter();
        let mut take = || {
            next.next()
                .ok_or_else(|| failed("out of rows (checked before)"))
        };
        // A row of `u * 0.95 * a` values with `x_amax = sign * a / s` at column `amax_col`.
        let fill = |x: &mut [u16], t: usize, a: f64, ctx: &mut GenContext| {
            for j in 0..h {
                let u = 2.0 * ctx.unit() - 1.0;
                x[t * h + j] = encode(dtype, u * 0.95 * a);
            }
        };
        let put = |x: &mut [u16], t: usize, col: usize, v: f64| -> Result<(), OpError> {
            let xv = v / s_of(col);
            let b = encode(dtype, xv);
            if decode(dtype, b) as f64 != xv {
                return Err(failed(format!("{xv} is not exact in {}", dtype.name())));
            }
            x[t * h + col] = b;
            Ok(())
        };
        let sign = |ctx: &mut GenContext| if ctx.below(2) == 0 { 1.0 } else { -1.0 };
        for r in regimes {
            match r {
                Regime::RoundingTies => {
                    for _ in 0..TIE_ROWS {
                        let t = take()?;
                        // f16 keeps 2^(-p-1) normal and 127 * 2^-p finite for p in -3..=10.
                        let p = ctx.below(14) as i32 - 3;
                        let a = 127.0 * pow2(-p);
                        fill(&mut x, t, a, ctx);
                        let (_, factor) = rec.scale_and_factor(a as f32);
                        let mut slots = p2.clone();
                        ctx.shuffle(&mut slots);
                        put(&mut x, t, slots[0], sign(ctx) * a)?;
                        for &col in &slots[1..=TIES_PER_ROW] {
                            let k = 2 * ctx.below(63) as i64; // even, 0..=124
                            let v = sign(ctx) * (2 * k + 1) as f64 * pow2(-p - 1);
                            put(&mut x, t, col, v)?;
                            let q = rec.scaled(v as f32, factor) as f64;
                            if q.abs() != k as f64 + 0.5 {
                                return Err(failed(format!(
                                    "rounding_ties: {v} scaled to {q}, not the tie {k}.5 under this recipe"
                                )));
                            }
                        }
                    }
                }
                Regime::QuantEdgeRows => {
                    for _ in 0..ZERO_ROWS {
                        let t = take()?;
                        for j in 0..h {
                            x[t * h + j] = if ctx.below(2) == 0 { 0 } else { 0x8000 };
                        }
                    }
                    // Negative max.
                    let t = take()?;
                    let a = decode(dtype, encode(dtype, 0.5 + 1.5 * ctx.unit())) as f64;
                    fill(&mut x, t, a, ctx);
                    put(&mut x, t, p2[ctx.below(POW2_COLUMNS as u64) as usize], -a)?;
                    // The dtype's largest finite value (as x; the product with 1/2 is the max).
                    let t = take()?;
                    let big = max_finite(dtype) as f64;
                    let a = big * s_of(0);
                    fill(&mut x, t, a, ctx);
                    put(
                        &mut x,
                        t,
                        p2[ctx.below(POW2_COLUMNS as u64) as usize],
                        sign(ctx) * a,
                    )?;
                    // Tiny.
                    let t = take()?;
                    match dtype {
                        ElemType::F16 => {
                            // Row max a subnormal of 2^-17..2^-15 (x = a / s stays subnormal),
                            // every element subnormal or zero.
                            let a = (32.0 + ctx.below(96) as f64) * pow2(-22);
                            fill(&mut x, t, a, ctx);
                            put(
                                &mut x,
                                t,
                                p2[ctx.below(POW2_COLUMNS as u64) as usize],
                                sign(ctx) * a,
                            )?;
                        }
                        _ => {
                            let a = (128.0 + ctx.below(128) as f64) * pow2(-125);
                            fill(&mut x, t, a, ctx);
                            // Subnormal elements in the first columns that are not power-of-two
                            // columns.
                            for &j in cols[POW2_COLUMNS..].iter().take(8) {
                                let sub = (1 + ctx.below(127)) as f64 * pow2(-133);
                                x[t * h + j] = encode(dtype, sign(ctx) * sub);
                            }
                            put(
                                &mut x,
                                t,
                                p2[ctx.below(POW2_COLUMNS as u64) as usize],
                                sign(ctx) * a,
                            )?;
                        }
                    }
                    // Scale-form witnesses.
                    for _ in 0..WITNESS_ROWS {
                        let t = take()?;
                        let a = self.witness(dtype, &rec, ctx)?;
                        fill(&mut x, t, a, ctx);
                        put(
                            &mut x,
                            t,
                            p2[ctx.below(POW2_COLUMNS as u64) as usize],
                            sign(ctx) * a,
                        )?;
                    }
                }
                other => {
                    return Err(OpError::Regime {
                        op: OP.into(),
                        regime: other.name().into(),
                        message: "does not apply to this op".into(),
                    })
                }
            }
        }
        let xt = m.get_mut("x").ok_or_else(|| failed("no x"))?;
        *xt = Tensor::from_bits16(dtype, xt.shape.clone(), &x);
        Ok(())
    }

    fn recipe_preset(c: &Case, name: &str) -> Option<DqRecipe> {
        if name == DISPATCHING {
            let d = super::dynamic_quant_variants::dispatch(
                &c.shape(),
                &super::dynamic_quant_variants::MODELLED,
            );
            return DqRecipe::preset(d.variant.preset);
        }
        DqRecipe::preset(name)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_exact_with_the_tie_rule_of_each_mode() {
        let even = RoundingMode::NearestTiesToEven;
        let away = RoundingMode::NearestTiesAway;
        for (v, e, a) in [
            (0.5f32, 0, 1),
            (1.5, 2, 2),
            (2.5, 2, 3),
            (-2.5, -2, -3),
            (-0.5, 0, -1),
            (2.4999998, 2, 2),
            (126.5, 126, 127),
        ] {
            assert_eq!(round_to_int(v, even), e, "{v}");
            assert_eq!(round_to_int(v, away), a, "{v}");
        }
        assert_eq!(round_to_int(-1.75, RoundingMode::TowardZero), -1);
        assert_eq!(round_to_int(-1.25, RoundingMode::TowardNegative), -2);
    }

    #[test]
    fn the_kernel_scale_is_the_reciprocal_of_the_quotient() {
        let k = DqRecipe::preset("a2_plain").unwrap();
        let g = DqRecipe::preset("ops_nn_golden").unwrap();
        // 127 * 2^-7: the quotient is exactly 2^7 in both.
        assert_eq!(k.scale_and_factor(0.9921875), (0.0078125, 128.0));
        assert_eq!(g.scale_and_factor(0.9921875).0, 0.0078125);
        // A row max where the forms differ (found by the witness search's rule).
        let a = 0.6f32;
        let (sk, _) = k.scale_and_factor(a);
        assert_eq!(sk, 1.0 / (127.0f32 / a));
        assert_eq!(g.scale_and_factor(a).0, a * (1.0 / 127.0f32));
        // The multi-row and single-row kernels store the golden's form, and multiply by the
        // quotient as the others do.
        for v in ["a2_multi_row", "a2_single_row", "a2_db"] {
            let m = DqRecipe::preset(v).unwrap();
            assert_eq!(
                m.scale_and_factor(a),
                (a * (1.0 / 127.0f32), 127.0 / a),
                "{v}"
            );
        }
        // The constant the kernels multiply by: 1 / 127 rounded once to f32, whether the
        // source writes it as an f32 division (multi-row) or a double rounded to f32
        // (single-row's `1.0 / 127.0`).
        assert_eq!(1.0f32 / 127.0, (1.0f64 / 127.0) as f32);
        assert!(DqRecipe::preset(DISPATCHING).is_none());
    }

    #[test]
    fn oracle_row_rounds_exact_ties_to_even_and_zero_rows_to_zero() {
        let (s, y) = oracle_row(&[127.0 / 128.0, 2.5 / 128.0, -3.5 / 128.0, 0.0]);
        assert_eq!(s, 127.0 / 128.0 / 127.0);
        assert_eq!(y, vec![127, 2, -4, 0]);
        assert_eq!(oracle_row(&[0.0, -0.0]), (0.0, vec![0, 0]));
    }

    #[test]
    fn zero_rows_give_scale_zero_and_no_nan() {
        let k = DqRecipe::preset("a2_plain").unwrap();
        let (s, f) = k.scale_and_factor(0.0);
        assert_eq!(s.to_bits(), 0);
        assert_eq!(k.to_int8(k.scaled(0.0, f)), 0);
        let g = DqRecipe::preset("ops_nn_golden").unwrap();
        let (s, f) = g.scale_and_factor(0.0);
        assert_eq!(s.to_bits(), 0);
        assert_eq!(g.to_int8(g.scaled(-0.0, f)), 0);
    }
}
