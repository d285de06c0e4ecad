//! `cann_mixed`: the CANN mixed tolerance: an element passes if |a-g| <= T + T|g|; at least
//! 99% must pass and the largest absolute error stay within the dtype's cap.

use super::{cann_dtype, dtype_label, Judge, Policy, Verdict};
use crate::verdict::metrics::{ElementRule, PassStats};
use crate::verdict::policy::{CannDtype, PolicyError};
use conform_reference::ops::ElemType;
use serde::Deserialize;

/// CANN mixed tolerance: element passes if |a-g| <= T + T|g|; >= 99% pass and the largest
/// absolute error is at most 0.1 (f16/bf16) or 0.01 (f32).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CannMixed {}

impl Policy for CannMixed {
    const NAME: &'static str = "cann_mixed";
}

fn threshold(dtype: ElemType) -> f64 {
    CannDtype::of(dtype).map_or(0.0, CannDtype::threshold)
}

impl Judge for CannMixed {
    fn supports(&self, dtype: ElemType) -> Result<(), PolicyError> {
        cann_dtype::<Self>(dtype).map(drop)
    }

    fn against_oracle(&self) -> bool {
        true
    }

    fn label(&self, dtype: ElemType) -> String {
        format!("cann_mixed({})", dtype_label(dtype))
    }

    fn describe(&self) -> String {
        "CANN mixed tolerance: at least 99% of the elements have |a-g| <= T + T|g| (T by dtype) and the largest absolute error is at most 0.1 (f16, bf16) or 0.01 (f32), against the oracle when there is one".to_string()
    }

    fn rule(&self, dtype: ElemType, _base: Option<&PassStats>) -> ElementRule {
        ElementRule::Mixed {
            t: threshold(dtype),
        }
    }

    fn verdict(&self, dtype: ElemType, st: &PassStats, _: Option<&PassStats>, out: &mut Verdict) {
        let t = threshold(dtype);
        let cap = CannDtype::of(dtype).map_or(0.0, CannDtype::mixed_max_abs);
        let pass_ratio = if st.numel == 0 {
            1.0
        } else {
            (st.numel - st.mismatches) as f64 / st.numel as f64
        };
        out.put("threshold", t);
        out.put("pass_ratio", pass_ratio);
        out.put("max_abs_limit", cap);
        if pass_ratio < 0.99 {
            out.fail(format!(
                "only {pass_ratio} of elements satisfy |a-g| <= T + T|g| (T = {t}); 0.99 needed"
            ));
        }
        if st.max_abs > cap {
            out.fail(format!("max abs error {} > {cap}", st.max_abs));
        }
    }
}
