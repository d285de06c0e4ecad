//! `cann_single`: the CANN precision standard's single benchmark (experimental level):
//! MERE < T and MARE < 10 T, T by dtype.

use super::{cann_dtype, dtype_label, Judge, Policy, Verdict};
use crate::verdict::metrics::{ElementRule, PassStats};
use crate::verdict::policy::{CannDtype, PolicyError};
use conform_reference::ops::ElemType;
use serde::Deserialize;

/// CANN single benchmark: MERE < T and MARE < 10 T, T by dtype.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CannSingle {}

impl Policy for CannSingle {
    const NAME: &'static str = "cann_single";
}

fn threshold(dtype: ElemType) -> f64 {
    CannDtype::of(dtype).map_or(0.0, CannDtype::threshold)
}

impl Judge for CannSingle {
    fn supports(&self, dtype: ElemType) -> Result<(), PolicyError> {
        cann_dtype::<Self>(dtype).map(drop)
    }

    fn against_oracle(&self) -> bool {
        true
    }

    fn label(&self, dtype: ElemType) -> String {
        format!("cann_single({})", dtype_label(dtype))
    }

    fn describe(&self) -> String {
        "CANN single benchmark: mean relative error MERE < T and max relative error MARE < 10 T, T by dtype (2^-10 f16, 2^-7 bf16, 2^-13 f32), against the oracle when there is one".to_string()
    }

    fn rule(&self, dtype: ElemType, _base: Option<&PassStats>) -> ElementRule {
        ElementRule::RelAbove {
            limit: 10.0 * threshold(dtype),
        }
    }

    fn verdict(&self, dtype: ElemType, st: &PassStats, _: Option<&PassStats>, out: &mut Verdict) {
        let t = threshold(dtype);
        out.put("threshold", t);
        out.put("mere_limit", t);
        out.put("mare_limit", 10.0 * t);
        if st.mere() >= t {
            out.fail(format!("MERE {} >= T = {t}", st.mere()));
        }
        if st.max_rel >= 10.0 * t {
            out.fail(format!("MARE {} >= 10T = {}", st.max_rel, 10.0 * t));
        }
    }
}
