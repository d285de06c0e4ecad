//! The nightly gate's same-night control, run for real (not `--dry-run`) on the in-process
//! reference target, which needs nothing installed: `ci/nightly-perf.sh` over three nights on
//! one commit of a scratch git project.
//!
//! - night 1: no earlier build is kept: "first night for the same-night control", exit 0, and
//!   the build is kept (a copy of the conform binary and the worker directory serving it);
//! - night 2: the reference twice as slow (`CONFORM_REFERENCE_SLOWDOWN` = 1.00, which adds time
//!   after each timed run and changes no output; at 0.50 the control once judged the case
//!   UNCHANGED, ratio 1.21 [1.016, 1.503], while the binary's other tests loaded both cores):
//!   tonight's build is timed against the kept one in the same window and the night exits 1
//!   with REGRESSION naming the case; the history gate, which sees the same commit as its
//!   reference, calls its own move environment drift;
//! - night 3: back to normal, exit 0 (the failed night's build never became the control).
//!
//! It runs in the nightly script's test binary, one trial at a time, never beside the CLI
//! binary's other tests: there, with both cores loaded by them, the control once judged night
//! 3's unchanged build a REGRESSION (ratio 1.13 [1.078, 1.192], 140 us against 160 us), the
//! two builds' worker processes sharing the two loaded cores unevenly for the whole window.
//! The gate's behaviour under load is the calibration's subject
//! (harness/tests/harness/perf_nightly_simulation.rs), not this test's.

use std::path::PathBuf;
use std::process::Command;

/// About 110 us on the development machine: long enough that load on a shared machine
/// spreads its samples by a few percent, not by whole scheduler slices.
const CASE: &str = "w4a16_matmul/nvfp4/m2-n8-k7168/deepseek-v3-expert";

use crate::cli;

struct Project {
    repo: PathBuf,
    dir: tempfile::TempDir,
    root: PathBuf,
}

impl Project {
    fn new() -> Project {
        let (repo, dir, root) = crate::scratch_project();
        std::fs::create_dir_all(root.join("targets")).unwrap();
        let p = Project { repo, dir, root };
        p.git(&["init", "-q"]);
        p.git(&[
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "one commit for every night",
        ]);
        p
    }

    fn git(&self, args: &[&str]) {
        crate::git_in(&self.root, args);
    }

    /// Night `n` with the reference slowed by `slowdown`; the exit code and the output.
    fn night(&self, n: u32, slowdown: &str) -> (Option<i32>, String) {
        let o = Command::new("bash")
            .arg(self.repo.join("ci/nightly-perf.sh"))
            .args(["--target", "reference", "--hardware", "this-cpu"])
            // The fingerprint step is tested in nightly_perf_script.rs; these time the control.
            .arg("--no-fingerprint")
            .args(["--tier", "quick", "--suite", "w4a16_matmul", "--filter"])
            .arg(cli::exact_filter(CASE))
            .arg("--history")
            .arg(self.dir.path().join("history"))
            .arg("--out")
            .arg(self.dir.path().join(format!("night{n}")))
            .env("CONFORM", env!("CARGO_BIN_EXE_conform"))
            .env("CONFORM_ROOT", &self.root)
            .env("CONFORM_REFERENCE_SLOWDOWN", slowdown)
            .env_remove("CI")
            .output()
            .unwrap();
        crate::night_stamps::wait_past_newest_stamp(&self.dir.path().join("history"));
        (
            o.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        )
    }
}

pub fn the_same_night_control_flags_a_slower_build_and_keeps_the_last_good_one() {
    let p = Project::new();
    let kept = p
        .dir
        .path()
        .join("history/control/last-good/reference-last-good");

    let (code, text) = p.night(1, "");
    assert_eq!(code, Some(0), "night 1: {text}");
    assert!(
        text.contains("first night for the same-night control"),
        "{text}"
    );
    assert!(kept.join("conform").is_file() && kept.join("target.toml").is_file());

    let (code, text) = p.night(2, "1.00");
    assert_eq!(code, Some(1), "night 2, twice as slow: {text}");
    assert!(
        text.contains("same-night control: tonight's build against the last good build"),
        "{text}"
    );
    assert!(
        text.contains("REGRESSION against the last good build"),
        "{text}"
    );
    // The A/B table names the case with its verdict.
    assert!(
        text.lines()
            .any(|l| l.contains(CASE) && l.contains("REGRESSION")),
        "no REGRESSION line names {CASE}: {text}"
    );
    // The history saw the same commit: drift, never "a regression between X and X".
    assert!(text.contains("environment drift"), "{text}");
    assert!(!text.contains("REGRESSION against the history"), "{text}");

    let (code, text) = p.night(3, "");
    assert_eq!(code, Some(0), "night 3, back to normal: {text}");
}
