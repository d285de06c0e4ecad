//! Messages of `conform adequacy` (terminal and HTML).

use super::{AdequacyReport, SetOutcome};
use std::fmt::Write;

pub const ABOUT: &str = "Measure how sharp the suites are: run every selected case against the \
reference with each fault of the built-in catalogue injected, over the cases' seeds and N fresh \
seed sets, and print the kill matrix (exit 1 when a required fault survives)";
pub const HELP_SEED_SETS: &str =
    "Fresh seed sets besides the cases' own seeds (each one seed for every case), 0 to 1000";
/// The most fresh seed sets `--seed-sets` accepts (each set reruns every case under every
/// fault: more is hours, not sharper suites).
pub const MAX_SEED_SETS: u32 = 1000;
pub const HELP_SEED: &str =
    "Base seed the fresh seed sets are derived from (default: drawn from the clock; printed)";
pub const HELP_FAULT: &str = "Only these faults (repeatable; `--list-faults` shows them)";
pub const HELP_JSON: &str =
    "Write the kill matrix as JSON (format conform-adequacy-v1). Meanwhile \
each finished cell is journaled to FILE.journal: on SIGINT/SIGTERM the partial matrix is written \
(exit 130/143); after SIGKILL `conform report --input FILE.journal --out DIR` recovers it";
pub const HELP_REPORT: &str = "Write the kill matrix as a self-contained HTML page DIR/index.html \
(without --json, the journal of finished cells is DIR/adequacy.json.journal)";
pub const HELP_LIST: &str = "List the fault catalogue and exit";
pub const PAGE_TITLE: &str = "conform adequacy";
pub const H_ADEQUACY: &str = "Fault adequacy";

pub fn fault_line(name: &str, family: &str, requirement: &str, ops: &str, text: &str) -> String {
    format!("{name:<34} {family:<16} {requirement:<9} {ops}\n    {text}")
}

pub fn catalogue_footer(n: usize, gated: usize) -> String {
    format!("{n} faults, {gated} required in the quick tier")
}

pub fn starting(cases: usize, faults: usize, sets: usize, base: u64) -> String {
    format!(
        "adequacy: {cases} cases x {faults} faults over {sets} seed set(s) (set 0 = the cases' own seeds; fresh sets derived from --seed {base})"
    )
}

fn pct(r: Option<f64>) -> String {
    match r {
        Some(r) => format!("{:.0}%", r * 100.0),
        None => "n/a".to_string(),
    }
}

/// A cell of the printed matrix: `K` killed on every set, `k` on some, `.` survived every
/// set, `-` not applicable.
fn mark(rate: Option<f64>) -> &'static str {
    match rate {
        None => "-",
        Some(r) if r >= 1.0 => "K",
        Some(r) if r > 0.0 => "k",
        Some(_) => ".",
    }
}

/// The printed kill matrix, per-fault lines and the scores.
pub fn matrix(r: &AdequacyReport) -> String {
    let mut s = String::new();
    let suites: Vec<&str> = r.suites.iter().map(|s| s.suite.as_str()).collect();
    let _ = writeln!(
        s,
        "kill matrix (K killed on every seed set, k on some, . survived, - not applicable):"
    );
    let _ = write!(s, "{:<34} {:<9}", "fault", "required");
    for (i, _) in suites.iter().enumerate() {
        let _ = write!(s, " {:>3}", format!("S{}", i + 1));
    }
    let _ = writeln!(s, "  {:>5}  {:>6}  killed by", "rate", "margin");
    for f in &r.faults {
        let _ = write!(s, "{:<34} {:<9}", f.name, f.requirement);
        for suite in &suites {
            let cell = r
                .matrix
                .iter()
                .find(|c| c.fault == f.name && c.suite == *suite);
            let _ = write!(s, " {:>3}", mark(cell.and_then(|c| c.kill_rate)));
        }
        let flag = if f.passes {
            String::new()
        } else if r.required_survivors.contains(&f.name) {
            "  <- SURVIVES".to_string()
        } else if r.thin_kills.contains(&f.name) {
            format!("  <- THIN (floor {})", f.margin_floor)
        } else {
            "  (not measured to the end)".to_string()
        };
        let margin = f.min_margin.map_or("-".to_string(), |m| m.to_string());
        let by = f
            .killed_by
            .first()
            .map(|k| {
                if f.killed_by.len() > 1 {
                    format!("{k} (+{})", f.killed_by.len() - 1)
                } else {
                    k.clone()
                }
            })
            .unwrap_or_default();
        let _ = writeln!(s, "  {:>5}  {margin:>6}  {by}{flag}", pct(f.kill_rate));
    }
    let _ = writeln!(s, "suites:");
    for (i, sc) in r.suites.iter().enumerate() {
        let _ = writeln!(
            s,
            "  S{} {:<24} score {:>5}  ({} of {} applicable faults killed on every seed set)",
            i + 1,
            sc.suite,
            pct(sc.score),
            sc.always_killed,
            sc.applicable_faults
        );
    }
    let _ = write!(
        s,
        "overall score {} over {} faults and {} seed set(s), {:.1} s",
        pct(r.score),
        r.faults.len(),
        r.seed_sets.len(),
        r.duration_s
    );
    s
}

