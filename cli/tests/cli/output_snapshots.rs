//! Snapshots (snapbox, as the CLI's) of the files conform writes: the results JSON of `conform
//! run --json` (docs/results.md) and the HTML page of `conform report` (docs/report.md). A
//! change to their structure or content shows up as a snapshot diff to review
//! (`SNAPSHOTS=overwrite` rewrites tests/snapshots/, then `git diff`).
//!
//! What differs between runs and machines is redacted: the start time, durations, the thread
//! count in the reference's description, versions and temporary paths. Everything else is
//! bit-identical on every machine by design (the reference is deterministic, whatever its
//! thread count or SIMD level), so the numbers are compared as they are.

use crate::cli;
use cli::{conform, repo, text};

use conform_metadata::exit_code;
use snapbox::{assert_data_eq, file};
use std::path::{Path, PathBuf};

/// `text` with what differs between runs and machines replaced, and one final newline.
fn filtered(tmp: &Path, text: &str) -> String {
    let mut text = text.to_string();
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
        text = regex::Regex::new(&regex)
            .unwrap()
            .replace_all(&text, replacement.as_str())
            .into_owned();
    }
    format!("{}\n", text.trim_end())
}

/// `v` with what differs between runs and machines redacted: the start time, the version,
/// durations and the thread count in target descriptions (the machine's core count).
fn redacted(mut v: serde_json::Value) -> serde_json::Value {
    let text = |s: &str| serde_json::Value::String(s.to_string());
    v["started_at"] = text("[TIMESTAMP]");
    v["conform_version"] = text("[VERSION]");
    if v.get("root").is_some() {
        // The project the run read (the checkout's path: differs per machine).
        v["root"] = text("[ROOT]");
    }
    for c in v["cases"].as_array_mut().expect("cases") {
        c["duration_ms"] = text("[DURATION]");
    }
    let threads = regex::Regex::new(r"\d+ thread\(s\)").unwrap();
    for t in v["targets"].as_array_mut().expect("targets") {
        t["versions"]["conform-reference"] = text("[VERSION]");
        let d = t["description"]
            .as_str()
            .expect("a description is a string");
        t["description"] = text(&threads.replace(d, "[N] thread(s)"));
    }
    v
}

/// `v` as pretty JSON (two-space indent) with every float written in full decimal notation,
/// a whole number with `.0` (`0.0000006947412292124255`, never `6.947412292124255e-7`): the
/// notation of the stored snapshot.
fn pretty(v: &serde_json::Value, depth: usize, out: &mut String) {
    use serde_json::Value;
    let indent = |n: usize| "  ".repeat(n);
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap();
            let s = f.to_string();
            out.push_str(&s);
            if !s.contains('.') {
                out.push_str(".0");
            }
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                out.push_str(&indent(depth + 1));
                pretty(item, depth + 1, out);
            }
            out.push('\n');
            out.push_str(&indent(depth));
            out.push(']');
        }
        Value::Object(fields) if !fields.is_empty() => {
            out.push('{');
            for (i, (key, value)) in fields.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                out.push_str(&indent(depth + 1));
                out.push_str(&serde_json::to_string(key).unwrap());
                out.push_str(": ");
                pretty(value, depth + 1, out);
            }
            out.push('\n');
            out.push_str(&indent(depth));
            out.push('}');
        }
        other => out.push_str(&serde_json::to_string(other).unwrap()),
    }
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
    let mut text = String::new();
    pretty(&redacted(v), 0, &mut text);
    text.push('\n');
    assert_data_eq!(
        text,
        file!["../snapshots/results_w4a16_matmul.json": Text].raw()
    );
}

#[test]
fn html_report_of_a_run_on_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let json = run_w4a16_matmul(dir.path());
    let html = report(dir.path(), &json, &[]);
    assert_data_eq!(
        filtered(dir.path(), &html),
        file!["../snapshots/report_w4a16_matmul.html": Text].raw()
    );
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
    assert_data_eq!(
        filtered(dir.path(), &html),
        file!["../snapshots/report_failing_full.html": Text].raw()
    );
}
