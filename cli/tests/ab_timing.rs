//! `conform validate --against` and `conform run --perf --against`: a contributed kernel timed
//! against the one it replaces, interleaved on the same inputs. Two copies of a worker whose
//! speed the test sets: 30% slower is a REGRESSION (exit 1, in the results' `ab` section and
//! the report); the same speed passes; `--against` without `--perf` is a usage error.
//!
//! The workers need the Python venv (`ci/setup-targets.sh`): without it the trial is ignored
//! with the reason, unless CONFORM_REQUIRE_TARGETS names a CPU worker (CI), where it runs and
//! fails.

use std::process::Command;

use conform_test_support::cli::repo_canonical as repo;
use conform_test_support::{copy_dir, slowable_worker, trials, venv};

const FILTER: &str = "mxfp4/bf16/n4-k7168/low_first";

fn contributed_kernel_against_the_one_it_replaces() {
    let repo = repo();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    for sub in ["suites", "golden", "ci/hardware"] {
        copy_dir::copy_dir(&repo.join(sub), &root.join(sub));
    }
    let (old_speed, new_speed) = (dir.path().join("old-speed"), dir.path().join("new-speed"));
    slowable_worker::write_worker(&repo, &root.join("targets/old"), "old", &old_speed);
    slowable_worker::write_worker(&repo, &dir.path().join("new"), "new", &new_speed);
    std::fs::write(&old_speed, "1.0").unwrap();
    let conform = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_conform"))
            .args(args)
            .current_dir(dir.path())
            .env("CONFORM_ROOT", &root)
            .env_remove("CI")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        (o.status.code(), text)
    };
    let validate = |out: &str| {
        conform(&[
            "validate",
            "--worker",
            "new/target.toml",
            "--against",
            "old",
            "--suite",
            "fp4_dequant",
            "--filter",
            FILTER,
            "--tier",
            "quick",
            "--out",
            out,
        ])
    };

    // 30% slower than the kernel it replaces: exit 1, REGRESSION with its ratio.
    std::fs::write(&new_speed, "1.3").unwrap();
    let (code, text) = validate("slow");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("A/B against `old`"), "{text}");
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("slow/results.json")).unwrap(),
    )
    .unwrap();
    let ab = &results["ab"];
    assert_eq!(ab["against"], "old", "{ab}");
    let case = &ab["comparison"]["cases"][0];
    assert_eq!(case["verdict"], "REGRESSION", "{ab}");
    assert_eq!(case["target"], "new");
    let ratio = case["ratio"].as_f64().unwrap();
    assert!((1.15..1.5).contains(&ratio), "ratio {ratio}: {ab}");
    assert!(
        case["reason"]
            .as_str()
            .unwrap()
            .contains("each round in fresh processes of both"),
        "{ab}"
    );
    // The correctness verdict itself passed: only the timing failed the run.
    assert!(results["cases"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["status"] == "passed"));
    let report = std::fs::read_to_string(dir.path().join("slow/index.html")).unwrap();
    assert!(
        report.contains("REGRESSION"),
        "the report lacks the A/B verdict"
    );

    // The same speed: not slower, exit 0.
    std::fs::write(&new_speed, "1.0").unwrap();
    let (code, text) = validate("same");
    assert_eq!(code, Some(0), "{text}");
    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("same/results.json")).unwrap(),
    )
    .unwrap();
    let verdict = &results["ab"]["comparison"]["cases"][0]["verdict"];
    assert!(verdict == "UNCHANGED" || verdict == "IMPROVEMENT", "{text}");

    // `run --against` needs `--perf`.
    let (code, text) = conform(&[
        "run",
        "--target",
        "old",
        "--against",
        "old",
        "--filter",
        FILTER,
    ]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("needs --perf"), "{text}");
}

fn main() {
    let missing = venv::missing(&repo());
    trials::run(vec![trials::Test {
        name: "contributed_kernel_against_the_one_it_replaces",
        body: contributed_kernel_against_the_one_it_replaces,
        missing,
    }])
}
