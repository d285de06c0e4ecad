//! `conform report` end to end without a browser: the page is written, self-contained, every
//! user string escaped, failures first, and bad inputs name the file and field.

use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/report")
        .join(name)
}

use crate::cli;
// The commands under test read only the files they are given: no project, no --root.
use cli::conform_files as conform;

fn full_report(out: &Path) -> String {
    let mut args: Vec<std::ffi::OsString> = vec!["report".into(), "--input".into()];
    args.push(fixture("results-failing.json").into());
    for p in ["perf-0.json", "perf-1.json", "perf-2.json"] {
        args.push("--perf".into());
        args.push(fixture(p).into());
    }
    args.push("--baseline".into());
    args.push(fixture("compare.json").into());
    args.push("--mc2".into());
    args.push(fixture("mc2-timeline.json").into());
    args.push("--out".into());
    args.push(out.into());
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let o = conform(&refs);
    assert!(
        o.status.success(),
        "conform report failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("index.html"), "{stdout}");
    std::fs::read_to_string(out.join("index.html")).expect("index.html written")
}

fn section<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<section id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no section {id}"));
    let end = html[start..].find("</section>").expect("section closed") + start;
    &html[start..end]
}

#[test]
fn report_is_self_contained_and_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let html = full_report(&dir.path().join("rep"));
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("Content-Security-Policy"));
    // No script, no remote resource of any kind (the SVG namespace URI is not a fetch).
    assert!(!html.contains("<script"));
    let without_ns = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(!without_ns.contains("http://") && !without_ns.contains("https://"));
    assert!(!html.contains("<link") && !html.contains("@import"));
    // The worker's message with markup and quotes is escaped, never interpreted.
    assert!(html.contains("out of range &lt;num_blocks=512&gt; &amp; &quot;quoted&quot;"));
    assert!(!html.contains("<num_blocks=512>"));
}

#[test]
fn failures_come_first_with_replay_commands() {
    let dir = tempfile::tempdir().unwrap();
    let html = full_report(&dir.path().join("rep"));
    let fail = section(&html, "failures");
    let fa = "fa_prefill/bf16/b2-s1024-hq16-hkv8-d128/causal_br";
    assert!(fail.contains(fa));
    assert!(fail.contains("Failures (3)"));
    assert!(fail.contains(
        "conform run --tier all --filter &#39;^fa_prefill/bf16/b2-s1024-hq16-hkv8-d128/causal_br$&#39; --seed 1234567 --target numpy"
    ));
    // Passed and skipped cases are not in the failure section.
    assert!(!fail.contains("fp4_dequant/e2m1/g32-n4096"));
    assert!(!fail.contains("paged_kv/bf16"));
    // Histogram, heatmap and worst elements of the failing output.
    assert!(fail.contains("o: ULP distance"));
    assert!(fail.contains("o: max |error| per cell"));
    assert!(fail.contains("b=1 n=9 s=3 d=0"));
    // Order: summary, failures, borderline, performance, MC2, skipped.
    let pos = |id: &str| html.find(&format!("<section id=\"{id}\">")).unwrap();
    assert!(pos("summary") < pos("failures"));
    assert!(pos("failures") < pos("borderline"));
    assert!(pos("borderline") < pos("perf"));
    assert!(pos("perf") < pos("mc2"));
    assert!(pos("mc2") < pos("skipped"));
    assert!(section(&html, "borderline").contains("w4a16_matmul/bf16/m1-k7168-n2048-g128"));
    assert!(section(&html, "skipped").contains("torch_npu not importable"));
}

#[test]
fn summary_counts_per_suite_and_target() {
    let dir = tempfile::tempdir().unwrap();
    let html = full_report(&dir.path().join("rep"));
    let summary = section(&html, "summary");
    // fa_prefill on numpy: 1 total, 0 passed, 1 failed.
    assert!(summary.contains(
        "<tr class=\"failing\"><td class=\"text\">fa_prefill</td><td class=\"text\">numpy</td><td>1</td>\
         <td class=\"zero\">0</td><td class=\"failcount\">1</td>"
    ));
    // Totals: 8 cases, 4 passed, 1 failed, 1 skipped, 1 error, 1 timeout, 0 crashed.
    assert!(
        summary.contains("<th>8</th><th>4</th><th>1</th><th>1</th><th>1</th><th>1</th><th>0</th>")
    );
    assert!(html.contains("3 of 8 failing"));
}

#[test]
fn perf_and_mc2_sections_show_budget_baseline_trend_and_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let html = full_report(&dir.path().join("rep"));
    let perf = section(&html, "perf");
    // fa_prefill reference: median 2495.5 over a 2393 us budget -> over.
    assert!(perf.contains("2496"));
    assert!(perf.contains("2393"));
    assert!(perf.contains("badge over"));
    assert!(perf.contains("measured median / budget"));
    assert!(perf.contains("[1.061, 1.117]"));
    assert!(perf.contains(">REGRESSION<"));
    // perf compare's own keys: medians of both sides, the directed p-value, the reason, and a
    // case only the baseline has; regressions listed first.
    assert!(perf.contains("2611"));
    assert!(perf.contains("lower bound 1.0610 &gt; 1.0300"));
    assert!(perf.contains(">ONLY_IN_BASELINE<"));
    assert!(perf.find(">REGRESSION<").unwrap() < perf.find(">IMPROVEMENT<").unwrap());
    // The roofline fraction from `roofline.fraction_of_peak`, the budget from `budget`.
    assert!(perf.contains("17.70%"));
    assert!(perf.contains("15.00%"));
    assert!(perf.contains("median time relative to the first run"));
    assert!(perf.contains("2026-11-21"));
    let mc2 = section(&html, "mc2");
    assert!(mc2.contains("serial 1874 us"));
    assert!(mc2.contains("predicted fused 1253 us"));
    assert!(mc2.contains("planned tiles on two streams"));
    assert!(html.matches("<svg").count() >= 6);
}

#[test]
fn report_without_optional_inputs_still_complete() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rep");
    let o = conform(&[
        "report".as_ref(),
        "--input".as_ref(),
        fixture("results-failing.json").as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("<section id=\"failures\">"));
    assert!(!html.contains("<section id=\"mc2\">"));
    assert!(!html.contains("Comparison with the baseline"));
}

#[test]
fn bad_inputs_name_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("perf-bad.json");
    std::fs::write(
        &bad,
        r#"{"cases": [{"id": "a", "samples_us": [1.0, "x"]}]}"#,
    )
    .unwrap();
    let o = conform(&[
        "report".as_ref(),
        "--input".as_ref(),
        fixture("results-failing.json").as_os_str(),
        "--perf".as_ref(),
        bad.as_os_str(),
        "--out".as_ref(),
        dir.path().join("rep").as_os_str(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("perf-bad.json") && err.contains("cases[0].samples_us"),
        "{err}"
    );

    // A record file given as --baseline: refused with how to make a comparison.
    let o = conform(&[
        "report".as_ref(),
        "--input".as_ref(),
        fixture("results-failing.json").as_os_str(),
        "--baseline".as_ref(),
        fixture("perf-0.json").as_os_str(),
        "--out".as_ref(),
        dir.path().join("rep").as_os_str(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("conform perf compare"), "{err}");

    let missing = dir.path().join("missing.json");
    let o = conform(&[
        "report".as_ref(),
        "--input".as_ref(),
        missing.as_os_str(),
        "--out".as_ref(),
        dir.path().join("rep").as_os_str(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.json"));
}
