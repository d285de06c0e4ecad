//! User-facing text of the performance gate and budgets.

use std::fmt::Write as _;

use crate::perf::budget::Budget;
use crate::perf::compare::{CaseComparison, Comparison, Verdict};
use crate::perf::roofline::Roofline;

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

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$}"))
}

fn row(c: &CaseComparison) -> [String; 7] {
    let r = &c.result;
    let ratio = match (r.ratio, r.ci_low, r.ci_high) {
        (Some(x), Some(lo), Some(hi)) => format!("{x:.4} [{lo:.4}, {hi:.4}]"),
        _ => "-".to_string(),
    };
    let p = match r.verdict {
        Verdict::Improvement => r.p_faster,
        _ => r.p_slower,
    };
    let case = match &c.hardware {
        Some(h) => format!("{} @{h}", c.id),
        None => c.id.clone(),
    };
    [
        case,
        c.target.clone(),
        fmt_opt(r.baseline.map(|s| s.median_us), 3),
        fmt_opt(r.candidate.map(|s| s.median_us), 3),
        ratio,
        p.map_or_else(|| "-".to_string(), |p| format!("{p:.2e}")),
        r.verdict.label().to_string(),
    ]
}

/// The comparison as an aligned text table followed by a legend and a summary line.
pub fn comparison_table(cmp: &Comparison) -> String {
    let header = [
        "case",
        "target",
        "baseline median us",
        "candidate median us",
        "ratio [CI low, CI high]",
        "p-value",
        "verdict",
    ]
    .map(String::from);
    let rows: Vec<[String; 7]> = cmp.cases.iter().map(row).collect();
    let mut widths = header.clone().map(|h| h.len());
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &[String; 7]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(parts.join("  ").trim_end());
        out.push('\n');
    };
    line(&mut out, &header);
    for r in &rows {
        line(&mut out, r);
    }
    let cfg = &cmp.config;
    let _ = writeln!(
        out,
        "\nratio = candidate / baseline of the mean inside Tukey fences (k = {}, spikes dropped \
         once), {:.1}% Welch-t (Fieller) interval; p = one-sided Mann-Whitney U on the fenced samples \
         (slower, or faster for IMPROVEMENT). REGRESSION needs CI low > {:.4} and p < {}; \
         IMPROVEMENT needs CI high < {:.4} and p < {}; fewer than {} samples a side is \
         INCONCLUSIVE.",
        cfg.fence_k,
        100.0 * (1.0 - 2.0 * cfg.ci_alpha),
        1.0 + cfg.threshold,
        cfg.rank_alpha,
        1.0 - cfg.threshold,
        cfg.rank_alpha,
        cfg.min_samples
    );
    for c in &cmp.cases {
        if matches!(
            c.result.verdict,
            Verdict::Inconclusive | Verdict::OnlyInBaseline | Verdict::OnlyInCandidate
        ) {
            let _ = writeln!(
                out,
                "{} ({}) {}: {}",
                c.id,
                c.target,
                c.result.verdict.label(),
                c.result.reason
            );
        }
    }
    let _ = writeln!(out, "{}", comparison_summary(cmp));
    out
}

/// One line: counts per verdict.
pub fn comparison_summary(cmp: &Comparison) -> String {
    let parts: Vec<String> = [
        Verdict::Regression,
        Verdict::Improvement,
        Verdict::Unchanged,
        Verdict::Inconclusive,
        Verdict::OnlyInBaseline,
        Verdict::OnlyInCandidate,
    ]
    .iter()
    .filter_map(|&v| {
        let n = cmp.count(v);
        (n > 0).then(|| format!("{n} {}", v.label()))
    })
    .collect();
    format!("{} cases: {}", cmp.cases.len(), parts.join(", "))
}

pub fn wrote_json(path: &std::path::Path) -> String {
    format!("wrote {}", path.display())
}

pub fn bad_input(err: &dyn std::fmt::Display) -> String {
    format!("error: {err}")
}

/// `perf compare` where no case is on both sides: nothing was compared, so the gate cannot be
/// green.
pub fn nothing_compared() -> String {
    "nothing judged: no case is in both the baseline and the candidate (exit 4); \
     check that both files were recorded for the same cases, target and hardware"
        .to_string()
}

/// `perf record` that timed no case (every case skipped, or the target unavailable).
pub fn nothing_recorded() -> String {
    "nothing judged: no case was timed, so the perf file holds no case (exit 4); \
     the skip reasons are listed above"
        .to_string()
}

/// The reason of an A/B verdict: the gate's, plus how the samples were taken.
pub fn ab_reason(gate: &str, against: &str, rounds: u32, per_block: u32) -> String {
    format!(
        "{gate}; timed against `{against}` in {rounds} interleaved rounds of {per_block} iteration(s) a side (A B, B A, ...)"
    )
}

pub fn ab_heading(against: &str, cases: usize) -> String {
    format!("A/B against `{against}` ({cases} case(s); baseline = `{against}`, candidate = the target named in each row):")
}

pub fn ab_not_timed(id: &str, target: &str, reason: &str) -> String {
    format!("not timed A/B: {id} [{target}]: {reason}")
}

pub fn ab_slower(against: &str) -> String {
    format!(
        "A/B: at least one case is slower than `{against}` beyond the threshold (REGRESSION above)"
    )
}

pub const AGAINST_NEEDS_PERF: &str =
    "--against times the targets against another one: it needs --perf";
