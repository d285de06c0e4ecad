//! One case's card: status, message, replay command and, per output tensor, the verdict's
//! figures, the error histogram, the heatmap and the worst elements.

use super::error::ReportError;
use super::html::{anchor, badge, escape, num};
use super::plots::{error_histogram, heatmap};
use super::replay;
use crate::messages::report as msg;
use crate::results::{CaseResult, OutputMetrics};
use std::fmt::Write;

/// The card of `c`; `kind` is the badge shown next to the status (e.g. `borderline`).
pub fn card(
    c: &CaseResult,
    results: &crate::results::RunResults,
    kind: Option<&str>,
    open: bool,
) -> Result<String, ReportError> {
    let mut s = String::new();
    let _ = write!(
        s,
        "<details class=\"case\" id=\"{}\"{}><summary>{}{}<h3 style=\"display:inline\">{}</h3>\
         <div class=\"facts\">target <b>{}</b> &middot; suite {} &middot; op {} &middot; seed {} \
         &middot; {} ms</div></summary>\n<div class=\"body\">\n",
        anchor(&format!("{}\u{0}{}", c.id, c.target)),
        if open { " open" } else { "" },
        badge(c.status.name(), c.status.name()),
        kind.map(|k| badge(k, k)).unwrap_or_default(),
        escape(&c.id),
        escape(&c.target),
        escape(&c.suite),
        escape(&c.op),
        c.seed,
        num(c.duration_ms)
    );
    if !c.message.is_empty() {
        let _ = writeln!(s, "<pre class=\"message\">{}</pre>", escape(&c.message));
    }
    if let Some(why) = &c.nondeterministic {
        let _ = writeln!(
            s,
            "<p class=\"nondeterministic\">{}</p>",
            escape(&msg::declared_nondeterministic(why))
        );
    }
    let _ = writeln!(
        s,
        "<h4>{}</h4><pre class=\"replay\"><code>{}</code></pre>",
        msg::REPLAY,
        escape(&replay::command(c, results))
    );
    s.push_str(&knobs(c));
    for (name, m) in &c.metrics {
        s.push_str(&output(name, m)?);
    }
    if !c.notes.is_empty() {
        let _ = writeln!(
            s,
            "<h4>notes</h4><pre class=\"notes\">{}</pre>",
            escape(&c.notes.join("\n"))
        );
    }
    s.push_str("</div></details>\n");
    Ok(s)
}

/// For a case whose recipe models a CANN kernel: its knobs and their ledger status
/// (docs/ascend.md), the weak ones (assumed, contradicted and not fixed) marked. Empty for other
/// recipes and for results written without the recipe.
fn knobs(c: &CaseResult) -> String {
    use crate::ledger::{self, Status};
    // The knob set and statuses do not depend on the dtype (only the values do, which the
    // card does not show: `conform explain` does).
    let Some(knobs) = ledger::result_knobs(c) else {
        return String::new();
    };
    let mut s = variant(c);
    let _ = write!(
        s,
        "<h4>{}</h4><p class=\"knobs\">{}</p>\n<table class=\"knobs\"><tr><th class=\"text\">knob</th>\
         <th class=\"text\">status</th><th class=\"text\">claim</th></tr>\n",
        msg::KNOBS,
        escape(&msg::knobs_intro(
            &c.recipe,
            &crate::messages::knob_tally(&knobs),
            ledger::LEDGER_PATH
        ))
    );
    for k in &knobs {
        let status = k.status().map_or("no ledger row", Status::name);
        let class = if k.status().is_none_or(Status::is_weak) {
            "borderline"
        } else {
            "passed"
        };
        let _ = writeln!(
            s,
            "<tr><td class=\"text\"><code>{}</code></td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
            escape(&k.knob.id),
            badge(status, class),
            escape(k.row.map_or("", |r| r.claim.as_str()))
        );
    }
    s.push_str("</table>\n");
    s
}

/// The kernel variant a case landed on, and why a target declaring the recipe was judged
/// without its bits, when the result says so.
fn variant(c: &CaseResult) -> String {
    let mut s = String::new();
    if let Some(v) = &c.variant {
        let _ = writeln!(
            s,
            "<h4>{}</h4><p class=\"variant\">{}</p>",
            msg::VARIANT,
            escape(&msg::variant_line(
                &v.kernel,
                &v.key,
                &v.tiling,
                &v.detail,
                &v.socs.join(", "),
                &v.releases,
                &v.preset
            ))
        );
    }
    if let Some(why) = &c.recipe_set_aside {
        let _ = writeln!(
            s,
            "<p class=\"variant\">{}</p>",
            escape(&msg::recipe_set_aside(why))
        );
    }
    s
}

