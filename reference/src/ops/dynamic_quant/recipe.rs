//! `dynamic_quant`'s recipe ([`DqRecipe`]): the scale form and the other knobs of the kernels'
//! arithmetic, the presets, the steps they name (the scale and its factor, the scaling, the
//! cast to int8), and the exact oracle row the recipes are judged against.

use crate::formats::{Rounding, RoundingMode};
use crate::knob::Knob;

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
/// the kernel variant its shape lands on, [`crate::ops::dynamic_quant_variants`]), the variant
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
    /// ([`crate::ops::dynamic_quant_variants::dispatch`]).
    pub fn preset(name: &str) -> Option<DqRecipe> {
        if name == "ops_nn_golden" {
            return Some(DqRecipe {
                scale: ScaleForm::MaxTimesInverse,
                apply: ApplyForm::DivideByScale,
                ..DqRecipe::kernel(ScaleForm::MaxTimesInverse)
            });
        }
        crate::ops::dynamic_quant_variants::scale_form(name).map(DqRecipe::kernel)
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
