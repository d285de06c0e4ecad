//! The test of record of the same-night control (issue 47): `ci/nightly-perf.sh` run for real
//! on the reference target over the fa_prefill quick tier (28 cases), every night on one
//! commit of a scratch git project, the conform under test serving both builds.
//!
//! - `quiet`: two nights, ten times: both exit 0 every time (an unchanged commit is never
//!   flagged: before the rounds, night 2 exited 1 in 7 of 9 tries on a quiet runner).
//! - `uneven_load`: three times, three nights: night 1 as it comes; night 2 with two busy loops
//!   and a second conform job running (they share the cores unevenly with the two builds'
//!   worker processes): exit 0; night 3 under the same load with tonight's reference 30%
//!   slower (`CONFORM_REFERENCE_SLOWDOWN=0.30`, which the kept build ignores): exit 1, the
//!   control's REGRESSION rows naming the cases.
//!
//! Each night's control line (`28 cases: ...`) is printed, so a run of this binary with
//! `--nocapture` is the record of the figures in docs/PERFORMANCE.md. The load is bounded
//! twice: each generator runs under `timeout`, and the guard that started it kills its whole
//! process group when the night ends, whatever way (a failed assertion too).

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Longest a load generator may run if nothing else stops it (its guard kills it first).
const LOAD_LIMIT_S: &str = "900";

struct Trial {
    repo: PathBuf,
    dir: tempfile::TempDir,
    root: PathBuf,
}

impl Trial {
    fn new() -> Trial {
        let (repo, dir, root) = crate::scratch_project();
        std::fs::create_dir_all(root.join("targets")).unwrap();
        let t = Trial { repo, dir, root };
        crate::git_in(&t.root, &["init", "-q"]);
        crate::git_in(
            &t.root,
            &[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "one commit for every night",
            ],
        );
        t
    }

    /// Night `n` with the reference slowed by `slowdown` (empty: not); the exit code, the
    /// output and the control's summary line with the night's wall time (docs/PERFORMANCE.md).
    fn night(&self, n: u32, slowdown: &str) -> (Option<i32>, String, String) {
        let history = self.dir.path().join("history");
        let started = std::time::Instant::now();
        let o = Command::new("bash")
            .arg(self.repo.join("ci/nightly-perf.sh"))
            .args(["--target", "reference", "--hardware", "this-cpu"])
            .args(["--tier", "quick", "--suite", "fa_prefill"])
            // The fingerprint step is tested in nightly_perf_script.rs; these time the control.
            .arg("--no-fingerprint")
            .arg("--history")
            .arg(&history)
            .arg("--out")
            .arg(self.dir.path().join(format!("night{n}")))
            .env("CONFORM", env!("CARGO_BIN_EXE_conform"))
            .env("CONFORM_ROOT", &self.root)
            .env("CONFORM_REFERENCE_SLOWDOWN", slowdown)
            .env_remove("CI")
            .output()
            .unwrap();
        let seconds = started.elapsed().as_secs_f64();
        crate::night_stamps::wait_past_newest_stamp(&history);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let summary = text
            .lines()
            .find(|l| l.starts_with("28 cases:"))
            .unwrap_or("(no control table)")
            .to_string();
        let summary = format!("{summary}; night {seconds:.1} s");
        (o.status.code(), text, summary)
    }
}

/// Two busy loops and a second conform job, for as long as it lives.
struct Load {
    children: Vec<Child>,
}

impl Load {
    fn start(root: &std::path::Path) -> Load {
        let spawn = |script: &str| {
            Command::new("timeout")
                .args([LOAD_LIMIT_S, "sh", "-c", script, "load"])
                .arg(env!("CARGO_BIN_EXE_conform"))
                .env("CONFORM_ROOT", root)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .expect("a load generator")
        };
        Load {
            children: vec![
                spawn("while :; do :; done"),
                spawn("while :; do :; done"),
                spawn("while :; do \"$1\" run --no-golden --tier quick >/dev/null 2>&1; done"),
            ],
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for c in &mut self.children {
            // The whole group: the shell, and the conform it is running.
            // SAFETY: kill(2) on a process group this guard created; no memory is involved.
            unsafe {
                libc::kill(-(c.id() as i32), libc::SIGKILL);
            }
            let _ = c.wait();
        }
    }
}

pub fn quiet_runner_two_nights_on_one_commit_ten_times() {
    let mut outcomes = Vec::new();
    for t in 1..=10 {
        let trial = Trial::new();
        let (code1, text1, summary1) = trial.night(1, "");
        eprintln!("quiet try {t}: night 1 exit {code1:?}; {summary1}");
        assert_eq!(code1, Some(0), "try {t}, night 1: {text1}");
        let (code2, text2, summary) = trial.night(2, "");
        eprintln!("quiet try {t}: night 2 exit {code2:?}; control {summary}");
        outcomes.push((code2, text2));
    }
    for (t, (code, text)) in outcomes.iter().enumerate() {
        assert_eq!(
            *code,
            Some(0),
            "try {}, night 2 on the same commit: {text}",
            t + 1
        );
        assert!(
            !text.contains("REGRESSION against"),
            "try {}: {text}",
            t + 1
        );
    }
}

pub fn uneven_load_on_night_two_passes_and_a_thirty_percent_slowdown_on_night_three_fails() {
    for t in 1..=3 {
        let trial = Trial::new();
        let (code, text, summary) = trial.night(1, "");
        eprintln!("uneven load try {t}: night 1 exit {code:?}; {summary}");
        assert_eq!(code, Some(0), "try {t}, night 1: {text}");
        let (code, text, summary) = {
            let _load = Load::start(&trial.root);
            trial.night(2, "")
        };
        eprintln!("uneven load try {t}: night 2 exit {code:?}; control {summary}");
        assert_eq!(code, Some(0), "try {t}, night 2 under uneven load: {text}");
        let (code, text, summary) = {
            let _load = Load::start(&trial.root);
            trial.night(3, "0.30")
        };
        eprintln!("uneven load try {t}: night 3, 30% slower, exit {code:?}; control {summary}");
        assert_eq!(
            code,
            Some(1),
            "try {t}, night 3, 30% slower under load: {text}"
        );
        assert!(
            text.contains("REGRESSION against the last good build"),
            "try {t}: {text}"
        );
        let named: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("fa_prefill/") && l.trim_end().ends_with("REGRESSION"))
            .collect();
        assert!(
            !named.is_empty(),
            "try {t}: no control row names a case as a REGRESSION: {text}"
        );
        eprintln!("  {} case(s) named", named.len());
    }
}
