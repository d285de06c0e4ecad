//! `ci/nightly-perf.sh` run for real (not `--dry-run`) over seven simulated nights, with a
//! worker whose speed the test controls: night 1 on an empty history records and exits 0 ("first
//! night"); nights 2-5 are steady (exit 0); night 6 is 20% slower (exit 1, REGRESSION from the
//! same-night control, the change named by the commits on either side, the reports written);
//! night 7 is back to normal (exit 0), and `conform perf history show` on the store names
//! night 6 (flagged, or drift where this machine's night-to-night noise hides 20% from the
//! history alone) and no other night. The speed is a file in the worker's directory, so the
//! kept copy of the last good build keeps the speed it was kept with, as a real build would.
//! The project is a git repository with one commit per night, so the runs carry commits as on
//! a real runner.
//!
//! The same binary runs the same-night control on the reference target
//! (`nightly/same_night_control.rs`) and the control's test of record
//! (`nightly/control_trials.rs`: two nights on one commit ten times; three nights under uneven
//! load, the third 30% slower, three times), what the kept build of a worker carries
//! (`nightly/kept_control.rs`) and which conform a night times (`nightly/build_step.rs`); the
//! trials run one at a time, so none loads
//! another's cores while it times.
//!
//! The worker is the example MXFP4 worker plus a sleep, so it needs the Python venv
//! (`ci/setup-targets.sh`): without it the trial is ignored with the reason, unless
//! CONFORM_REQUIRE_TARGETS names a CPU worker (CI), where it runs and fails.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../targets/tests/support/trials.rs"]
mod trials;
#[path = "support/venv.rs"]
mod venv;

#[path = "support/cli.rs"]
mod cli;
use cli::repo_canonical as repo;

#[path = "support/slowable_worker.rs"]
mod slowable_worker;

#[path = "support/copy_dir.rs"]
mod copy_dir;
use copy_dir::copy_dir;

#[path = "support/night_stamps.rs"]
mod night_stamps;

#[path = "nightly/same_night_control.rs"]
mod same_night_control;

#[path = "nightly/control_trials.rs"]
mod control_trials;

#[path = "nightly/kept_control.rs"]
mod kept_control;

#[path = "nightly/build_step.rs"]
mod build_step;

/// The simulated project: a git repository with the suites, the golden store, the hardware
/// profiles and the slowable worker, whose speed factor the file `speed` sets.
struct Project {
    repo: PathBuf,
    /// Holds the project, the speed file, the history and each night's output.
    dir: tempfile::TempDir,
    root: PathBuf,
    speed: PathBuf,
    history: PathBuf,
}

impl Project {
    fn new() -> Project {
        let (repo, dir, root) = scratch_project();
        let speed = root.join("targets/slowable/speed");
        // Read from the worker's own directory: the kept copy has the speed it was kept with.
        slowable_worker::write_worker(
            &repo,
            &root.join("targets/slowable"),
            "slowable",
            Path::new("${TARGET_DIR}/speed"),
        );
        let history = dir.path().join("history");
        let project = Project {
            repo,
            dir,
            root,
            speed,
            history,
        };
        project.git(&["init", "-q"]);
        project
    }

    /// Runs git in the project; returns its trimmed stdout.
    fn git(&self, args: &[&str]) -> String {
        git_in(&self.root, args)
    }

    /// Night `n`: one commit, then the nightly script with the worker `factor` times slower.
    /// Returns the script's exit code, its output and the night's output folder.
    fn night(&self, n: u32, factor: f64) -> (Option<i32>, String, PathBuf) {
        self.git(&["commit", "-q", "--allow-empty", "-m", &format!("night {n}")]);
        std::fs::write(&self.speed, factor.to_string()).unwrap();
        let out = self.dir.path().join(format!("night{n}"));
        let o = Command::new("bash")
            .arg(self.repo.join("ci/nightly-perf.sh"))
            .args([
                "--target",
                "slowable",
                "--hardware",
                "this-cpu",
                "--tier",
                "quick",
            ])
            .args([
                "--suite",
                "fp4_dequant",
                "--filter",
                "mxfp4/bf16/n4-k7168/low_first",
            ])
            .arg("--history")
            .arg(&self.history)
            .arg("--out")
            .arg(&out)
            .env("CONFORM", env!("CARGO_BIN_EXE_conform"))
            .env("CONFORM_ROOT", &self.root)
            .env_remove("CI")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        night_stamps::wait_past_newest_stamp(&self.history);
        (o.status.code(), text, out)
    }

