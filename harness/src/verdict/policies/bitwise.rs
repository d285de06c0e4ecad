//! `bitwise`: every element's bits equal the expected ones (NaN by class unless `nan_bits`).

use super::{Judge, Policy, Verdict};
use crate::verdict::metrics::{ElementRule, PassStats};
use conform_reference::ops::ElemType;
use serde::Deserialize;

/// Every element's bits equal. NaN matches NaN by class (any NaN encoding) unless
/// `nan_bits = true` pins the encoding.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bitwise {
    #[serde(default)]
    pub nan_bits: bool,
}

impl Policy for Bitwise {
    const NAME: &'static str = "bitwise";
}

impl Judge for Bitwise {
    fn exact(&self) -> bool {
        true
    }

    fn label(&self, _dtype: ElemType) -> String {
        if self.nan_bits {
            "bitwise(nan_bits)".to_string()
        } else {
            "bitwise".to_string()
        }
    }

    fn describe(&self) -> String {
        if self.nan_bits {
            "every element's bits equal the expected ones, NaN encodings included".to_string()
        } else {
            "every element's bits equal the expected ones (NaN matches NaN by class)".to_string()
        }
    }

    fn rule(&self, _dtype: ElemType, _base: Option<&PassStats>) -> ElementRule {
        ElementRule::Bitwise {
            nan_bits: self.nan_bits,
        }
    }

    fn verdict(&self, _: ElemType, st: &PassStats, _: Option<&PassStats>, out: &mut Verdict) {
        // Unwritten elements are reported apart; the rest differ in their bits.
        let differ = st.mismatches - st.unwritten;
        if differ > 0 {
            // ULP distances exist only between numbers: a NaN against a number (an Inf, say)
            // is counted apart, and equal-class NaNs with other bits are named, so a mismatch
            // never reads "max ULP 0".
            let detail = match (st.max_ulp, st.ulp_nan_mismatch) {
                (0, 0) => "only NaN encodings (payload or sign) differ".to_string(),
                (0, n) => format!("{n} NaN against a number"),
                (m, 0) => format!("max ULP {m}"),
                (m, n) => format!("max ULP {m} between numbers, {n} NaN against a number"),
            };
            out.fail(format!(
                "{differ} of {} elements differ bitwise ({detail})",
                st.numel
            ));
        }
    }
}
