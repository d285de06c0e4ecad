//! Performance: measured time against the budget and the roofline fraction per case, the
//! comparison with a baseline, and the trend over several perf record files.

use super::error::ReportError;
use super::history_input::ChangeRow;
use super::html::{badge, escape, num};
use super::perf_input::{perf_case, Comparison, PerfCase, PerfFile};
use super::plots::{budget, trend};
use crate::messages::report as msg;
use crate::results::RunResults;
use conform_metadata::compare::Verdict;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// Most lines on the trend plot; the cases that moved most are kept.
pub const TREND_MAX_SERIES: usize = 10;

/// The perf figures to tabulate: each results case's `perf` object, then the cases of the
/// newest perf file that the results do not cover.
pub fn collect(
    r: &RunResults,
    results_path: &Path,
    files: &[PerfFile],
) -> Result<Vec<PerfCase>, ReportError> {
    let mut out = Vec::new();
    for (i, c) in r.cases.iter().enumerate() {
        if let Some(p) = &c.perf {
            out.push(perf_case(
                p,
                &c.id,
                &c.target,
                results_path,
                &format!("cases[{i}].perf"),
            )?);
        }
    }
    if let Some(last) = files.last() {
        for p in &last.cases {
            if !out.iter().any(|o| o.id == p.id && o.target == p.target) {
                out.push(p.clone());
            }
        }
    }
    Ok(out)
}

pub fn section(
    cases: &[PerfCase],
    baseline: Option<&[Comparison]>,
    files: &[PerfFile],
    changes: &[ChangeRow],
) -> Result<String, ReportError> {
    let mut s = format!("<section id=\"perf\"><h2>{}</h2>\n", msg::H_PERF);
    if cases.is_empty() && baseline.is_none() && files.len() < 2 {
        let _ = writeln!(s, "<p class=\"note\">{}</p></section>", msg::NO_PERF);
        return Ok(s);
    }
    if !cases.is_empty() {
        s.push_str(&table(cases)?);
    }
    if let Some(b) = baseline {
        s.push_str(&comparison_table(b));
    }
    if files.len() >= 2 {
        s.push_str(&trend_plot(files)?);
    }
    if !changes.is_empty() {
        s.push_str(&change_table(changes));
    }
    s.push_str("</section>\n");
    Ok(s)
}

/// Most series on the noise plots: those with drift or flagged runs first.
pub const NOISE_MAX_SERIES: usize = 8;

/// The history's series with their learned noise bands and drift nights (`--history`).
pub fn noise_section(series: &[super::history_input::NoiseSeries]) -> Result<String, ReportError> {
    let mut shown: Vec<&super::history_input::NoiseSeries> =
        series.iter().filter(|s| s.locations.len() >= 2).collect();
    if shown.is_empty() {
        return Ok(String::new());
    }
    shown.sort_by_key(|s| std::cmp::Reverse(s.drift.len() + 2 * s.flagged.len()));
    let total = shown.len();
    shown.truncate(NOISE_MAX_SERIES);
    let mut s = format!(
        "<section id=\"noise\"><h2>{}</h2><p class=\"note\">{}</p><div class=\"plots\">\n",
        msg::H_NOISE,
        msg::NOISE_LEGEND
    );
    for n in &shown {
        let _ = writeln!(
            s,
            "<div class=\"plot\">{}</div>",
            super::plots::noise::svg(n)?
        );
    }
    s.push_str("</div>\n");
    if total > shown.len() {
        let _ = writeln!(
            s,
            "<p class=\"note\">{} of {total} series shown: those with the most drift and flagged nights.</p>",
            shown.len()
        );
    }
    s.push_str("</section>\n");
    Ok(s)
}

/// Whether the case meets its budget: None without any budget.
pub fn within_budget(c: &PerfCase) -> Option<bool> {
    let time = match (c.median_us, c.budget_us) {
        (Some(m), Some(b)) => Some(m <= b),
        (None, Some(_)) => Some(false),
        _ => None,
    };
    let roofline = c
        .min_roofline_fraction
        .map(|min| c.roofline_fraction.is_some_and(|f| f >= min));
    match (time, roofline) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(true) && b.unwrap_or(true)),
    }
}

