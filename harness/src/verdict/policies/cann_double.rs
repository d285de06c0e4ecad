//! `cann_double`: the CANN precision standard's double benchmark (commercial levels): the
//! target's errors against the oracle, relative to a same-precision baseline's, within the
//! level's limits; small values counted separately.

use super::{dtype_label, ratio, Judge, Policy, Verdict};
use crate::verdict::metrics::{ElementRule, PassStats};
use crate::verdict::policy::{CannDtype, CannLevel, Needs, PolicyError};
use conform_reference::ops::ElemType;
use serde::Deserialize;

/// CANN double benchmark: NPU error / baseline error ratios within the level's limits,
/// small values counted separately.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CannDouble {
    pub level: CannLevel,
}

impl Policy for CannDouble {
    const NAME: &'static str = "cann_double";
}

impl Judge for CannDouble {
    fn supports(&self, dtype: ElemType) -> Result<(), PolicyError> {
        match self.small_value(dtype) {
            Some(_) => Ok(()),
            None => Err(PolicyError::UnsupportedDtype {
                policy: Self::NAME,
                dtype: dtype.name(),
            }),
        }
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

    fn small_value(&self, dtype: ElemType) -> Option<(f64, f64)> {
        CannDtype::of(dtype).and_then(CannDtype::small_value)
    }

    fn label(&self, dtype: ElemType) -> String {
        format!("cann_double({}, {})", self.level.name(), dtype_label(dtype))
    }

    fn describe(&self) -> String {
        let l = self.level.limits();
        format!(
            "CANN double benchmark {}: against the oracle, the target's MARE / MERE / RMSE over the non-small values at most {} / {} / {} times the baseline's, and its small-value errors at most twice the baseline's (at least 2)",
            self.level.name(),
            l.mare,
            l.mere,
            l.rmse
        )
    }

    fn rule(&self, dtype: ElemType, base: Option<&PassStats>) -> ElementRule {
        let b = base.map_or(0.0, |b| b.normal_max_rel);
        let (small, small_err) = self.small_value(dtype).unwrap_or((0.0, 0.0));
        ElementRule::CannDouble {
            rel_limit: self.level.limits().mare * b,
            small,
            small_err,
        }
    }

    fn verdict(&self, _: ElemType, st: &PassStats, base: Option<&PassStats>, out: &mut Verdict) {
        let b = base.expect("baseline pass ran");
        let level = self.level;
        let lim = level.limits();
        let pairs = [
            ("mare", st.normal_max_rel, b.normal_max_rel, lim.mare),
            ("mere", st.normal_mere(), b.normal_mere(), lim.mere),
            ("rmse", st.normal_rmse(), b.normal_rmse(), lim.rmse),
        ];
        for (name, n, bv, limit) in pairs {
            let r = ratio(n, bv);
            out.put(&format!("npu_{name}"), n);
            out.put(&format!("baseline_{name}"), bv);
            out.put(&format!("ratio_{name}"), r);
            out.put(&format!("limit_{name}"), limit);
            if n > limit * bv {
                out.fail(format!(
                    "{} ratio {r} > {limit} ({level:?}): NPU {n}, baseline {bv}",
                    name.to_uppercase()
                ));
            }
        }
        let allowed = 2 * b.small_err.max(1);
        out.put("small_values", st.small as f64);
        out.put("npu_small_errors", st.small_err as f64);
        out.put("baseline_small_errors", b.small_err as f64);
        out.put("small_errors_limit", allowed as f64);
        if st.small_err > allowed {
            out.fail(format!(
                "{} small values have errors above the threshold; at most {allowed} allowed (baseline {})",
                st.small_err, b.small_err
            ));
        }
    }
}
