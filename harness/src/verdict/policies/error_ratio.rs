//! `error_ratio` (FlashAttention test rule): max and mean |a - oracle| within `max_ratio` and
//! `mean_ratio` times those of a same-precision baseline recipe, plus `atol`; over the whole
//! output, and again over its subnormal stratum (module `verdict::subnormal`) with one step of
//! the subnormal grid added to the limits.

use super::{float_only, ratio, require, Judge, Policy, Verdict};
use crate::verdict::metrics::{ElementRule, PassStats};
use crate::verdict::subnormal::SubnormalStratum;
use crate::verdict::policy::{Needs, PolicyError};
use conform_reference::ops::ElemType;
use serde::Deserialize;
use std::cmp::Ordering;

fn default_max_ratio() -> f64 {
    2.0
}
fn default_mean_ratio() -> f64 {
    1.5
}

/// FlashAttention rule: max and mean |a - oracle| at most `max_ratio` and `mean_ratio` times
/// those of a same-precision baseline recipe, plus `atol`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorRatio {
    #[serde(default = "default_max_ratio")]
    pub max_ratio: f64,
    #[serde(default = "default_mean_ratio")]
    pub mean_ratio: f64,
    #[serde(default)]
    pub atol: f64,
}

impl Policy for ErrorRatio {
    const NAME: &'static str = "error_ratio";
}

impl Judge for ErrorRatio {
    fn validate(&self) -> Result<(), PolicyError> {
        let (max, mean, atol) = (self.max_ratio, self.mean_ratio, self.atol);
        let positive = |x: f64| x > 0.0 && x.is_finite();
        require::<Self>(positive(max), "max_ratio", max, "must be finite and > 0")?;
        require::<Self>(positive(mean), "mean_ratio", mean, "must be finite and > 0")?;
        require::<Self>(
            atol >= 0.0 && atol.is_finite(),
            "atol",
            atol,
            "must be finite and >= 0",
        )
    }

    fn supports(&self, dtype: ElemType) -> Result<(), PolicyError> {
        float_only::<Self>(dtype)
    }

    fn needs(&self) -> Needs {
        Needs {
            oracle: true,
            baseline: true,
        }
    }

    fn against_oracle(&self) -> bool {
        true
    }

    fn judges_subnormal_stratum(&self) -> bool {
        true
    }

    fn label(&self, _dtype: ElemType) -> String {
        format!(
            "error_ratio(max_ratio={}, mean_ratio={}, atol={})",
            self.max_ratio, self.mean_ratio, self.atol
        )
    }

    fn describe(&self) -> String {
        format!(
            "against the oracle, max |a-o| <= {} x the baseline's + {} and mean |a-o| <= {} x the baseline's + {}; the same again over the elements whose exact value is a nonzero subnormal of the dtype, against the baseline's errors there, plus one step of the subnormal grid",
            self.max_ratio, self.atol, self.mean_ratio, self.atol
        )
    }

    fn rule(&self, _dtype: ElemType, base: Option<&PassStats>) -> ElementRule {
        ElementRule::AbsAbove {
            limit: self.max_ratio * base.map_or(0.0, |b| b.max_abs) + self.atol,
        }
    }

    fn verdict(&self, _: ElemType, st: &PassStats, base: Option<&PassStats>, out: &mut Verdict) {
        let b = base.expect("baseline pass ran");
        let (max_ratio, mean_ratio, atol) = (self.max_ratio, self.mean_ratio, self.atol);
        out.put("npu_max_abs", st.max_abs);
        out.put("baseline_max_abs", b.max_abs);
        out.put("ratio_max_abs", ratio(st.max_abs, b.max_abs));
        out.put("npu_mean_abs", st.mean_abs());
        out.put("baseline_mean_abs", b.mean_abs());
        out.put("ratio_mean_abs", ratio(st.mean_abs(), b.mean_abs()));
        if st.max_abs > max_ratio * b.max_abs + atol {
            out.fail(format!(
                "max abs error {} > {max_ratio} x baseline {} + {atol}",
                st.max_abs, b.max_abs
            ));
        }
        if st.mean_abs() > mean_ratio * b.mean_abs() + atol {
            out.fail(format!(
                "mean abs error {} > {mean_ratio} x baseline {} + {atol}",
                st.mean_abs(),
                b.mean_abs()
            ));
        }
        if let (Some(s), Some(bs)) = (&st.subnormal, &b.subnormal) {
            self.judge_subnormal(s, bs, out);
        }
    }
}

impl ErrorRatio {
    /// The same two rules over the subnormal stratum, each limit raised by one step of the
    /// subnormal grid (an honest rounding against a baseline exact there). Nothing when the
    /// output has no element in the stratum.
    fn judge_subnormal(&self, s: &SubnormalStratum, bs: &SubnormalStratum, out: &mut Verdict) {
        if s.count == 0 && bs.count == 0 {
            return;
        }
        let (max_ratio, mean_ratio, atol) = (self.max_ratio, self.mean_ratio, self.atol);
        let step = s.range.step;
        out.put("subnormal_count", s.count as f64);
        out.put("npu_subnormal_max_abs", s.max_abs);
        out.put("baseline_subnormal_max_abs", bs.max_abs);
        out.put("npu_subnormal_mean_abs", s.mean_abs());
        out.put("baseline_subnormal_mean_abs", bs.mean_abs());
        out.put("subnormal_step", step);
        let whose = format!(
            "subnormal outputs ({} elements whose exact value is below the smallest normal {:.4e})",
            s.count, s.range.min_normal
        );
        let worst = s
            .worst
            .as_ref()
            .map(|(at, a, o)| format!(" (largest at {at}: got {a:.4e}, exact {o:.4e})"))
            .unwrap_or_default();
        if exceeds(s.max_abs, max_ratio * bs.max_abs + atol + step) {
            out.fail(format!(
                "{whose}: max error {:.4e} > {max_ratio} x baseline {:.4e} + {atol} + one subnormal step {step:.4e}{worst}",
                s.max_abs, bs.max_abs
            ));
        }
        if exceeds(s.mean_abs(), mean_ratio * bs.mean_abs() + atol + step) {
            out.fail(format!(
                "{whose}: mean error {:.4e} > {mean_ratio} x baseline {:.4e} + {atol} + one subnormal step {step:.4e}",
                s.mean_abs(),
                bs.mean_abs()
            ));
        }
    }
}

/// Whether `x` is above `limit`, or either is NaN (a NaN figure never passes).
fn exceeds(x: f64, limit: f64) -> bool {
    !matches!(x.partial_cmp(&limit), Some(Ordering::Less | Ordering::Equal))
}
