//! `allclose` (flashinfer-bench semantics): an element fails only if |a-e| > atol AND
//! |a-e|/(|e|+1e-8) > rtol; the case passes if the matched fraction is at least
//! `min_matched_ratio`.

use super::{require, Judge, Policy, Verdict};
use crate::verdict::metrics::{ElementRule, PassStats};
use crate::verdict::policy::PolicyError;
use conform_reference::ops::ElemType;
use serde::Deserialize;

fn default_tol() -> f64 {
    1e-2
}
fn default_matched_ratio() -> f64 {
    1.0
}

/// flashinfer-bench: an element fails only if |a-e| > atol AND |a-e|/(|e|+1e-8) > rtol;
/// the case passes if the matched fraction is at least `min_matched_ratio`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allclose {
    #[serde(default = "default_tol")]
    pub atol: f64,
    #[serde(default = "default_tol")]
    pub rtol: f64,
    #[serde(default = "default_matched_ratio")]
    pub min_matched_ratio: f64,
}

impl Policy for Allclose {
    const NAME: &'static str = "allclose";
}

impl Judge for Allclose {
    fn validate(&self) -> Result<(), PolicyError> {
        let (atol, rtol, ratio) = (self.atol, self.rtol, self.min_matched_ratio);
        require::<Self>(
            atol >= 0.0 && atol.is_finite(),
            "atol",
            atol,
            "must be finite and >= 0",
        )?;
        require::<Self>(
            rtol >= 0.0 && rtol.is_finite(),
            "rtol",
            rtol,
            "must be finite and >= 0",
        )?;
        require::<Self>(
            (0.0..=1.0).contains(&ratio),
            "min_matched_ratio",
            ratio,
            "must be in [0, 1]",
        )
    }

    /// Float outputs, and int8 ones judged by their integer values (a quantised INT8 KV cache
    /// within a step of the exact quantisation); packed codes (U8) and indices are not values.
    fn supports(&self, dtype: ElemType) -> Result<(), PolicyError> {
        if dtype == ElemType::I8 {
            return Ok(());
        }
        super::float_only::<Self>(dtype)
    }

    fn label(&self, _dtype: ElemType) -> String {
        format!(
            "allclose(atol={}, rtol={}, min_matched_ratio={})",
            self.atol, self.rtol, self.min_matched_ratio
        )
    }

    fn describe(&self) -> String {
        format!(
            "the fraction of elements with |a-e| <= {} or |a-e|/(|e|+1e-8) <= {} (both sides finite) is at least {}",
            self.atol, self.rtol, self.min_matched_ratio
        )
    }

    fn rule(&self, _dtype: ElemType, _base: Option<&PassStats>) -> ElementRule {
        ElementRule::Allclose {
            atol: self.atol,
            rtol: self.rtol,
        }
    }

    fn verdict(&self, _: ElemType, st: &PassStats, _: Option<&PassStats>, out: &mut Verdict) {
        let matched = if st.numel == 0 {
            1.0
        } else {
            (st.numel - st.mismatches) as f64 / st.numel as f64
        };
        out.put("matched_ratio", matched);
        if matched < self.min_matched_ratio {
            out.fail(format!(
                "matched ratio {matched} < {}: {} elements have |a-e| > {} and |a-e|/(|e|+1e-8) > {}",
                self.min_matched_ratio, st.mismatches, self.atol, self.rtol
            ));
        }
    }
}
