//! The kill matrix as an HTML section (for `conform adequacy --report` and `conform report
//! --adequacy`).

use super::text as msg;
use super::AdequacyReport;
use crate::html::{badge, escape, num};
use std::fmt::Write;

pub fn section(r: &AdequacyReport) -> String {
    let mut s = format!(
        "<section id=\"adequacy\"><h2>{}</h2>\n<p>{}</p>\n",
        msg::H_ADEQUACY,
        escape(&msg::verdict(r))
    );
    if r.interrupted.is_some() {
        let _ = writeln!(
            s,
            "<p>{} {}</p>",
            badge("interrupted", "failed"),
            escape(msg::PARTIAL_NOTE)
        );
    }
    let _ = writeln!(
        s,
        "<p>overall score {} &middot; {} faults &middot; {} seed set(s) &middot; {} s</p>",
        r.score.map_or("n/a".into(), |x| num(x * 100.0) + "%"),
        r.faults.len(),
        r.seed_sets.len(),
        num(r.duration_s)
    );
    s.push_str("<table class=\"adequacy\"><thead><tr><th>fault</th><th>required</th>");
    for sc in &r.suites {
        let _ = write!(s, "<th>{}</th>", escape(&sc.suite));
    }
    s.push_str("<th>kill rate</th><th>what the kernel gets wrong</th></tr></thead><tbody>\n");
    for f in &r.faults {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td>",
            escape(&f.name),
            escape(&f.requirement)
        );
        for sc in &r.suites {
            let cell = r
                .matrix
                .iter()
                .find(|c| c.fault == f.name && c.suite == sc.suite);
            let (text, class) = match cell.and_then(|c| c.kill_rate) {
                None => ("–".to_string(), "skipped"),
                Some(x) if x >= 1.0 => ("killed".to_string(), "passed"),
                Some(x) if x > 0.0 => (format!("{}%", num(x * 100.0)), "borderline"),
                Some(_) => ("survived".to_string(), "failed"),
            };
            let title: Vec<String> = cell
                .map(|c| c.outcomes.iter().map(msg::outcome_text).collect())
                .unwrap_or_default();
            let _ = write!(
                s,
                "<td title=\"{}\">{}</td>",
                escape(&title.join("\n")),
                badge(&text, class)
            );
        }
        let rate = f.kill_rate.map_or("n/a".into(), |x| num(x * 100.0) + "%");
        let rate = match f.min_margin {
            Some(m) => format!("{rate} (margin {m})"),
            None => rate,
        };
        let rate = if f.passes {
            rate
        } else if r.required_survivors.contains(&f.name) {
            format!("{rate} {}", badge("survives", "failed"))
        } else if r.thin_kills.contains(&f.name) {
            format!(
                "{rate} {}",
                badge(
                    &format!(
                        "thin: margin {} < {}",
                        f.min_margin.unwrap_or(0),
                        f.margin_floor
                    ),
                    "failed"
                )
            )
        } else {
            format!("{rate} {}", badge("unfinished", "borderline"))
        };
        let _ = writeln!(s, "<td>{rate}</td><td>{}</td></tr>", escape(&f.description));
    }
    s.push_str("</tbody></table>\n<table><thead><tr><th>suite</th><th>score</th><th>faults killed on every seed set</th></tr></thead><tbody>\n");
    for sc in &r.suites {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{} of {}</td></tr>",
            escape(&sc.suite),
            sc.score.map_or("n/a".into(), |x| num(x * 100.0) + "%"),
            sc.always_killed,
            sc.applicable_faults
        );
    }
    s.push_str("</tbody></table>\n");
    s.push_str(&super::regimes::html(r));
    s.push_str("</section>\n");
    s
}

/// A page holding only the adequacy section.
pub fn page(r: &AdequacyReport) -> String {
    crate::html::page(msg::PAGE_TITLE, &format!("<main>\n{}</main>\n", section(r)))
}
