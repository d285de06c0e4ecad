//! Per-hardware performance budgets of a suite case: an absolute limit on the median time
//! and/or a minimum fraction of the roofline. A case over budget fails with the measured
//! figure, the budget and the roofline fraction in the message.
//!
//! In a suite TOML the budgets of a case are a table keyed by hardware profile id:
//!
//! ```toml
//! [cases.fa_1k.budget]
//! atlas-300i-duo = { max_us = 2601.0 }
//! nvidia-h100-sxm = { max_us = 150.0, min_roofline_fraction = 0.3 }
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::budget_text as messages;
use super::error::PerfError;
use super::roofline::Roofline;

/// The budget of one case on one hardware profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// The median time must not exceed this, microseconds.
    #[serde(default)]
    pub max_us: Option<f64>,
    /// The median time's roofline fraction must be at least this (0, 1].
    #[serde(default)]
    pub min_roofline_fraction: Option<f64>,
}

/// Budgets of one case keyed by hardware profile id.
pub type Budgets = BTreeMap<String, Budget>;

impl Budget {
    /// Check the figures; `hardware` names the entry in errors.
    pub fn validate(&self, hardware: &str) -> Result<(), PerfError> {
        let bad = |field, problem: String| {
            Err(PerfError::InvalidBudget {
                hardware: hardware.to_string(),
                field,
                problem,
            })
        };
        if self.max_us.is_none() && self.min_roofline_fraction.is_none() {
            return bad(
                "max_us",
                "neither max_us nor min_roofline_fraction is set".into(),
            );
        }
        if let Some(m) = self.max_us
            && !(m.is_finite() && m > 0.0)
        {
            return bad("max_us", format!("{m} is not a finite time > 0"));
        }
        if let Some(f) = self.min_roofline_fraction
            && !(f > 0.0 && f <= 1.0)
        {
            return bad("min_roofline_fraction", format!("{f} is not in (0, 1]"));
        }
        Ok(())
    }
}

/// Validate every entry of a case's budget table.
pub fn validate_budgets(budgets: &Budgets) -> Result<(), PerfError> {
    budgets.iter().try_for_each(|(hw, b)| b.validate(hw))
}

/// Outcome of a budget check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetOutcome {
    pub passed: bool,
    /// Measured median, budget and roofline fraction, for the report.
    pub message: String,
}

/// Check the median time `measured_us` of `case` on `hardware` against `budget`.
/// `roofline` holds the figures of that time if the case's work and the hardware profile are
/// known; a roofline budget without them fails (never a silent pass).
pub fn evaluate_budget(
    case: &str,
    hardware: &str,
    budget: &Budget,
    measured_us: f64,
    roofline: Option<&Roofline>,
) -> BudgetOutcome {
    let fraction = roofline.map(|r| r.fraction_of_peak);
    let mut problems = Vec::new();
    if let Some(max) = budget.max_us {
        // a NaN measurement never passes
        if measured_us.is_nan() || measured_us > max {
            problems.push(messages::over_time_budget(measured_us, max));
        }
    }
    if let Some(min) = budget.min_roofline_fraction {
        match fraction {
            Some(f) if f >= min => {}
            Some(f) => problems.push(messages::under_roofline_budget(f, min)),
            None => problems.push(messages::roofline_unknown(min)),
        }
    }
    if let Some(r) = roofline
        && r.implausible
    {
        problems.push(messages::implausible_time(r));
    }
    let passed = problems.is_empty();
    BudgetOutcome {
        passed,
        message: messages::budget_summary(case, hardware, measured_us, budget, fraction, &problems),
    }
}

#[cfg(test)]
mod tests {
    use super::super::roofline::Bound;
    use super::*;

    fn roof(fraction: f64) -> Roofline {
        Roofline {
            hardware: "atlas-300i-duo".into(),
            dtype: "f16".into(),
            time_us: 2700.0,
            achieved_tflops: 1.0,
            achieved_gbps: 1.0,
            floor_us: 2700.0 * fraction,
            bound: Bound::Compute,
            fraction_of_peak: fraction,
            implausible: fraction > 1.0,
        }
    }

    #[test]
    fn over_the_time_budget_fails_with_all_figures() {
        let b = Budget {
            max_us: Some(2601.0),
            min_roofline_fraction: None,
        };
        let o = evaluate_budget("fa_1k", "atlas-300i-duo", &b, 2700.0, Some(&roof(0.21)));
        assert!(!o.passed);
        for needle in ["2700", "2601", "0.21", "fa_1k", "atlas-300i-duo"] {
            assert!(o.message.contains(needle), "{needle} not in {}", o.message);
        }
        let o = evaluate_budget("fa_1k", "atlas-300i-duo", &b, 2400.0, Some(&roof(0.23)));
        assert!(o.passed, "{}", o.message);
        assert!(o.message.contains("2400") && o.message.contains("2601"));
    }

    #[test]
    fn roofline_budgets_need_roofline_figures() {
        let b = Budget {
            max_us: None,
            min_roofline_fraction: Some(0.3),
        };
        assert!(!evaluate_budget("c", "h", &b, 10.0, Some(&roof(0.2))).passed);
        assert!(evaluate_budget("c", "h", &b, 10.0, Some(&roof(0.4))).passed);
        let o = evaluate_budget("c", "h", &b, 10.0, None);
        assert!(!o.passed && o.message.contains("roofline"), "{}", o.message);
        // a time below the floor never passes
        assert!(!evaluate_budget("c", "h", &b, 10.0, Some(&roof(1.2))).passed);
    }

    #[test]
    fn budget_tables_parse_and_validate() {
        #[derive(Deserialize)]
        struct Case {
            budget: Budgets,
        }
        let c: Case = toml::from_str(
            "budget = { atlas-300i-duo = { max_us = 2601 }, nvidia-h100-sxm = { min_roofline_fraction = 0.3 } }",
        )
        .unwrap();
        validate_budgets(&c.budget).unwrap();
        assert_eq!(c.budget["atlas-300i-duo"].max_us, Some(2601.0));
        let c: Case = toml::from_str("budget = { h = { max_us = -1 } }").unwrap();
        let e = validate_budgets(&c.budget).unwrap_err().to_string();
        assert!(e.contains("`h`") && e.contains("max_us"), "{e}");
        assert!(toml::from_str::<Case>("budget = { h = { max_ms = 1 } }").is_err());
        let c: Case = toml::from_str("budget = { h = {} }").unwrap();
        assert!(validate_budgets(&c.budget).is_err());
    }
}