    /// Runs `conform perf history <command> --db <store> <args>`; returns its stdout.
    fn history(&self, command: &str, args: &[&str]) -> String {
        let o = Command::new(env!("CARGO_BIN_EXE_conform"))
            .args(["perf", "history", command, "--db"])
            .arg(self.history.join("perf-history.sqlite"))
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

/// A scratch project in a new temporary directory (`<dir>/project`): the repository's suites,
/// golden store and hardware profiles. Returns the repository, the directory and the project.
fn scratch_project() -> (PathBuf, tempfile::TempDir, PathBuf) {
    let repo = repo();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    for sub in ["suites", "golden", "ci/hardware"] {
        copy_dir(&repo.join(sub), &root.join(sub));
    }
    (repo, dir, root)
}

/// Runs git in the scratch project `root` as the nightly committer; returns its trimmed stdout.
fn git_in(root: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .env("GIT_AUTHOR_NAME", "nightly")
        .env("GIT_AUTHOR_EMAIL", "nightly@example.invalid")
        .env("GIT_COMMITTER_NAME", "nightly")
        .env("GIT_COMMITTER_EMAIL", "nightly@example.invalid")
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {o:?}");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn seven_nights_steady_slow_recovered() {
    let p = Project::new();
    first_and_steady_nights(&p);
    let night5 = p.git(&["rev-parse", "HEAD"]);
    let (code, text, out) = p.night(6, 1.2);
    let night6 = p.git(&["rev-parse", "HEAD"]);
    slow_night_is_a_regression(code, &text, &out, &night5, &night6);
    let (code, text, _) = p.night(7, 1.0);
    assert_eq!(code, Some(0), "night 7, back to normal: {text}");
    history_keeps_every_night_and_flags_night_6(&p, &night5, &night6);
}

/// Night 1 records on an empty history ("first night", report written); nights 2-5 are steady.
fn first_and_steady_nights(p: &Project) {
    let (code, text, out) = p.night(1, 1.0);
    assert_eq!(code, Some(0), "night 1: {text}");
    assert!(text.contains("first night"), "night 1: {text}");
    assert!(out.join("report/index.html").exists(), "night 1: {text}");
    // The fingerprint is kept from the first night on, and compared from the second.
    assert!(
        text.contains("nightly-perf: fingerprint: first fingerprint kept"),
        "night 1: {text}"
    );
    for n in 2..=5 {
        let (code, text, _) = p.night(n, 1.0);
        assert_eq!(code, Some(0), "night {n}, steady: {text}");
        assert!(!text.contains("first night"), "night {n}: {text}");
        assert!(
            text.contains("nightly-perf: fingerprint: unchanged since"),
            "night {n}: {text}"
        );
    }
}

/// Night 6, 20% slower: exit 1, REGRESSION named by its commit range, in the comparison and
/// the report, whose trend is drawn from the history store.
fn slow_night_is_a_regression(
    code: Option<i32>,
    text: &str,
    out: &Path,
    night5: &str,
    night6: &str,
) {
    assert_eq!(code, Some(1), "night 6, 20% slower: {text}");
    assert!(text.contains("REGRESSION"), "night 6: {text}");
    // The change is named by its commit range: the newest reference night's and tonight's.
    assert!(
        text.contains(&format!("between commit {}", &night5[..10]))
            && text.contains(&format!("and commit {}", &night6[..10])),
        "night 6 does not name commits {night5} .. {night6}: {text}"
    );
    let control = std::fs::read_to_string(out.join("control.json")).unwrap();
    assert!(control.contains("\"REGRESSION\""), "{control}");
    let report = std::fs::read_to_string(out.join("control-report/index.html")).unwrap();
    assert!(
        report.contains("REGRESSION"),
        "night 6 control report lacks the regression"
    );
    let report = std::fs::read_to_string(out.join("report/index.html")).unwrap();
    assert!(
        report.contains("id=\"noise\""),
        "night 6 report lacks the noise plot"
    );
    // The trend is drawn from the history store: six nights, labelled by their commits.
    assert!(
        report.contains("id=\"trend\""),
        "night 6 report lacks the trend"
    );
    assert!(
        report.contains(&night6[..8]) && report.contains(&night5[..8]),
        "the trend's nights are not the history's commits"
    );
}

/// Every night is kept, as JSON and in the store; `history show` flags night 6 alone, with
/// its commit range.
fn history_keeps_every_night_and_flags_night_6(p: &Project, night5: &str, night6: &str) {
    let kept = std::fs::read_dir(&p.history)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("perf-") && name.ends_with(".json")
        })
        .count();
    assert_eq!(kept, 7);
    let fingerprints = std::fs::read_dir(&p.history)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("fingerprint-") && name.ends_with(".json")
        })
        .count();
    assert_eq!(fingerprints, 7, "every night keeps its fingerprint");
    let list = p.history("list", &[]);
    // `history show` on the test's store names night 6's slowdown with its commit range.
    let show = p.history(
        "show",
        &[
            "fp4_dequant/mxfp4/bf16/n4-k7168/low_first",
            "--target",
            "slowable",
        ],
    );
    // Night 6 is flagged with its commit range, or (when this machine's night-to-night noise,
    // learned from five nights, is wide enough to hold 20%) listed as drift on its commit; no
    // other night is flagged, and nothing names a change between a commit and itself.
    let regressions: Vec<&str> = show
        .lines()
        .filter(|l| l.trim_start().starts_with("REGRESSION"))
        .collect();
    let drift: Vec<&str> = show
        .lines()
        .filter(|l| l.trim_start().starts_with("DRIFT +"))
        .collect();
    assert!(regressions.len() <= 1, "{show}");
    match regressions.first() {
        Some(r) => assert!(
            r.contains(&format!("between commit {}", &night5[..10]))
                && r.contains(&format!("and commit {}", &night6[..10])),
            "night 6 is not the flagged change: {show}"
        ),
        None => assert!(
            drift
                .iter()
                .any(|l| l.contains(&format!("on commit {}", &night6[..10]))),
            "night 6 is neither flagged nor drift: {show}"
        ),
    }
    assert!(
        list.lines()
            .any(|l| l.contains("slowable") && l.split_whitespace().nth(3) == Some("7")),
        "the store does not hold 7 runs of the case: {list}"
    );
}