fn output(name: &str, m: &OutputMetrics) -> Result<String, ReportError> {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<h4>output <code>{}</code> &middot; {} &middot; {}</h4>",
        escape(name),
        escape(&m.policy),
        if m.passed { "passed" } else { "failed" }
    );
    if !m.reason.is_empty() {
        let _ = writeln!(s, "<pre class=\"reason\">{}</pre>", escape(&m.reason));
    }
    s.push_str(
        "<table class=\"figures\"><tr><th>elements</th><th>mismatches</th><th>ratio</th>\
                <th>non-finite</th><th>unwritten</th><th>max abs</th><th>max rel</th><th>MERE</th>\
                <th>MARE</th><th>RMSE</th><th>max ULP</th></tr><tr>",
    );
    for cell in [
        m.numel.to_string(),
        m.mismatches.to_string(),
        num(m.mismatch_ratio),
        m.non_finite.to_string(),
        m.unwritten.to_string(),
        num(m.max_abs_err),
        num(m.max_rel_err),
        num(m.mere),
        num(m.mare),
        num(m.rmse),
        m.max_ulp.map_or("-".into(), |u| u.to_string()),
    ] {
        let _ = write!(s, "<td>{}</td>", escape(&cell));
    }
    s.push_str("</tr></table>\n");
    if !m.extra.is_empty() {
        s.push_str("<table class=\"extra\"><tr>");
        for k in m.extra.keys() {
            let _ = write!(s, "<th>{}</th>", escape(k));
        }
        s.push_str("</tr><tr>");
        for v in m.extra.values() {
            let _ = write!(s, "<td>{}</td>", num(*v));
        }
        s.push_str("</tr></table>\n");
    }
    let mut plots = Vec::new();
    if m.ulp_histogram.iter().any(|b| b.1 > 0) {
        let bad = ulp_bad_from(&m.policy, &m.ulp_histogram);
        plots.push(error_histogram::svg(
            &format!("{name}: ULP distance"),
            &m.ulp_histogram,
            bad,
        )?);
    } else if m.rel_err_histogram.iter().any(|b| b.1 > 0) {
        plots.push(error_histogram::svg(
            &format!("{name}: relative error"),
            &m.rel_err_histogram,
            None,
        )?);
    }
    if let Some(h) = &m.heatmap {
        plots.push(heatmap::svg(&format!("{name}: max |error| per cell"), h)?);
    }
    if !plots.is_empty() {
        s.push_str("<div class=\"plots\">");
        for p in plots {
            let _ = write!(s, "<div class=\"plot\">{p}</div>");
        }
        s.push_str("</div>\n");
    }
    if !m.worst.is_empty() {
        s.push_str("<h4>worst elements</h4><table class=\"worst\"><tr><th class=\"text\">index</th>\
                    <th>actual</th><th>expected</th><th>abs err</th><th>rel err</th><th>ULP</th></tr>\n");
        for w in &m.worst {
            let _ = writeln!(
                s,
                "<tr><td class=\"text\"><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td></tr>",
                escape(&w.index),
                num(w.actual),
                num(w.expected),
                num(w.abs_err),
                num(w.rel_err),
                w.ulp.map_or("-".into(), |u| u.to_string())
            );
        }
        s.push_str("</table>\n");
    }
    Ok(s)
}

/// For a policy `ulp(max=N)`: the first ULP bucket whose lower bound exceeds N (bucket labels
/// `0`, `1`, `2-3`, ... or `>=2^k` read by their leading number).
pub fn ulp_bad_from(policy: &str, buckets: &[(String, u64)]) -> Option<usize> {
    let rest = policy.strip_prefix("ulp(max=")?;
    let max: u64 = rest
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    buckets.iter().position(|(label, _)| {
        let digits: String = label
            .trim_start_matches(|c: char| !c.is_ascii_digit())
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse::<u64>().is_ok_and(|lo| lo > max)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulp_tolerance_marks_the_right_bucket() {
        let b: Vec<(String, u64)> = ["0", "1", "2-3", "4-7"]
            .iter()
            .map(|l| (l.to_string(), 1))
            .collect();
        assert_eq!(ulp_bad_from("ulp(max=2)", &b), Some(3));
        assert_eq!(ulp_bad_from("ulp(max=0)", &b), Some(1));
        assert_eq!(ulp_bad_from("bitwise", &b), None);
    }
}
