//! Every user-facing message of the `conform` CLI, in one place (per command in submodules).

use crate::results::{RunResults, Status};

/// `conform list`: one line per case.
pub fn list_line(id: &str, tier: &str, recipe: &str) -> String {
    format!("{id}  [{tier}] recipe={recipe}")
}

/// `conform list` footer.
pub fn list_footer(n: usize, suites: usize) -> String {
    format!("{n} cases in {suites} suites")
}

/// Nothing matched the selection.
pub fn no_cases_selected() -> String {
    "no case matches the selection (check --suite, --filter and --tier; `conform list` shows every case)".to_string()
}

/// An unknown suite name.
pub fn unknown_suites(names: &[String]) -> String {
    format!("unknown suite(s): {} (see `conform list`)", names.join(", "))
}

/// An unknown case id for `explain`.
pub fn unknown_case(id: &str) -> String {
    format!("no case `{id}` (see `conform list`)")
}

/// A fatal error line.
pub fn error_line(e: &dyn std::fmt::Display) -> String {
    format!("error: {e}")
}

/// The summary table printed after a run: one row per (suite, target).
pub fn summary_table(results: &RunResults) -> String {
    use std::collections::BTreeMap;
    let mut rows: BTreeMap<(String, String), [usize; 6]> = BTreeMap::new();
    for c in &results.cases {
        let r = rows.entry((c.suite.clone(), c.target.clone())).or_default();
        r[Status::ALL.iter().position(|s| *s == c.status).unwrap_or(0)] += 1;
    }
    let mut out = format!(
        "{:<24} {:<14} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}\n",
        "suite", "target", "passed", "failed", "skipped", "error", "timeout", "crashed"
    );
    let mut total = [0usize; 6];
    for ((suite, target), r) in &rows {
        out.push_str(&format!(
            "{:<24} {:<14} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}\n",
            suite, target, r[0], r[1], r[2], r[3], r[4], r[5]
        ));
        for i in 0..6 {
            total[i] += r[i];
        }
    }
    out.push_str(&format!(
        "{:<24} {:<14} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "total", "", total[0], total[1], total[2], total[3], total[4], total[5]
    ));
    out
}

/// One finished case, for plain (non-terminal) progress output.
pub fn case_line(status: Status, id: &str, target: &str, ms: f64, message: &str) -> String {
    let mut s = format!("{:<8} {id} [{target}] ({ms:.0} ms)", status.name().to_uppercase());
    if !message.is_empty() {
        s.push_str(" — ");
        s.push_str(message.lines().next().unwrap_or(""));
    }
    s
}

/// The replay command of a case.
pub fn replay_command(id: &str, seed: u64, target: &str) -> String {
    format!("conform run --filter '^{}$' --seed {seed} --target {target}", regex_escape(id))
}

fn regex_escape(s: &str) -> String {
    let mut o = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            o.push('\\');
        }
        o.push(c);
    }
    o
}

/// Where results were written.
pub fn wrote(what: &str, path: &std::path::Path) -> String {
    format!("wrote {what}: {}", path.display())
}
