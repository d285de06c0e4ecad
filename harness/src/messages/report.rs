//! User-facing strings of `conform report`: CLI help, errors, progress lines and the page's
//! headings.

use std::fmt::Display;
use std::path::Path;

pub const ABOUT: &str = "Write a self-contained HTML report (DIR/index.html) from a results file, \
optional perf record files, a baseline comparison and an MC2 timeline";
pub const HELP_INPUT: &str = "Results JSON written by `conform run --json`, or the journal \
`PATH.journal` a killed `run` or `adequacy` left: recovered into DIR/results.json (or \
DIR/adequacy.json, the partial kill matrix) beside the report";
/// Why other inputs are refused beside an adequacy journal.
pub const ADEQUACY_JOURNAL_ALONE: &str = "an adequacy journal is recovered on its own: \
give no --perf, --baseline, --mc2, --adequacy or --history with it";
pub const HELP_HISTORY: &str =
    "A perf history (SQLite, from `conform perf history ingest`): the trend \
     over its newest runs, and every series' change points";
pub const HELP_HISTORY_RUNS: &str = "How many of the history's newest runs the trend shows";
pub const HELP_PERF: &str =
    "Perf record JSON (`conform perf record`); repeat for a trend plot, oldest first";
pub const HELP_BASELINE: &str =
    "Baseline comparison JSON written by `conform perf compare --json` (ratio, CI, verdict per case)";
pub const HELP_MC2: &str = "MC2 timeline JSON from the planner/simulator (tiles on both streams)";
pub const HELP_ADEQUACY: &str =
    "Kill matrix JSON from `conform adequacy --json` (adds the fault adequacy section)";
pub const HELP_OUT: &str = "Output directory; index.html is written there (created if missing)";

/// The heading of the section on recipes that model CANN kernels.
pub const H_ASCEND: &str = "What the Ascend verdicts rest on";

pub fn ascend_explained(ledger: &str) -> String {
    format!(
        "These recipes model CANN kernels. Each knob of a recipe has a row in the fidelity \
         ledger ({ledger}) with its public source, or the word assumed where no public source \
         says it; a verdict against the recipe rests on every knob listed here."
    )
}

/// The heading of a case card's knob table.
pub const KNOBS: &str = "what the verdict rests on";

pub const VARIANT: &str = "the kernel this case runs on a device";

/// A case card's kernel variant.
pub fn variant_line(
    kernel: &str,
    key: &str,
    tiling: &str,
    detail: &str,
    socs: &str,
    releases: &str,
    preset: &str,
) -> String {
    let preset = if preset.is_empty() {
        "no recipe of conform's models it".to_string()
    } else {
        format!("preset {preset}")
    };
    format!(
        "{kernel} (tiling key {key}, {tiling}): {detail}. Read for {socs}; {releases}; {preset}."
    )
}

/// Why a target that declares the recipe was judged without its bits.
pub fn recipe_set_aside(why: &str) -> String {
    format!("Judged by the checks for a target with its own arithmetic, although it declares the recipe: {why}")
}

/// The line above a case card's knob table.
pub fn knobs_intro(recipe: &str, tally: &str, ledger: &str) -> String {
    format!(
        "Recipe {recipe} models a CANN kernel: {tally} ({ledger}). An assumed knob is one no \
         public source says; a verdict against this recipe is only as good as its assumptions."
    )
}

pub fn wrote_report(path: &Path) -> String {
    format!("report written to {}", path.display())
}

pub fn read_failed(path: &Path, err: &dyn Display) -> String {
    format!("cannot read {}: {err}", path.display())
}

pub fn parse_failed(path: &Path, err: &dyn Display) -> String {
    format!("{} is not valid JSON for this input: {err}", path.display())
}

pub fn bad_field(path: &Path, field: &str, reason: &str) -> String {
    format!("{}: field `{field}`: {reason}", path.display())
}

pub fn baseline_is_record(path: &Path) -> String {
    format!(
        "{} holds raw samples, not a comparison: run `conform perf compare --baseline BASE.json \
         --candidate NEW.json --json CMP.json` and pass CMP.json to --baseline",
        path.display()
    )
}

