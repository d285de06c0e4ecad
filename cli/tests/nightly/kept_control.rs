//! The same-night control keeps what its worker needs, or says why it cannot (issue 46, item
//! 5): `ci/nightly-perf.sh` run for real with a worker target whose files live in the
//! repository outside its own directory.
//!
//! - A worker that names its script through `${REPO}` (`${REPO}/targets/common/slowable.py`, its
//!   speed file beside it): the kept build carries those files, so when tonight's copy of them
//!   turns 30% slower the control compares tonight's against the kept one and exits 1 (the kept
//!   copy used to read tonight's files, so both sides were equally slow and the night passed).
//! - A worker that names its script through `${TARGET_DIR}/..`: refused when the build is kept,
//!   naming the path (exit 2), before the control runs.
//! - A kept build that no longer starts: the control times nothing, the night is INCONCLUSIVE
//!   (exit 3; it used to exit 0 with a warning), tonight's build replaces the kept one, and the
//!   next night's control works again.
//!
//! Needs the Python venv, like the seven nights of the main file.

use std::path::PathBuf;
use std::process::Command;

use crate::slowable_worker::SLOWABLE;

const FILTER: &str = "mxfp4/bf16/n4-k7168/low_first";

struct Project {
    repo: PathBuf,
    dir: tempfile::TempDir,
    root: PathBuf,
}

impl Project {
    /// A scratch project with the Python helpers of targets/python, one commit.
    fn new() -> Project {
        let (repo, dir, root) = crate::scratch_project();
        crate::copy_dir(&repo.join("targets/python"), &root.join("targets/python"));
        let p = Project { repo, dir, root };
        crate::git_in(&p.root, &["init", "-q"]);
        p
    }

    /// The worker `targets/<name>/target.toml` declared by `toml` (its `command` is the venv's
    /// Python).
    fn worker(&self, name: &str, toml: &str) {
        let dir = self.root.join("targets").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("target.toml"),
            format!(
                "command = \"{}\"\n{toml}",
                self.repo.join(".venv/bin/python").display()
            ),
        )
        .unwrap();
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn kept(&self, name: &str) -> PathBuf {
        self.dir
            .path()
            .join(format!("history/control/last-good/{name}-last-good"))
    }

    /// Night `n` (a commit, then the script) on `target`: exit code and output.
    fn night(&self, n: u32, target: &str) -> (Option<i32>, String) {
        crate::git_in(&self.root, &["add", "-A"]);
        crate::git_in(
            &self.root,
            &["commit", "-q", "--allow-empty", "-m", &format!("night {n}")],
        );
        let history = self.dir.path().join("history");
        let o = Command::new("bash")
            .arg(self.repo.join("ci/nightly-perf.sh"))
            .args([
                "--target",
                target,
                "--hardware",
                "this-cpu",
                "--tier",
                "quick",
            ])
            .args(["--suite", "fp4_dequant", "--filter", FILTER])
            .arg("--history")
            .arg(&history)
            .arg("--out")
            .arg(self.dir.path().join(format!("night{n}")))
            .env("CONFORM", env!("CARGO_BIN_EXE_conform"))
            .env("CONFORM_ROOT", &self.root)
            .env_remove("CI")
            .output()
            .unwrap();
        crate::night_stamps::wait_past_newest_stamp(&history);
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

pub fn the_kept_build_carries_the_repository_files_its_worker_names() {
    let p = Project::new();
    p.write("targets/common/slowable.py", SLOWABLE);
    p.write("targets/common/speed", "1.0");
    p.worker(
        "shared",
        r#"args = ["${REPO}/targets/common/slowable.py"]
[env]
PYTHONPATH = "${REPO}/targets/python"
SPEED_FILE = "${REPO}/targets/common/speed"
WORKER_NAME = "shared"
"#,
    );
    let (code, text) = p.night(1, "shared");
    assert_eq!(code, Some(0), "night 1: {text}");
    let kept = p.kept("shared");
    assert!(
        kept.join("_repo/targets/common/slowable.py").is_file()
            && kept
                .join("_repo/targets/python/conform_worker.py")
                .is_file(),
        "the kept build does not carry the repository files: {text}"
    );
    // Tonight's shared files make the kernel 30% slower; the kept build keeps its own.
    p.write("targets/common/speed", "1.3");
    let (code, text) = p.night(2, "shared");
    assert_eq!(
        code,
        Some(1),
        "night 2, 30% slower through a shared file: {text}"
    );
    assert!(
        text.contains("REGRESSION against the last good build"),
        "{text}"
    );
}

pub fn a_worker_naming_files_outside_its_directory_is_refused_when_kept() {
    let p = Project::new();
    p.write("targets/common/slowable.py", SLOWABLE);
    p.write("targets/outside/speed", "1.0");
    p.worker(
        "outside",
        &format!(
            "args = [\"${{TARGET_DIR}}/../common/slowable.py\"]\n[env]\nPYTHONPATH = \"{}\"\nSPEED_FILE = \"${{TARGET_DIR}}/speed\"\n",
            p.repo.join("targets/python").display()
        ),
    );
    let (code, text) = p.night(1, "outside");
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("cannot keep the control")
            && text.contains("${TARGET_DIR}/../common/slowable.py")
            && text.contains("--no-control"),
        "{text}"
    );
    assert!(!p.kept("outside").exists(), "{text}");
}

pub fn a_kept_build_that_does_not_start_leaves_the_night_inconclusive_and_is_replaced() {
    let p = Project::new();
    p.write("targets/own/worker.py", SLOWABLE);
    p.write("targets/own/speed", "1.0");
    p.worker(
        "own",
        &format!(
            "args = [\"${{TARGET_DIR}}/worker.py\"]\n[env]\nPYTHONPATH = \"{}\"\nSPEED_FILE = \"${{TARGET_DIR}}/speed\"\n",
            p.repo.join("targets/python").display()
        ),
    );
    let (code, text) = p.night(1, "own");
    assert_eq!(code, Some(0), "night 1: {text}");
    // Something broke the kept copy (a disk cleaned, a file lost).
    std::fs::write(p.kept("own").join("worker.py"), "raise SystemExit(3)\n").unwrap();
    let (code, text) = p.night(2, "own");
    assert_eq!(
        code,
        Some(3),
        "night 2, the kept build does not start: {text}"
    );
    assert!(
        text.contains("INCONCLUSIVE") && text.contains("could not time"),
        "{text}"
    );
    assert!(text.contains("tonight's replaces it"), "{text}");
    let (code, text) = p.night(3, "own");
    assert_eq!(
        code,
        Some(0),
        "night 3, against tonight's build of night 2: {text}"
    );
    assert!(!text.contains("not timed A/B"), "{text}");
}
