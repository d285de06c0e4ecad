//! The failure section (failures first, most severe status first), borderline passes and the
//! list of skipped cases with their reasons.

use super::case_detail::card;
use super::error::ReportError;
use super::html::escape;
use crate::messages::report as msg;
use crate::results::{CaseResult, RunResults, Status};
use std::fmt::Write;

/// Severity order for failures: crashes and timeouts before errors before numeric failures.
fn severity(s: Status) -> u8 {
    match s {
        Status::Crashed => 0,
        Status::Timeout => 1,
        Status::Error => 2,
        Status::Failed => 3,
        Status::Skipped => 4,
        Status::Passed => 5,
    }
}

/// A passed case whose check tolerated mismatching elements.
pub fn is_borderline(c: &CaseResult) -> bool {
    c.status == Status::Passed && c.metrics.values().any(|m| m.mismatches > 0)
}

pub fn failures(r: &RunResults) -> Result<String, ReportError> {
    let mut failing: Vec<&CaseResult> = r.cases.iter().filter(|c| c.status.is_failure()).collect();
    failing.sort_by(|a, b| {
        (severity(a.status), &a.id, &a.target).cmp(&(severity(b.status), &b.id, &b.target))
    });
    let mut s = format!(
        "<section id=\"failures\"><h2>{} ({})</h2>\n",
        msg::H_FAILURES,
        failing.len()
    );
    if failing.is_empty() {
        let _ = writeln!(s, "<p class=\"note\">{}</p>", msg::NO_FAILURES);
    } else {
        s.push_str("<ul class=\"failure-index\">\n");
        for c in &failing {
            let _ = writeln!(
                s,
                "<li><a href=\"#{}\">{}</a> <span class=\"note\">({} on {})</span></li>",
                super::html::anchor(&format!("{}\u{0}{}", c.id, c.target)),
                escape(&c.id),
                c.status.name(),
                escape(&c.target)
            );
        }
        s.push_str("</ul>\n");
        // The first few cards open; a long list stays navigable.
        for (i, c) in failing.iter().enumerate() {
            s.push_str(&card(c, r, None, i < 20)?);
        }
    }
    s.push_str("</section>\n");
    Ok(s)
}

pub fn borderline(r: &RunResults) -> Result<String, ReportError> {
    let cases: Vec<&CaseResult> = r.cases.iter().filter(|c| is_borderline(c)).collect();
    if cases.is_empty() {
        return Ok(String::new());
    }
    let mut s = format!(
        "<section id=\"borderline\"><h2>{} ({})</h2><p class=\"note\">{}</p>\n",
        msg::H_BORDERLINE,
        cases.len(),
        msg::BORDERLINE_EXPLAINED
    );
    for c in cases {
        s.push_str(&card(c, r, Some("borderline"), false)?);
    }
    s.push_str("</section>\n");
    Ok(s)
}

/// Whether any case of the run was judged against a recipe that models a CANN kernel.
pub fn has_ascend_recipes(r: &RunResults) -> bool {
    r.cases
        .iter()
        .any(|c| crate::ledger::result_knobs(c).is_some())
}

/// For every (op, recipe) of the run whose recipe models a CANN kernel: how many cases, how
/// many passed, the ledger's tally of the recipe's knobs and the weak ones by id, so that a
/// passing verdict shows what it rests on too (failing cases repeat it on their card).
pub fn ascend_assumptions(r: &RunResults) -> String {
    use crate::ledger;
    use std::collections::BTreeMap;
    // One row per (recipe, kernel variant, op): a dispatching recipe's cases land on several
    // variants, each with its own knobs.
    let mut groups: BTreeMap<(String, &str), (usize, usize, &crate::results::CaseResult)> =
        BTreeMap::new();
    for c in &r.cases {
        let name = match c.variant.as_ref().filter(|v| !v.preset.is_empty()) {
            Some(v) if v.preset != c.recipe => format!("{} ({})", c.recipe, v.preset),
            _ => c.recipe.clone(),
        };
        let e = groups.entry((name, &c.op)).or_insert((0, 0, c));
        e.0 += 1;
        e.1 += usize::from(c.status == Status::Passed);
    }
    let mut rows = String::new();
    for ((recipe, op), (n, passed, example)) in groups {
        let Some(knobs) = ledger::result_knobs(example) else {
            continue;
        };
        let weak: Vec<String> = knobs
            .iter()
            .filter(|k| k.status().is_none_or(ledger::Status::is_weak))
            .map(|k| {
                format!(
                    "<code>{}</code> ({})",
                    escape(&k.knob.id),
                    k.status().map_or("no ledger row", ledger::Status::name)
                )
            })
            .collect();
        let _ = writeln!(
            rows,
            "<tr><td class=\"text\"><code>{}</code></td><td class=\"text\">{}</td><td>{n}</td><td>{passed}</td>\
             <td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
            escape(&recipe),
            escape(op),
            escape(&crate::messages::knob_tally(&knobs)),
            weak.join(", ")
        );
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "<section id=\"ascend\"><h2>{}</h2><p class=\"note\">{}</p>\n<table class=\"knobs\">\
         <tr><th class=\"text\">recipe</th><th class=\"text\">op</th><th>cases</th><th>passed</th>\
         <th class=\"text\">knobs</th><th class=\"text\">assumed or contradicted (not fixed)</th></tr>\n{rows}</table></section>\n",
        msg::H_ASCEND,
        escape(&msg::ascend_explained(ledger::LEDGER_PATH))
    )
}

pub fn skipped(r: &RunResults) -> String {
    let cases: Vec<&CaseResult> = r
        .cases
        .iter()
        .filter(|c| c.status == Status::Skipped)
        .collect();
    if cases.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "<section id=\"skipped\"><details><summary><h2 style=\"display:inline\">{} ({})</h2>\
         </summary><ul class=\"skipped\">\n",
        msg::H_SKIPPED,
        cases.len()
    );
    for c in cases {
        let _ = writeln!(
            s,
            "<li><code>{}</code> on {}: {}</li>",
            escape(&c.id),
            escape(&c.target),
            escape(&c.message)
        );
    }
    s.push_str("</ul></details></section>\n");
    s
}

/// The trials an interrupt left unfinished (empty when the run was not interrupted).
pub fn unfinished(r: &RunResults) -> String {
    if r.unfinished.is_empty() {
        return String::new();
    }
    let why = crate::messages::unfinished_trial(r.interrupted.as_deref());
    let mut s = format!(
        "<section id=\"unfinished\"><h2>{} ({})</h2><p>{}</p><ul class=\"skipped\">\n",
        msg::H_UNFINISHED,
        r.unfinished.len(),
        escape(&why)
    );
    for u in &r.unfinished {
        let _ = writeln!(
            s,
            "<li><code>{}</code> on {}</li>",
            escape(&u.id),
            escape(&u.target)
        );
    }
    s.push_str("</ul></section>\n");
    s
}
