//! The header verdict and the summary table: status counts per suite x target.

use super::html::{escape, num};
use crate::messages::report as msg;
use crate::results::{RunResults, Status};
use std::collections::BTreeMap;
use std::fmt::Write;

pub fn header(r: &RunResults) -> String {
    let failing = r.cases.iter().filter(|c| c.status.is_failure()).count();
    let judged = r
        .cases
        .iter()
        .filter(|c| c.status != Status::Skipped)
        .count();
    let (class, verdict) = if let Some(sig) = &r.interrupted {
        let v = msg::verdict_interrupted(sig, r.cases.len(), r.unfinished.len());
        ("fail", v)
    } else if judged == 0 {
        // Nothing was checked: never green, whatever was skipped.
        ("none", msg::verdict_nothing_judged(r.cases.len()))
    } else if failing == 0 {
        ("pass", msg::VERDICT_ALL_PASSED.to_string())
    } else {
        ("fail", format!("{failing} of {} failing", r.cases.len()))
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "<header><div class=\"verdict {class}\" id=\"verdict\">{}</div><h1>{}</h1>\
         <div class=\"meta\">conform {} &middot; started {} &middot; {} cases",
        escape(&verdict),
        msg::PAGE_TITLE,
        escape(&r.conform_version),
        escape(&r.started_at),
        r.cases.len()
    );
    if let Some(h) = &r.hardware {
        let _ = write!(s, " &middot; hardware {}", escape(h));
    }
    if r.fresh_seeds {
        s.push_str(" &middot; fresh seeds");
    }
    s.push_str("</div>");
    // Which implementation each target was: the device and the library versions.
    for t in &r.targets {
        let what = if t.available {
            let libs: Vec<String> = t.versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
            format!(
                "{}{}",
                t.description.as_deref().unwrap_or(""),
                if libs.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", libs.join(", "))
                }
            )
        } else {
            format!("unavailable: {}", t.reason.as_deref().unwrap_or(""))
        };
        let _ = write!(
            s,
            "<div class=\"meta target\">target <b>{}</b>: {}</div>",
            escape(&t.name),
            escape(&what)
        );
    }
    // Targets that declared themselves nondeterministic: not held to identical repeats.
    let declared: std::collections::BTreeSet<(&str, &str)> = r
        .cases
        .iter()
        .filter_map(|c| Some((c.target.as_str(), c.nondeterministic.as_deref()?)))
        .collect();
    for (target, why) in declared {
        let _ = write!(
            s,
            "<div class=\"meta target nondeterministic\">target <b>{}</b>: {}</div>",
            escape(target),
            escape(&msg::declared_nondeterministic(why))
        );
    }
    s.push_str("</header>\n");
    s
}

pub fn table(r: &RunResults) -> String {
    let mut groups: BTreeMap<(&str, &str), [usize; 6]> = BTreeMap::new();
    for c in &r.cases {
        let i = Status::ALL.iter().position(|s| *s == c.status).unwrap_or(0);
        groups.entry((&c.suite, &c.target)).or_default()[i] += 1;
    }
    let mut s = String::new();
    let _ = write!(
        s,
        "<section id=\"summary\"><h2>{}</h2>\n<table class=\"summary\"><thead><tr>\
         <th class=\"text\">suite</th><th class=\"text\">target</th><th>total</th>",
        msg::H_SUMMARY
    );
    for st in Status::ALL {
        let _ = write!(s, "<th>{}</th>", st.name());
    }
    s.push_str("</tr></thead><tbody>\n");
    let mut totals = [0usize; 6];
    for ((suite, target), counts) in &groups {
        let failing = Status::ALL
            .iter()
            .zip(counts)
            .any(|(st, n)| st.is_failure() && *n > 0);
        let _ = write!(
            s,
            "<tr{}><td class=\"text\">{}</td><td class=\"text\">{}</td><td>{}</td>",
            if failing { " class=\"failing\"" } else { "" },
            escape(suite),
            escape(target),
            counts.iter().sum::<usize>()
        );
        for (k, (st, n)) in Status::ALL.iter().zip(counts).enumerate() {
            totals[k] += n;
            s.push_str(&count_cell(*st, *n));
        }
        s.push_str("</tr>\n");
    }
    let _ = write!(
        s,
        "</tbody><tfoot><tr><th class=\"text\" colspan=\"2\">all</th><th>{}</th>",
        totals.iter().sum::<usize>()
    );
    for n in totals {
        let _ = write!(s, "<th>{n}</th>");
    }
    s.push_str("</tr></tfoot></table>\n");
    let total_ms: f64 = r.cases.iter().map(|c| c.duration_ms).sum();
    let _ = writeln!(
        s,
        "<p class=\"note\">total trial time {} s</p></section>",
        num(total_ms / 1000.0)
    );
    s
}

fn count_cell(st: Status, n: usize) -> String {
    let class = if n == 0 {
        "zero"
    } else if st.is_failure() {
        "failcount"
    } else {
        ""
    };
    format!("<td class=\"{class}\">{n}</td>")
}
