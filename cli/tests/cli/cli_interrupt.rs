//! SIGINT / SIGTERM during `conform run` (and `perf record`), with a worker that hangs (and has
//! a child process of its own): the run stops at once, kills the worker's whole process group,
//! removes its scratch directories, writes the results of the trials that finished (marked
//! interrupted, the rest listed as unfinished), removes its journal and exits 130 / 143. After
//! a SIGKILL, no worker survives, the journal holds the finished trials (and `conform report`
//! recovers it), and the next run removes the scratch.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Answers the handshake, then on any request starts a child (`sleep`), writes both pids
/// and hangs.
const HANGING: &str = r#"
import json, os, subprocess, sys, time
print(json.dumps({"type": "hello", "protocol": 1, "worker": {"name": "hanging", "version": "1"},
                  "libraries": {}, "device": "CPU (test)",
                  "capabilities": {"ops": {"paged_kv": {"recipes": ["reference"]}}}}), flush=True)
for line in sys.stdin:
    if json.loads(line)["type"] == "shutdown":
        break
    child = subprocess.Popen(["sleep", "3600"])
    with open(os.environ["PIDS_FILE"] + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    os.rename(os.environ["PIDS_FILE"] + ".tmp", os.environ["PIDS_FILE"])
    time.sleep(3600)
"#;

fn alive(pid: i32) -> bool {
    // A zombie still answers kill(0); read its state instead.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

struct Project {
    _dir: tempfile::TempDir,
    root: PathBuf,
    scratch: PathBuf,
    pids: PathBuf,
}

fn project() -> Project {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("p");
    for d in ["suites", "golden", "scratch"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy(
        repo.join("suites/paged_kv.toml"),
        root.join("suites/paged_kv.toml"),
    )
    .unwrap();
    let t = root.join("targets/hanging");
    std::fs::create_dir_all(&t).unwrap();
    std::fs::write(t.join("worker.py"), HANGING).unwrap();
    let pids = dir.path().join("pids");
    std::fs::write(
        t.join("target.toml"),
        format!(
            "description = \"hangs on every request\"\ncommand = \"python3\"\n\
             args = [\"${{TARGET_DIR}}/worker.py\"]\n\n[env]\nPIDS_FILE = \"{}\"\n\n\
             [timeouts]\nhandshake_s = 20\nrequest_s = 600\n",
            pids.display()
        ),
    )
    .unwrap();
    // `perf record` reads the hardware profile it evaluates budgets against.
    std::fs::create_dir_all(root.join("ci/hardware")).unwrap();
    for e in std::fs::read_dir(repo.join("ci/hardware")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), root.join("ci/hardware").join(e.file_name())).unwrap();
    }
    let scratch = root.join("scratch");
    Project {
        _dir: dir,
        root,
        scratch,
        pids,
    }
}

/// Starts `conform --root ROOT ARGS` with its scratch under the project, and waits until the
/// hanging worker is inside its first request.
fn start_until_hanging(p: &Project, args: &[&std::ffi::OsStr]) -> std::process::Child {
    let child = Command::new(env!("CARGO_BIN_EXE_conform"))
        .arg("--root")
        .arg(&p.root)
        .args(args)
        .env("CONFORM_SCRATCH", &p.scratch)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !p.pids.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the worker never started its request"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// `run` on the reference and the hanging worker, results to `json`.
fn run_args(json: &Path) -> Vec<&std::ffi::OsStr> {
    [
        "run",
        "--target",
        "reference",
        "--target",
        "hanging",
        "--suite",
        "paged_kv",
        "--no-golden",
        "--json",
    ]
    .iter()
    .map(std::ffi::OsStr::new)
    .chain([json.as_os_str()])
    .collect()
}

fn interrupt_with(signal: i32, expected_code: i32, signal_name: &str) {
    let p = project();
    // A scratch directory a dead run left behind: cleaned at start-up.
    let stale = p.scratch.join("conform-case-2147483646-stale");
    std::fs::create_dir_all(&stale).unwrap();
    let json = p.root.join("r.json");
    let junit = p.root.join("r.xml");
    let report = p.root.join("report");
    let args: Vec<&std::ffi::OsStr> = run_args(&json)
        .into_iter()
        .chain(["--junit".as_ref(), junit.as_os_str()])
        .chain(["--report".as_ref(), report.as_os_str()])
        .collect();
    let child = start_until_hanging(&p, &args);
    let pids: Vec<i32> = std::fs::read_to_string(&p.pids)
        .unwrap()
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    assert!(pids.iter().all(|&pid| alive(pid)));
    // While it hangs, the journal already holds the reference's finished trial.
    let journal = PathBuf::from(format!("{}.journal", json.display()));
    let journaled = std::fs::read_to_string(&journal).unwrap();
    // The header (the run and its planned trials), then the finished trial.
    assert_eq!(journaled.lines().count(), 2, "{journaled}");
    // SAFETY: signalling the child process this test started.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let sent = Instant::now();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        sent.elapsed() < Duration::from_secs(20),
        "took {:?} to stop",
        sent.elapsed()
    );
    assert_eq!(out.status.code(), Some(expected_code), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    assert!(text.contains("interrupted by"), "{text}");
    // No process left: the worker and its child are gone.
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&pid| alive(pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for pid in &pids {
        assert!(!alive(*pid), "process {pid} survived the interrupt");
    }
    // No scratch left, the stale one included.
    let left: Vec<_> = std::fs::read_dir(&p.scratch)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "scratch left behind: {left:?}");
    // Partial results, readable, marked interrupted; the journal removed.
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["interrupted"], signal_name);
    let cases = r["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 1, "{r}");
    assert_eq!(cases[0]["target"], "reference");
    assert_eq!(cases[0]["status"], "passed");
    let unfinished = r["unfinished"].as_array().unwrap();
    assert!(!unfinished.is_empty());
    assert_eq!(unfinished[0]["target"], "hanging");
    assert!(!journal.exists());
    // JUnit: the finished trial passed, the unfinished ones are errors of type `interrupted`
    // (a cancelled CI job never reads as green).
    let xml = std::fs::read_to_string(&junit).unwrap();
    let hanging_id = unfinished[0]["id"].as_str().unwrap();
    assert!(xml.contains(cases[0]["id"].as_str().unwrap()), "{xml}");
    assert!(xml.contains(hanging_id), "{xml}");
    assert!(xml.contains("type=\"interrupted\""), "{xml}");
    assert!(
        xml.contains(&format!("interrupted by {signal_name}")),
        "{xml}"
    );
    // The report's verdict says interrupted, not "all passed", and lists what did not finish.
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(
        html.contains(&format!(
            "interrupted by {signal_name}: 1 finished, {} not finished",
            unfinished.len()
        )),
        "{html}"
    );
    assert!(html.contains("id=\"unfinished\""), "{html}");
    assert!(html.contains(hanging_id), "{html}");
}

#[test]
fn sigint_with_a_hanging_worker_leaves_no_process_no_scratch_and_readable_results() {
    interrupt_with(libc::SIGINT, 130, "SIGINT");
}

#[test]
fn sigterm_as_ci_runners_send_it_exits_143() {
    interrupt_with(libc::SIGTERM, 143, "SIGTERM");
}

/// `perf record` interrupted before any case was timed exits 130 like `run`, not 4 ("nothing
/// recorded"): the exit code says the file is short because of the interrupt.
#[test]
fn an_interrupted_perf_record_exits_130_not_nothing_judged() {
    let p = project();
    let out = p.root.join("perf.json");
    let args: Vec<&std::ffi::OsStr> = ["perf", "record", "--target", "hanging", "--suite"]
        .iter()
        .map(std::ffi::OsStr::new)
        .chain(["paged_kv".as_ref(), "--out".as_ref(), out.as_os_str()])
        .collect();
    let child = start_until_hanging(&p, &args);
    // SAFETY: signalling the child process this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let o = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(130), "{text}");
    assert!(text.contains("interrupted by SIGINT"), "{text}");
    assert!(
        !text.contains("nothing judged") && !text.contains("panicked"),
        "{text}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["cases"].as_array().map(Vec::len), Some(0), "{v}");
    let left: Vec<_> = std::fs::read_dir(&p.scratch).unwrap().flatten().collect();
    assert!(left.is_empty(), "scratch left behind: {left:?}");
}

/// SIGKILL cannot be caught: what it leaves must still be usable. The journal holds the
/// finished trial as a complete JSON line, and the scratch directory of the request in flight
/// (named after the dead process) is removed by the next run's start-up.
#[test]
fn after_sigkill_the_journal_is_readable_and_the_next_run_removes_the_dead_runs_scratch() {
    let p = project();
    let json = p.root.join("r.json");
    let args = run_args(&json);
    let mut child = start_until_hanging(&p, &args);
    let dead = child.id();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The worker and its child die with conform: the guardian kills their group when the
    // dead conform's pipe closes.
    let pids: Vec<i32> = std::fs::read_to_string(&p.pids)
        .unwrap()
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|&pid| alive(pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for pid in &pids {
        assert!(!alive(*pid), "process {pid} outlived the SIGKILLed conform");
    }

    assert!(
        !json.exists(),
        "SIGKILL leaves no time to write the results file"
    );
    let journal = PathBuf::from(format!("{}.journal", json.display()));
    let text = std::fs::read_to_string(&journal).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["journal"], 1, "the header first: {text}");
    assert_eq!(lines[1]["target"], "reference");
    assert_eq!(lines[1]["status"], "passed");
    // `conform report` recovers it into a results file and a report.
    let rec = p.root.join("recovered");
    let o = Command::new(env!("CARGO_BIN_EXE_conform"))
        .args(["report", "--input"])
        .arg(&journal)
        .arg("--out")
        .arg(&rec)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(rec.join("results.json")).unwrap()).unwrap();
    assert_eq!(r["cases"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["cases"][0]["status"], "passed");
    assert_eq!(r["unfinished"][0]["target"], "hanging", "{r}");
    assert!(rec.join("index.html").exists());

    let prefix = format!("conform-case-{dead}-");
    let of_dead_run = || {
        std::fs::read_dir(&p.scratch)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .count()
    };
    assert_eq!(of_dead_run(), 1, "the request in flight had its scratch");
    let o = Command::new(env!("CARGO_BIN_EXE_conform"))
        .arg("--root")
        .arg(&p.root)
        .args([
            "run",
            "--suite",
            "paged_kv",
            "--no-golden",
            "--filter",
            "single-token",
        ])
        .env("CONFORM_SCRATCH", &p.scratch)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(of_dead_run(), 0, "the dead run's scratch survived start-up");
}
