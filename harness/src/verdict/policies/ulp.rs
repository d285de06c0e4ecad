//! `ulp`: every element at most `max` ULP from the expected one, in the output dtype.

use super::{Judge, Policy, Verdict};
use crate::verdict::metrics::{ElementRule, PassStats};
use conform_reference::ops::ElemType;
use serde::Deserialize;

/// ULP distance in the output dtype at most `max` for every element.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ulp {
    pub max: u64,
}

impl Policy for Ulp {
    const NAME: &'static str = "ulp";
}

impl Judge for Ulp {
    fn exact(&self) -> bool {
        true
    }

    fn label(&self, _dtype: ElemType) -> String {
        format!("ulp(max={})", self.max)
    }

    fn describe(&self) -> String {
        format!(
            "every element is at most {} ULP from the expected one in the output dtype (NaN matches NaN by class)",
            self.max
        )
    }

    fn rule(&self, _dtype: ElemType, _base: Option<&PassStats>) -> ElementRule {
        ElementRule::Ulp { max: self.max }
    }

    fn verdict(&self, _: ElemType, st: &PassStats, _: Option<&PassStats>, out: &mut Verdict) {
        if st.mismatches > st.unwritten {
            out.fail(format!(
                "{} of {} elements are more than {} ULP away (max ULP {}, NaN vs number {})",
                st.mismatches - st.unwritten,
                st.numel,
                self.max,
                st.max_ulp,
                st.ulp_nan_mismatch
            ));
        }
    }
}
