//! Snapshots (insta) of the files conform writes: the results JSON of `conform run --json`
//! (docs/results.md) and the HTML page of `conform report` (docs/report.md). A change to their
//! structure or content shows up as a snapshot diff to review (`cargo insta review`, or
//! `INSTA_UPDATE=always` then `git diff`); the snapshots are in tests/snapshots/.
//!
//! What differs between runs and machines is redacted: the start time, durations, the thread
//! count in the reference's description, versions and temporary paths. Everything else is
//! bit-identical on every machine by design (the reference is deterministic, whatever its
//! thread count or SIMD level), so the numbers are compared as they are.

#[path = "support/cli.rs"]
mod cli;
use cli::{conform, repo, text};

use conform_metadata::exit_code;
use insta::internals::{Content, ContentPath};
use std::path::{Path, PathBuf};

/// Snapshot settings whose filters replace what differs between runs and machines.
fn filtered(tmp: &Path) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    for (regex, replacement) in [
        (regex::escape(tmp.to_str().unwrap()), "[TMP]".to_string()),
        (
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ".to_string(),
            "[TIMESTAMP]".to_string(),
        ),
        (r"\d+ thread\(s\)".to_string(), "[N] thread(s)".to_string()),
        (
            r"(conform(?:-reference)?) \d+\.\d+\.\d+".to_string(),
            "$1 [VERSION]".to_string(),
        ),
        (
            r"total trial time [0-9.e+-]+ s".to_string(),
            "total trial time [DURATION] s".to_string(),
        ),
    ] {
        settings.add_filter(&regex, replacement);
    }
    settings
}

/// The target description with its thread count redacted (the machine's core count).
fn redact_threads(value: Content, _path: ContentPath<'_>) -> String {
    let s = value.as_str().expect("a description is a string");
    regex::Regex::new(r"\d+ thread\(s\)")
        .unwrap()
        .replace(s, "[N] thread(s)")
        .into_owned()
}

/// Runs the w4a16_matmul suite (quick tier) on the reference and writes its results JSON into
/// `dir`; returns the file.
fn run_w4a16_matmul(dir: &Path) -> PathBuf {
    let json = dir.join("results.json");
    let o = conform(
        &repo(),
        &[
            "run",
            "--suite",
            "w4a16_matmul",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(exit_code::SUCCESS), "{}", text(&o));
    json
}

/// `conform report --input RESULTS [EXTRA...] --out DIR/report`; returns the page.
fn report(dir: &Path, results: &Path, extra: &[PathBuf]) -> String {
    let out = dir.join("report");
    let mut args = vec!["report".to_string(), "--input".to_string()];
    args.push(results.to_str().unwrap().to_string());
    for p in extra {
        let flag = match p.file_name().unwrap().to_str().unwrap() {
            f if f.starts_with("perf-") => "--perf",
            f if f.starts_with("compare") => "--baseline",
            _ => "--mc2",
        };
        args.push(flag.to_string());
        args.push(p.to_str().unwrap().to_string());
    }
    args.push("--out".to_string());
    args.push(out.to_str().unwrap().to_string());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = conform(&repo(), &refs);
    assert_eq!(o.status.code(), Some(exit_code::SUCCESS), "{}", text(&o));
    std::fs::read_to_string(out.join("index.html")).unwrap()
}

#[test]
fn results_json_of_a_run_on_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let json = run_w4a16_matmul(dir.path());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    insta::assert_json_snapshot!("results_w4a16_matmul", v, {
        ".started_at" => "[TIMESTAMP]",
        ".conform_version" => "[VERSION]",
        ".cases[].duration_ms" => "[DURATION]",
        ".targets[].versions[\"conform-reference\"]" => "[VERSION]",
        ".targets[].description" => insta::dynamic_redaction(redact_threads),
    });
}

#[test]
fn html_report_of_a_run_on_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let json = run_w4a16_matmul(dir.path());
    let html = report(dir.path(), &json, &[]);
    filtered(dir.path()).bind(|| insta::assert_snapshot!("report_w4a16_matmul", html));
}

/// The page with every section filled: failures, perf records, a baseline comparison and an
/// MC2 timeline, from the fixtures report_cli.rs uses.
#[test]
fn html_report_of_failing_results_with_perf_baseline_and_mc2() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = |name: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/report")
            .join(name)
    };
    let extra: Vec<PathBuf> = [
        "perf-0.json",
        "perf-1.json",
        "perf-2.json",
        "compare.json",
        "mc2-timeline.json",
    ]
    .into_iter()
    .map(fixture)
    .collect();
    let html = report(dir.path(), &fixture("results-failing.json"), &extra);
    filtered(dir.path()).bind(|| insta::assert_snapshot!("report_failing_full", html));
}
