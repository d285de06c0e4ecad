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

fn verdict_order(v: Verdict) -> u8 {
    match v {
        Verdict::Regression => 0,
        Verdict::Inconclusive => 1,
        Verdict::Improvement => 2,
        Verdict::Unchanged | Verdict::OnlyInBaseline | Verdict::OnlyInCandidate => 3,
    }
}

fn comparison_table(b: &[Comparison]) -> String {
    let mut rows: Vec<&Comparison> = b.iter().collect();
    rows.sort_by(|x, y| {
        (verdict_order(x.verdict), &x.id, &x.target).cmp(&(
            verdict_order(y.verdict),
            &y.id,
            &y.target,
        ))
    });
    let mut s = format!(
        "<h3 id=\"baseline\">{}</h3>\n<table class=\"baseline\"><thead><tr>\
         <th class=\"text\">case</th><th class=\"text\">target</th><th>base median us</th>\
         <th>new median us</th><th>ratio (new / base)</th><th>confidence interval</th>\
         <th>p-value</th><th class=\"text\">verdict</th><th class=\"text\">why</th></tr></thead><tbody>\n",
        msg::H_BASELINE
    );
    for c in rows {
        let class = c.verdict.label().to_ascii_lowercase();
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
            badge(c.verdict.label(), &class),
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