/// How each survivor survived: the seed sets and the cases it passed.
pub fn survivors(r: &AdequacyReport) -> String {
    let mut s = String::new();
    for f in r
        .faults
        .iter()
        .filter(|f| r.required_survivors.contains(&f.name))
    {
        if f.applicable_sets == 0 {
            let _ = writeln!(
                s,
                "required fault `{}` survives: no selected case applies it ({})",
                f.name, f.description
            );
            continue;
        }
        let seeds: Vec<String> = f
            .survived_sets
            .iter()
            .map(
                |i| match r.seed_sets.get(*i as usize).and_then(|x| x.seed) {
                    Some(seed) => format!("set {i} (--seed {seed})"),
                    None => format!("set {i} (the cases' own seeds)"),
                },
            )
            .collect();
        let _ = writeln!(
            s,
            "required fault `{}` survives on {}: {}",
            f.name,
            seeds.join(", "),
            f.description
        );
    }
    s
}

/// How each thin kill was thin: the seed sets whose kill judged fewer elements wrong than the
/// fault's margin floor.
pub fn thin_kills(r: &AdequacyReport) -> String {
    let mut s = String::new();
    for f in r.faults.iter().filter(|f| r.thin_kills.contains(&f.name)) {
        let sets: Vec<String> = f
            .thin_sets
            .iter()
            .map(
                |i| match r.seed_sets.get(*i as usize).and_then(|x| x.seed) {
                    Some(seed) => format!("set {i} (--seed {seed})"),
                    None => format!("set {i} (the cases' own seeds)"),
                },
            )
            .collect();
        let _ = writeln!(
            s,
            "required fault `{}` was killed by fewer than {} wrong element(s) (smallest margin {}) on {}: one seed away from surviving",
            f.name,
            f.margin_floor,
            f.min_margin.unwrap_or(0),
            sets.join(", ")
        );
    }
    s
}

/// The HTML page's note on a partial matrix.
pub const PARTIAL_NOTE: &str = "This matrix was stopped before every cell was measured: the \
rates are over the seed sets measured, a fault not measured to the end passes no gate, and the \
whole is not a verdict. Rerun with the same --seed for the complete matrix.";

/// The line of an interrupted (partial) matrix: never a verdict.
pub fn interrupted(r: &AdequacyReport, why: &str) -> String {
    let measured: usize = r.matrix.iter().map(|c| c.outcomes.len()).sum();
    let mut faults: Vec<&str> = Vec::new();
    for u in &r.unfinished {
        if !faults.contains(&u.fault.as_str()) {
            faults.push(&u.fault);
        }
    }
    let mut s = format!(
        "adequacy: INTERRUPTED ({why}): partial results, not a verdict: {measured} cell(s) measured, {} not (faults not measured to the end: {})",
        r.unfinished.len(),
        faults.join(", ")
    );
    if !r.required_survivors.is_empty() {
        let _ = write!(
            s,
            "; required fault(s) that already survived a measured seed set: {}",
            r.required_survivors.join(", ")
        );
    }
    s
}

/// Said when the matrix could not be written and its journal stays.
pub fn journal_kept(journal: &std::path::Path) -> String {
    format!(
        "the finished cells stay in {}; `conform report --input {} --out DIR` recovers them",
        journal.display(),
        journal.display()
    )
}

pub fn verdict(r: &AdequacyReport) -> String {
    if let Some(why) = &r.interrupted {
        return interrupted(r, why);
    }
    if !r.errors.is_empty() {
        let mut s = format!(
            "adequacy: {} case(s) could not be measured:",
            r.errors.len()
        );
        for e in &r.errors {
            s.push_str("\n  ");
            s.push_str(e);
        }
        return s;
    }
    if r.passes() {
        "adequacy: every required fault was killed on every seed set".to_string()
    } else if r.required_survivors.is_empty() && !r.thin_kills.is_empty() {
        format!(
            "adequacy: {} required fault(s) killed below their margin floor: {}",
            r.thin_kills.len(),
            r.thin_kills.join(", ")
        )
    } else if r.required_survivors.is_empty() {
        format!(
            "adequacy: {} regime(s), parameter path(s) or knob value(s) are reached by fewer than two quick-tier cases (see the regime map)",
            r.regime_holes()
        )
    } else {
        format!(
            "adequacy: {} required fault(s) survive: {}",
            r.required_survivors.len(),
            r.required_survivors.join(", ")
        )
    }
}

pub fn progress(fault: &str, set: usize, sets: usize) -> String {
    format!("  seed set {set}/{}: {fault}", sets.saturating_sub(1))
}

/// The text of one outcome, for the HTML page's cell titles.
pub fn outcome_text(o: &SetOutcome) -> String {
    match o {
        SetOutcome::Killed {
            case,
            seed,
            by,
            margin,
        } => match margin {
            Some(m) => format!("killed by {case} (seed {seed}): {by}; margin {m} element(s)"),
            None => format!("killed by {case} (seed {seed}): {by}"),
        },
        SetOutcome::Survived { cases } => format!("survived {cases} case(s)"),
        SetOutcome::NotApplicable => "not applicable".to_string(),
        SetOutcome::Error {
            case,
            seed,
            message,
        } => format!("error in {case} (seed {seed}): {message}"),
    }
}