pub fn write_failed(path: &Path, err: &dyn Display) -> String {
    format!("cannot write {}: {err}", path.display())
}

pub fn plot_failed(plot: &str, err: &dyn Display) -> String {
    format!("cannot draw the {plot} plot: {err}")
}

/// The header verdict of an interrupted run (never "all passed": not everything ran).
pub fn verdict_interrupted(signal: &str, finished: usize, unfinished: usize) -> String {
    format!("interrupted by {signal}: {finished} finished, {unfinished} not finished")
}

/// The header verdict of a run that judged no case (none ran, or every one was skipped).
pub fn verdict_nothing_judged(skipped: usize) -> String {
    if skipped == 0 {
        "nothing judged: the results hold no case".to_string()
    } else {
        format!("nothing judged: all {skipped} cases were skipped")
    }
}

/// `conform report` on a results file that judged nothing (exit 4).
pub fn nothing_judged(path: &Path) -> String {
    format!(
        "{}: nothing judged (no case passed or failed); the report says so",
        path.display()
    )
}

/// A results file of a schema version this conform does not read.
pub fn unknown_schema_version(path: &Path, found: u64, supported: u32) -> String {
    format!(
        "{}: schema_version {found} is not one this conform reads (it reads {supported}); \
         a newer conform wrote it, or it is not a results file",
        path.display()
    )
}

/// A journal turned back into a results file by `conform report`.
pub fn recovered_journal(
    journal: &Path,
    results: &Path,
    finished: usize,
    unfinished: usize,
) -> String {
    format!(
        "recovered {} from journal {}: {finished} finished, {unfinished} not finished",
        results.display(),
        journal.display()
    )
}

/// The journal of a killed `conform adequacy` turned back into its partial kill matrix.
pub fn recovered_adequacy_journal(
    journal: &Path,
    matrix: &Path,
    measured: usize,
    unfinished: usize,
) -> String {
    format!(
        "recovered the partial kill matrix {} from adequacy journal {}: {measured} cell(s) measured, {unfinished} not",
        matrix.display(),
        journal.display()
    )
}

// Page headings and fixed texts.
pub const PAGE_TITLE: &str = "conform report";
pub const H_SUMMARY: &str = "Summary";
pub const H_FAILURES: &str = "Failures";
pub const H_BORDERLINE: &str = "Borderline cases";
pub const H_SKIPPED: &str = "Skipped";
pub const H_UNFINISHED: &str = "Not finished";
pub const H_PERF: &str = "Performance";
pub const H_BASELINE: &str = "Comparison with the baseline";
pub const H_TREND: &str = "Trend";
pub const H_CHANGES: &str = "Change points (perf history)";
pub const H_NOISE: &str = "Night-to-night noise (perf history)";
pub const NOISE_LEGEND: &str = "Each run's location (fenced mean of its samples) with the band \
learned from earlier runs of unchanged code that the run was judged against (shaded); orange \
rings: runs whose own interval moved but that the gate judged environment drift (inside the \
band, too few nights to learn it, or the same commit as the reference); red bars: runs flagged \
beyond the band too.";
pub const H_MC2: &str = "MC2 timeline";
pub const NO_FAILURES: &str = "No failures: every selected case passed or was skipped.";
pub const BORDERLINE_EXPLAINED: &str = "Cases that passed while their check tolerated mismatching \
elements (matched ratio below 1): closest to failing.";
pub const REPLAY: &str = "Replay";
pub const NO_PERF: &str = "No performance figures in these inputs (run with `conform run --perf`).";
pub const VERDICT_ALL_PASSED: &str = "all passed";
pub const FOOTER: &str = "Generated by conform report. Self-contained: no scripts, no network.";

/// A target that declared itself nondeterministic in its target.toml.
pub fn declared_nondeterministic(why: &str) -> String {
    format!(
        "declared nondeterministic ({why}): judged by the cases' checks only; a repeat of an \
         input set is not required to give the same bits"
    )
}