fn table(cases: &[PerfCase]) -> Result<String, ReportError> {
    let mut s = String::from(
        "<table class=\"perf\"><thead><tr><th>#</th><th class=\"text\">case</th>\
         <th class=\"text\">target</th><th>samples</th><th>median us</th><th>budget us</th>\
         <th>median / budget</th><th>roofline fraction</th><th>min fraction</th>\
         <th class=\"text\">budget</th></tr></thead><tbody>\n",
    );
    let mut bars = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let ratio = match (c.median_us, c.budget_us) {
            (Some(m), Some(b)) if b > 0.0 => Some(m / b),
            _ => None,
        };
        if let Some(q) = ratio {
            bars.push((i + 1, q));
        }
        let mut verdict = match within_budget(c) {
            Some(true) => badge("within", "passed"),
            Some(false) => badge("over", "over"),
            None => String::from("-"),
        };
        if c.implausible {
            verdict.push_str(&badge("below roofline floor", "implausible"));
        }
        let pct = |f: f64| format!("{}%", num(f * 100.0));
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"text\"><code>{}</code></td><td class=\"text\">{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"text\">{}</td></tr>",
            i + 1,
            escape(&c.id),
            escape(&c.target),
            c.samples_us.len(),
            c.median_us.map_or("-".into(), num),
            c.budget_us.map_or("-".into(), num),
            ratio.map_or("-".into(), num),
            c.roofline_fraction.map_or("-".into(), pct),
            c.min_roofline_fraction.map_or("-".into(), pct),
            verdict
        );
    }
    s.push_str("</tbody></table>\n");
    if !bars.is_empty() {
        let _ = writeln!(
            s,
            "<div class=\"plots\"><div class=\"plot\">{}</div></div>",
            budget::svg(&bars)?
        );
    }
    Ok(s)
}

fn verdict_order(c: &Comparison) -> u8 {
    match c.verdict {
        Verdict::Regression => 0,
        Verdict::Inconclusive => 1,
        _ if c.drift.is_some() => 2,
        Verdict::Improvement => 3,
        Verdict::Unchanged | Verdict::OnlyInBaseline | Verdict::OnlyInCandidate => 4,
    }
}

/// The badge of a row: its verdict, or DRIFT for a move the history gate put down to the
/// environment (its verdict UNCHANGED, its ratio anything but).
fn verdict_badge(c: &Comparison) -> String {
    match &c.drift {
        Some(_) => badge("DRIFT", "drift"),
        None => badge(c.verdict.label(), &c.verdict.label().to_ascii_lowercase()),
    }
}

fn comparison_table(b: &[Comparison]) -> String {
    let mut rows: Vec<&Comparison> = b.iter().collect();
    rows.sort_by(|x, y| {
        (verdict_order(x), &x.id, &x.target).cmp(&(verdict_order(y), &y.id, &y.target))
    });
    let mut s = format!(
        "<h3 id=\"baseline\">{}</h3>\n<table class=\"baseline\"><thead><tr>\
         <th class=\"text\">case</th><th class=\"text\">target</th><th>base median us</th>\
         <th>new median us</th><th>ratio (new / base)</th><th>confidence interval</th>\
         <th>p-value</th><th class=\"text\">verdict</th><th class=\"text\">why</th></tr></thead><tbody>\n",
        msg::H_BASELINE
    );
    for c in rows {
        let _ = writeln!(
            s,
            "<tr><td class=\"text\"><code>{}</code></td><td class=\"text\">{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"text\">{}</td>\
             <td class=\"text note\">{}</td></tr>",
            escape(&c.id),
            escape(&c.target),
            c.baseline_median_us.map_or("-".into(), num),
            c.candidate_median_us.map_or("-".into(), num),
            c.ratio.map_or("-".into(), num),
            c.ci.map_or("-".into(), |(lo, hi)| format!("[{}, {}]", num(lo), num(hi))),
            c.p_value.map_or("-".into(), num),
            verdict_badge(c),
            escape(&c.reason)
        );
    }
    s.push_str("</tbody></table>\n");
    s
}

/// The change points of the perf history (`--history`), newest last per series.
fn change_table(changes: &[ChangeRow]) -> String {
    let mut s = format!(
        "<h3 id=\"changes\">{}</h3><table><thead><tr><th>series</th><th>change</th>\
         <th>p</th><th>last run before</th><th>first run after</th></tr></thead><tbody>\n",
        msg::H_CHANGES
    );
    for c in changes {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{:.3}</td><td>{}</td><td>{}</td></tr>",
            escape(&c.series),
            badge(
                &format!("{:+.1}%", 100.0 * (c.ratio - 1.0)),
                if c.ratio > 1.0 { "fail" } else { "pass" }
            ),
            c.p_value,
            escape(&c.before),
            escape(&c.after)
        );
    }
    s.push_str("</tbody></table>\n");
    s
}

