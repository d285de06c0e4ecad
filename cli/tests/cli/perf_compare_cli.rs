//! End-to-end: `conform perf compare` on the hand-made fixtures in tests/fixtures/perf.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/perf")
        .join(name)
}

fn compare(baseline: &str, candidate: &str, extra: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_conform"))
        .args(["perf", "compare", "--baseline"])
        .arg(fixture(baseline))
        .arg("--candidate")
        .arg(fixture(candidate))
        .args(extra)
        .output()
        .expect("run conform");
    // No CLI run in the tests may panic, whatever its exit code.
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked at"), "{err}");
    o
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_clear_ten_percent_slowdown_is_a_regression_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let o = compare(
        "baseline.json",
        "slowdown_10pct.json",
        &["--json", json.to_str().unwrap()],
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("REGRESSION"), "{out}");
    assert!(out.contains("fa_prefill/seq1024"), "{out}");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let case = &written["cases"][0];
    assert_eq!(case["verdict"], "REGRESSION");
    let low = case["ci_low"].as_f64().unwrap();
    let high = case["ci_high"].as_f64().unwrap();
    assert!(
        low > 1.03 && low < 1.10 && high > 1.10 && high < 1.17,
        "{low} {high}"
    );
    assert!(case["p_slower"].as_f64().unwrap() < 1e-6);
}

#[test]
fn identical_distributions_are_unchanged_with_exit_0() {
    for candidate in ["same_distribution.json", "baseline.json"] {
        let o = compare("baseline.json", candidate, &[]);
        let out = stdout(&o);
        assert_eq!(o.status.code(), Some(0), "{candidate}: {out}");
        assert!(out.contains("UNCHANGED"), "{candidate}: {out}");
        assert!(
            !out.contains("REGRESSION\n") && !out.contains("IMPROVEMENT\n"),
            "{out}"
        );
    }
}

#[test]
fn two_3x_spikes_do_not_trigger_a_regression_even_at_threshold_zero() {
    let o = compare(
        "baseline.json",
        "same_with_spikes.json",
        &["--threshold", "0"],
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("UNCHANGED"), "{out}");
}

#[test]
fn three_samples_are_inconclusive_never_a_silent_pass() {
    let o = compare("baseline.json", "three_samples.json", &[]);
    let out = stdout(&o);
    // A case the gate could not judge is not a pass: exit 3 (it was 0).
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert!(out.contains("INCONCLUSIVE"), "{out}");
    assert!(out.contains("too few samples"), "{out}");
}

/// Runs `perf compare` on two perf files written from JSON text into a scratch directory.
fn compare_texts(baseline: &str, candidate: &str) -> Output {
    let d = tempfile::tempdir().unwrap();
    let (b, c) = (d.path().join("base.json"), d.path().join("cand.json"));
    std::fs::write(&b, baseline).unwrap();
    std::fs::write(&c, candidate).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_conform"))
        .args(["perf", "compare", "--baseline"])
        .arg(&b)
        .arg("--candidate")
        .arg(&c)
        .output()
        .expect("run conform");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked at"));
    o
}

fn record(samples: &str, params_digest: Option<&str>) -> String {
    let digest = params_digest.map_or(String::new(), |d| format!(r#", "params_digest": "{d}""#));
    format!(r#"{{"cases": [{{"id": "s/c", "target": "t", "samples_us": [{samples}]{digest}}}]}}"#)
}

/// A sample of 1e308 us beside 100 us used to give an infinite interval judged UNCHANGED
/// (exit 0): it is refused when read, naming the file, the case and the index.
#[test]
fn absurd_and_non_finite_samples_are_refused_by_name() {
    let base = record("100, 101, 99, 100, 102, 98", None);
    for bad in [
        "100, 101, 99, 100, 1e308, 98",
        "100, 101, 99, 100, 2e12, 98",
    ] {
        let o = compare_texts(&base, &record(bad, None));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert!(
            err.contains("cand.json") && err.contains("samples_us") && err.contains("[4]"),
            "{err}"
        );
    }
}

/// Records of one case id whose op parameters differ are another case: not compared, and the
/// comparison is INCONCLUSIVE (exit 3), as the history gate never compares them (it used to
/// compare them and exit 0 or 1).
#[test]
fn records_of_other_op_parameters_are_not_compared() {
    let samples = "100, 101, 99, 100, 102, 98, 100, 101";
    let slower = "150, 151, 149, 150, 152, 148, 150, 151";
    let o = compare_texts(
        &record(samples, Some("aaaa1111")),
        &record(slower, Some("bbbb2222")),
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert!(
        out.contains("INCONCLUSIVE") && out.contains("op parameters differ"),
        "{out}"
    );
    // No row is a REGRESSION (the legend names the word; the rows end with their verdict).
    assert!(
        !out.lines().any(|l| l.trim_end().ends_with("REGRESSION")),
        "{out}"
    );
    // The same digest, or one side without it: compared as before.
    let o = compare_texts(
        &record(samples, Some("aaaa1111")),
        &record(slower, Some("aaaa1111")),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
}

/// A `params_digest` is whatever the file says: one that is not ASCII is shortened by
/// characters in the reason (cutting it at a byte offset panicked, exit 101).
#[test]
fn digests_that_are_not_ascii_are_quoted_not_a_panic() {
    let samples = "100, 101, 99, 100, 102, 98, 100, 101";
    let o = compare_texts(
        &record(samples, Some("a\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}")),
        &record(samples, Some("b\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}")),
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert!(out.contains("op parameters differ"), "{out}");
}

#[test]
fn bad_input_exits_2_naming_file_and_field() {
    let o = compare("baseline.json", "bad_field.json", &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("bad_field.json"), "{err}");
    assert!(err.contains("samples"), "{err}");
    let o = compare("baseline.json", "missing.json", &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("missing.json"), "{err}");
    let o = compare("baseline.json", "baseline.json", &["--threshold=-1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("threshold"), "{err}");
}

#[test]
fn a_nan_or_infinite_sample_is_an_error_naming_the_file_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("baseline.json")).unwrap();
    for token in ["NaN", "Infinity", "-Infinity"] {
        let bad = dir.path().join(format!("{token}.json"));
        std::fs::write(&bad, text.replacen("2701.52", token, 1)).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_conform"))
            .args(["perf", "compare", "--baseline"])
            .arg(fixture("baseline.json"))
            .arg("--candidate")
            .arg(&bad)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("{token}.json")), "{err}");
        assert!(err.contains("must be finite"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn cases_on_one_side_only_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(
        &other,
        r#"{"cases": [{"id": "new_case", "target": "reference", "samples_us": [1, 2, 3, 4, 5]}]}"#,
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_conform"))
        .args(["perf", "compare", "--baseline"])
        .arg(fixture("baseline.json"))
        .arg("--candidate")
        .arg(&other)
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(
        out.contains("ONLY_IN_BASELINE") && out.contains("ONLY_IN_CANDIDATE"),
        "{out}"
    );
}
