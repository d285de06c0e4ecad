//! The text of a budget outcome (`perf::budget`): what went over and the one-line summary.
//! It lives beside the budget check, which owns these outcomes, so the messages layer never
//! has to reach back into `perf`.

use std::fmt::Write as _;

use super::budget::Budget;
use super::roofline::Roofline;

pub fn over_time_budget(measured_us: f64, max_us: f64) -> String {
    format!("median {measured_us:.2} us exceeds the budget of {max_us:.2} us")
}

pub fn under_roofline_budget(fraction: f64, min: f64) -> String {
    format!("roofline fraction {fraction:.3} is below the required {min:.3}")
}

pub fn roofline_unknown(min: f64) -> String {
    format!(
        "a minimum roofline fraction of {min:.3} is required but the case has no roofline \
         figures (FLOPs/bytes or the hardware profile are missing)"
    )
}

pub fn implausible_time(r: &Roofline) -> String {
    format!(
        "implausible: {:.3} us is below the roofline floor of {:.3} us on {} ({}-bound) — a \
         broken timer or skipped work",
        r.time_us,
        r.floor_us,
        r.hardware,
        match r.bound {
            crate::perf::roofline::Bound::Compute => "compute",
            crate::perf::roofline::Bound::Memory => "memory",
        }
    )
}

pub fn budget_summary(
    case: &str,
    hardware: &str,
    measured_us: f64,
    budget: &Budget,
    fraction: Option<f64>,
    problems: &[String],
) -> String {
    let mut s = format!("{case} on {hardware}: median {measured_us:.2} us");
    match budget.max_us {
        Some(m) => write!(s, ", budget {m:.2} us").unwrap(),
        None => s.push_str(", no time budget"),
    }
    match fraction {
        Some(f) => write!(s, ", roofline fraction {f:.3}").unwrap(),
        None => s.push_str(", roofline fraction unknown"),
    }
    if let Some(min) = budget.min_roofline_fraction {
        write!(s, " (minimum {min:.3})").unwrap();
    }
    if problems.is_empty() {
        s.push_str(": within budget");
    } else {
        s.push_str(": OVER BUDGET: ");
        s.push_str(&problems.join("; "));
    }
    s
}