fn trend_plot(files: &[PerfFile]) -> Result<String, ReportError> {
    let mut by_case: BTreeMap<(String, String), Vec<Option<f64>>> = BTreeMap::new();
    for (k, f) in files.iter().enumerate() {
        for c in &f.cases {
            let v = by_case
                .entry((c.id.clone(), c.target.clone()))
                .or_insert_with(|| vec![None; files.len()]);
            v[k] = c.median_us;
        }
    }
    let moved = |m: &[Option<f64>]| {
        let present: Vec<f64> = m.iter().flatten().copied().collect();
        match (present.first(), present.last()) {
            (Some(a), Some(b)) if *a > 0.0 => (b / a - 1.0).abs(),
            _ => 0.0,
        }
    };
    let mut series: Vec<trend::Series> = by_case
        .into_iter()
        .map(|((id, target), medians)| trend::Series {
            name: format!("{id} [{target}]"),
            medians,
        })
        .collect();
    let total = series.len();
    series.sort_by(|a, b| moved(&b.medians).total_cmp(&moved(&a.medians)));
    series.truncate(TREND_MAX_SERIES);
    let labels: Vec<String> = files.iter().map(|f| f.label.clone()).collect();
    let mut s = format!(
        "<h3 id=\"trend\">{}</h3><div class=\"plots\"><div class=\"plot\">{}</div></div>\n",
        msg::H_TREND,
        trend::svg(&labels, &series)?
    );
    if total > series.len() {
        let _ = writeln!(
            s,
            "<p class=\"note\">{} of {total} cases shown: those whose median moved most.</p>",
            series.len()
        );
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::compare::{CaseComparison, Comparison as Cmp, GateConfig, SampleComparison};
    use std::path::Path;

    /// A history gate's comparison: one row the gate called environment drift (its verdict
    /// UNCHANGED after a -46% move), one plain UNCHANGED row whose ratio is below 1.
    fn gate_json() -> serde_json::Value {
        let row = |id: &str, ratio: f64, reason: &str| CaseComparison {
            id: id.into(),
            target: "reference".into(),
            hardware: Some("this-cpu".into()),
            result: SampleComparison {
                verdict: Verdict::Unchanged,
                baseline: None,
                candidate: None,
                ratio: Some(ratio),
                ci_low: Some(ratio - 0.02),
                ci_high: Some(ratio + 0.02),
                p_slower: Some(0.9999),
                p_faster: Some(3.2e-7),
                reason: reason.into(),
                rounds: None,
            },
        };
        let cmp = Cmp {
            config: GateConfig::default(),
            cases: vec![
                row(
                    "s/moved",
                    0.54,
                    "environment drift: the same commit as the reference run",
                ),
                row("s/steady", 0.99, "no change beyond the 3.0% threshold"),
            ],
        };
        let mut v = serde_json::to_value(&cmp).unwrap();
        v["references"] = serde_json::json!([
            {"id": "s/moved", "target": "reference", "hardware": "this-cpu", "history_runs": 5,
             "reference_runs": 5, "changes": [],
             "noise": {"verdict": "UNCHANGED", "own_verdict": "IMPROVEMENT",
                       "drift": "environment drift: the same commit as the reference run (-46.0% with the code unchanged)"}},
            {"id": "s/steady", "target": "reference", "hardware": "this-cpu", "history_runs": 5,
             "reference_runs": 5, "changes": [],
             "noise": {"verdict": "UNCHANGED", "own_verdict": "UNCHANGED"}}
        ]);
        v
    }

    #[test]
    fn a_row_that_moved_by_drift_shows_drift_never_unchanged() {
        let rows =
            super::super::perf_input::comparisons(&gate_json(), Path::new("c.json")).unwrap();
        let html = comparison_table(&rows);
        let moved = html
            .lines()
            .find(|l| l.contains("s/moved"))
            .expect("the moved row");
        assert!(moved.contains("badge drift\">DRIFT"), "{moved}");
        assert!(!moved.contains("UNCHANGED</span>"), "{moved}");
        let steady = html.lines().find(|l| l.contains("s/steady")).unwrap();
        assert!(steady.contains("badge unchanged\">UNCHANGED"), "{steady}");
    }

    #[test]
    fn the_reports_p_value_is_the_one_the_cli_prints_for_the_row() {
        let v = gate_json();
        let cmp: Cmp = serde_json::from_value(v.clone()).unwrap();
        let cli = crate::messages::perf::comparison_table(&cmp);
        let rows = super::super::perf_input::comparisons(&v, Path::new("c.json")).unwrap();
        for r in &rows {
            let p = r.p_value.expect("a p-value");
            let line = cli.lines().find(|l| l.starts_with(&r.id)).unwrap();
            assert!(
                line.contains(&format!("{p:.2e}")),
                "report p = {p:.2e}, CLI row: {line}"
            );
        }
    }
}