fn main() {
    let missing = venv::missing(&repo());
    // One at a time: both trials time a kernel, and neither may load the other's cores.
    trials::run_one_at_a_time(vec![
        trials::Test {
            name: "seven_nights_steady_slow_recovered",
            body: seven_nights_steady_slow_recovered,
            missing: missing.clone(),
        },
        trials::Test {
            name: "same_night_control::the_same_night_control_flags_a_slower_build_and_keeps_the_last_good_one",
            body: same_night_control::the_same_night_control_flags_a_slower_build_and_keeps_the_last_good_one,
            missing: None,
        },
        trials::Test {
            name: "build_step::the_night_times_the_binary_cargo_built_under_cargo_target_dir",
            body: build_step::the_night_times_the_binary_cargo_built_under_cargo_target_dir,
            missing: None,
        },
        trials::Test {
            name: "build_step::without_cargo_and_without_conform_the_night_refuses_to_start",
            body: build_step::without_cargo_and_without_conform_the_night_refuses_to_start,
            missing: build_step::cargo_in_system_path(),
        },
        trials::Test {
            name: "kept_control::the_kept_build_carries_the_repository_files_its_worker_names",
            body: kept_control::the_kept_build_carries_the_repository_files_its_worker_names,
            missing: missing.clone(),
        },
        trials::Test {
            name: "kept_control::a_worker_naming_files_outside_its_directory_is_refused_when_kept",
            body: kept_control::a_worker_naming_files_outside_its_directory_is_refused_when_kept,
            missing: missing.clone(),
        },
        trials::Test {
            name: "kept_control::a_kept_build_that_does_not_start_leaves_the_night_inconclusive_and_is_replaced",
            body: kept_control::a_kept_build_that_does_not_start_leaves_the_night_inconclusive_and_is_replaced,
            missing: missing.clone(),
        },
        trials::Test {
            name: "control_trials::quiet_runner_two_nights_on_one_commit_ten_times",
            body: control_trials::quiet_runner_two_nights_on_one_commit_ten_times,
            missing: None,
        },
        trials::Test {
            name: "control_trials::uneven_load_on_night_two_passes_and_a_thirty_percent_slowdown_on_night_three_fails",
            body: control_trials::uneven_load_on_night_two_passes_and_a_thirty_percent_slowdown_on_night_three_fails,
            missing: None,
        },
    ])
}
