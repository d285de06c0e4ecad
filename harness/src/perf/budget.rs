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
use std::fmt;

use serde::{Deserialize, Serialize};

use super::error::PerfError;
use super::roofline::{Bound, Roofline};

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

/// One way a measured time misses its budget; `Display` is the message.
#[derive(Debug, Clone, PartialEq)]
pub enum BudgetProblem {
    /// The median is over `max_us` (or NaN).
    OverTime { measured_us: f64, max_us: f64 },
    /// The roofline fraction is under `min_roofline_fraction`.
    UnderRoofline { fraction: f64, min: f64 },
    /// A roofline budget, but no roofline figures to judge it by (never a silent pass).
    RooflineUnknown { min: f64 },
    /// The time is below the roofline floor: a broken timer or skipped work.
    Implausible {
        time_us: f64,
        floor_us: f64,
        hardware: String,
        bound: Bound,
    },
}

impl fmt::Display for BudgetProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BudgetProblem::OverTime {
                measured_us,
                max_us,
            } => write!(
                f,
                "median {measured_us:.2} us exceeds the budget of {max_us:.2} us"
            ),
            BudgetProblem::UnderRoofline { fraction, min } => write!(
                f,
                "roofline fraction {fraction:.3} is below the required {min:.3}"
            ),
            BudgetProblem::RooflineUnknown { min } => write!(
                f,
                "a minimum roofline fraction of {min:.3} is required but the case has no \
                 roofline figures (FLOPs/bytes or the hardware profile are missing)"
            ),
            BudgetProblem::Implausible {
                time_us,
                floor_us,
                hardware,
                bound,
            } => write!(
                f,
                "implausible: {time_us:.3} us is below the roofline floor of {floor_us:.3} us \
                 on {hardware} ({}-bound) — a broken timer or skipped work",
                match bound {
                    Bound::Compute => "compute",
                    Bound::Memory => "memory",
                }
            ),
        }
    }
}

/// Outcome of a budget check: the measured median, the budget, the roofline fraction and what
/// went over. `Display` is the one-line summary the report and the failure show.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetOutcome {
    pub case: String,
    pub hardware: String,
    pub measured_us: f64,
    pub budget: Budget,
    pub fraction: Option<f64>,
    /// Empty when the time is within budget.
    pub problems: Vec<BudgetProblem>,
}

impl BudgetOutcome {
    /// Whether the time is within every budget.
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

impl fmt::Display for BudgetOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on {}: median {:.2} us",
            self.case, self.hardware, self.measured_us
        )?;
        match self.budget.max_us {
            Some(m) => write!(f, ", budget {m:.2} us")?,
            None => f.write_str(", no time budget")?,
        }
        match self.fraction {
            Some(x) => write!(f, ", roofline fraction {x:.3}")?,
            None => f.write_str(", roofline fraction unknown")?,
        }
        if let Some(min) = self.budget.min_roofline_fraction {
            write!(f, " (minimum {min:.3})")?;
        }
        if self.problems.is_empty() {
            return f.write_str(": within budget");
        }
        f.write_str(": OVER BUDGET: ")?;
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
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
            problems.push(BudgetProblem::OverTime {
                measured_us,
                max_us: max,
            });
        }
    }
    if let Some(min) = budget.min_roofline_fraction {
        match fraction {
            Some(f) if f >= min => {}
            Some(f) => problems.push(BudgetProblem::UnderRoofline { fraction: f, min }),
            None => problems.push(BudgetProblem::RooflineUnknown { min }),
        }
    }
    if let Some(r) = roofline
        && r.implausible
    {
        problems.push(BudgetProblem::Implausible {
            time_us: r.time_us,
            floor_us: r.floor_us,
            hardware: r.hardware.clone(),
            bound: r.bound,
        });
    }
    BudgetOutcome {
        case: case.to_string(),
        hardware: hardware.to_string(),
        measured_us,
        budget: *budget,
        fraction,
        problems,
    }
}

#[cfg(test)]
mod tests {
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
        assert!(!o.passed());
        for needle in ["2700", "2601", "0.21", "fa_1k", "atlas-300i-duo"] {
            assert!(o.to_string().contains(needle), "{needle} not in {o}");
        }
        let o = evaluate_budget("fa_1k", "atlas-300i-duo", &b, 2400.0, Some(&roof(0.23)));
        assert!(o.passed(), "{o}");
        assert!(o.to_string().contains("2400") && o.to_string().contains("2601"));
    }

    #[test]
    fn roofline_budgets_need_roofline_figures() {
        let b = Budget {
            max_us: None,
            min_roofline_fraction: Some(0.3),
        };
        assert!(!evaluate_budget("c", "h", &b, 10.0, Some(&roof(0.2))).passed());
        assert!(evaluate_budget("c", "h", &b, 10.0, Some(&roof(0.4))).passed());
        let o = evaluate_budget("c", "h", &b, 10.0, None);
        assert!(!o.passed() && o.to_string().contains("roofline"), "{o}");
        // a time below the floor never passes
        assert!(!evaluate_budget("c", "h", &b, 10.0, Some(&roof(1.2))).passed());
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
