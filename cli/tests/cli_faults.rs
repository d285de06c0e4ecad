//! Fault injection over the long commands (issue 26): `run`, `validate`, `adequacy`, `golden
//! verify`, `perf record` and the nightly script `ci/nightly-perf.sh`, each under a closed pipe
//! on stdout and stderr (`2>&1 | head -1`), a closed stderr (`2>&-`), a full stderr (a scratch
//! `/dev/full` node), SIGINT, SIGTERM and SIGKILL mid-run (adequacy: once a cell is journaled;
//! the others: inside a hanging worker's request). None may exit 101 (a panic), lose a result
//! it had computed (SIGINT / SIGTERM: written, marked interrupted, exit 130 / 143; after
//! SIGKILL: recoverable from the journal with `conform report --input PATH.journal`, the
//! adequacy journal into a partial kill matrix; the nightly script's conform ends with the
//! script and writes its results) or leave a process behind. Also the output paths that are not
//! regular files (device nodes, a FIFO, symbolic links), which are written through and never
//! replaced.
//!
//! Every invocation is small (one suite, a few cases) so the matrix stays quick on two cores.
//! Device nodes are made with mknod under a temporary directory, never the system's: the tests
//! that need them are ignored with the reason when not run as root (CI runs as root).

use conform_test_support::trials;

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cli::{repo, text};
use conform_test_support::cli;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Answers the handshake with `paged_kv`, then on any request starts a child (`sleep`),
/// writes both pids and hangs: a run stopped while it hangs is stopped mid-run.
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

/// Implements no op: every case is skipped (validate then judges nothing, exit 4). With
/// `DOOMED` set it first removes that directory (an output directory deleted mid-run).
const NO_OPS: &str = r#"
import json, os, shutil, sys
if os.environ.get("DOOMED"):
    shutil.rmtree(os.environ["DOOMED"], ignore_errors=True)
print(json.dumps({"type": "hello", "protocol": 1, "worker": {"name": "noops", "version": "1"},
                  "libraries": {}, "device": "CPU (test)", "capabilities": {"ops": {}}}),
      flush=True)
for line in sys.stdin:
    if json.loads(line)["type"] == "shutdown":
        break
"#;

/// Declares `paged_kv` and crashes on every request: every case fails, with a replay line.
const CRASHING: &str = r#"
import json, sys
print(json.dumps({"type": "hello", "protocol": 1, "worker": {"name": "crashing", "version": "1"},
                  "libraries": {}, "device": "CPU (test)",
                  "capabilities": {"ops": {"paged_kv": {"recipes": ["reference"]}}}}), flush=True)
for line in sys.stdin:
    if json.loads(line)["type"] == "shutdown":
        break
    sys.stderr.write("crashing on purpose\n")
    sys.exit(3)
"#;

/// Declares `paged_kv`; answers its first request with an error (a result computed: the case
/// is `error`), then behaves as [`HANGING`]: a night stopped while it hangs has a result to keep.
const ERRING_THEN_HANGING: &str = r#"
import json, os, subprocess, sys, time
print(json.dumps({"type": "hello", "protocol": 1, "worker": {"name": "erring", "version": "1"},
                  "libraries": {}, "device": "CPU (test)",
                  "capabilities": {"ops": {"paged_kv": {"recipes": ["reference"]}}}}), flush=True)
answered = False
for line in sys.stdin:
    req = json.loads(line)
    if req["type"] == "shutdown":
        break
    if not answered:
        answered = True
        print(json.dumps({"type": "result", "id": req["id"], "status": "error",
                          "message": "fails on purpose"}), flush=True)
        continue
    child = subprocess.Popen(["sleep", "3600"])
    with open(os.environ["PIDS_FILE"] + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    os.rename(os.environ["PIDS_FILE"] + ".tmp", os.environ["PIDS_FILE"])
    time.sleep(3600)
"#;

/// Declares `paged_kv`; on every request starts a helper process that outlives the request
/// (its output not on the worker's pipes, as a daemon's), writes its pid, and answers
/// `unsupported`; exits 0 at shutdown (its normal end) leaving the helpers behind. With
/// `CRASH_AFTER_CHILD` set it crashes instead of answering (exit 3), the helper left running.
const LEAVES_A_CHILD: &str = r#"
import json, os, subprocess, sys
print(json.dumps({"type": "hello", "protocol": 1, "worker": {"name": "leaver", "version": "1"},
                  "libraries": {}, "device": "CPU (test)",
                  "capabilities": {"ops": {"paged_kv": {"recipes": ["reference"]}}}}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    if req["type"] == "shutdown":
        break
    child = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.environ["PIDS_FILE"], "a") as f:
        f.write(f"{child.pid}\n")
    if os.environ.get("CRASH_AFTER_CHILD"):
        sys.exit(3)
    print(json.dumps({"type": "result", "id": req["id"], "status": "unsupported",
                      "message": "leaves a child on purpose"}), flush=True)
"#;

/// A scratch directory with workers declared outside any `targets/` (the layout
/// ci/contribution.md recommends), a scratch root for requests and a unique tag every process
/// of one invocation carries in its environment (to find any left behind).
struct Scratch {
    dir: tempfile::TempDir,
    tag: String,
}

impl Scratch {
    fn new() -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("scratch")).unwrap();
        for (name, script) in [
            ("hanging", HANGING),
            ("noops", NO_OPS),
            ("crashing", CRASHING),
            ("erring", ERRING_THEN_HANGING),
            ("leaver", LEAVES_A_CHILD),
        ] {
            let w = dir.path().join("contrib").join(name);
            std::fs::create_dir_all(&w).unwrap();
            std::fs::write(w.join("worker.py"), script).unwrap();
            std::fs::write(
                w.join("target.toml"),
                "description = \"test worker\"\ncommand = \"python3\"\n\
                 args = [\"${TARGET_DIR}/worker.py\"]\n\n[timeouts]\nhandshake_s = 30\n\
                 request_s = 600\n",
            )
            .unwrap();
        }
        let tag = format!(
            "{}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst),
            dir.path().file_name().unwrap().to_string_lossy()
        );
        Scratch { dir, tag }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn worker(&self, name: &str) -> PathBuf {
        self.path("contrib").join(name).join("target.toml")
    }

    fn pids_file(&self) -> PathBuf {
        self.path("pids")
    }

    /// `conform --root REPO ARGS` with this scratch's environment.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = self.bare();
        c.arg("--root").arg(repo()).args(args);
        c
    }

    /// `conform` with this scratch's environment and no arguments yet.
    fn bare(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_conform"));
        c.current_dir(self.dir.path())
            .env_remove("CI")
            .env_remove("CONFORM_REQUIRE_TARGETS")
            .env("CONFORM_SCRATCH", self.path("scratch"))
            .env("PIDS_FILE", self.pids_file())
            .env("CONFORM_FAULT_TAG", &self.tag)
            .stdin(Stdio::null());
        c
    }

    /// `bash ci/nightly-perf.sh ARGS` with this scratch's environment, on a project (CONFORM_ROOT)
    /// holding the repository's suites, golden store and hardware profiles and, as its
    /// `targets/erring`, the erring-then-hanging worker.
    fn nightly(&self, args: &[String]) -> Command {
        let project = self.path("project");
        if !project.exists() {
            std::fs::create_dir_all(project.join("targets")).unwrap();
            for sub in ["suites", "golden", "ci"] {
                std::os::unix::fs::symlink(repo().join(sub), project.join(sub)).unwrap();
            }
            std::os::unix::fs::symlink(
                self.path("contrib").join("erring"),
                project.join("targets").join("erring"),
            )
            .unwrap();
        }
        let mut c = Command::new("bash");
        c.arg(repo().join("ci/nightly-perf.sh"))
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("CI")
            .env_remove("CONFORM_REQUIRE_TARGETS")
            .env("CONFORM", env!("CARGO_BIN_EXE_conform"))
            .env("CONFORM_ROOT", &project)
            .env("CONFORM_SCRATCH", self.path("scratch"))
            .env("PIDS_FILE", self.pids_file())
            .env("CONFORM_FAULT_TAG", &self.tag)
            .stdin(Stdio::null());
        c
    }

    /// Kills every process still carrying this scratch's tag (a test that failed must not
    /// leave a hanging worker behind for the next one).
    fn kill_leftovers(&self) {
        for pid in self.leftovers() {
            // SAFETY: a process this test's invocation started (it carries the unique tag).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }

    /// Fails (after killing them) when processes of this scratch are still running.
    fn assert_nothing_left(&self, what: &str) {
        let left = self.leftovers();
        if !left.is_empty() {
            self.kill_leftovers();
            panic!("{what}: processes left behind: {left:?}");
        }
    }

    /// `child`'s exit status, waiting up to 60 s; past that it fails, killing what is left.
    fn wait_or_fail(&self, child: &mut Child, what: &str) -> std::process::ExitStatus {
        use wait_timeout::ChildExt;
        match child.wait_timeout(Duration::from_secs(60)).unwrap() {
            Some(st) => st,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                self.kill_leftovers();
                panic!("{what}: still running 60 s after the signal");
            }
        }
    }

    /// The processes still carrying this scratch's tag (conform, workers, their children,
    /// the guardian), waiting up to 10 s for them to go.
    fn leftovers(&self) -> Vec<i32> {
        let needle = format!("CONFORM_FAULT_TAG={}", self.tag);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let found: Vec<i32> = std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| {
                    let live = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                        .map(|s| {
                            !s.rsplit(')')
                                .next()
                                .is_some_and(|r| r.trim_start().starts_with('Z'))
                        })
                        .unwrap_or(false);
                    live && std::fs::read(format!("/proc/{pid}/environ"))
                        .map(|env| env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()))
                        .unwrap_or(false)
                })
                .collect();
            if found.is_empty() || Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A scratch `/dev/full` (c 1 7) or `/dev/null` (c 1 3) under `dir`.
fn mknod(dir: &Path, name: &str, minor: u32) -> PathBuf {
    let p = dir.join(name);
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mknod on a path under a temporary directory this test owns.
    let r = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, minor)) };
    assert_eq!(
        r,
        0,
        "mknod {}: {}",
        p.display(),
        std::io::Error::last_os_error()
    );
    p
}

fn is_char_device(p: &Path) -> bool {
    std::fs::symlink_metadata(p)
        .map(|m| m.file_type().is_char_device())
        .unwrap_or(false)
}

/// The write end of a pipe whose reader has already gone (what `| head -1` leaves once head
/// exits): every write to it fails with EPIPE.
fn closed_pipe() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors; the read end is closed at once.
    unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
        libc::close(fds[0]);
        OwnedFd::from_raw_fd(fds[1])
    }
}

fn json(p: &Path) -> serde_json::Value {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

// ---------------------------------------------------------------------------------------------
// The matrix.

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// stdout and stderr into a pipe whose reader has gone (`2>&1 | head -1`).
    BrokenPipe,
    /// stderr closed (`2>&-`).
    StderrClosed,
    /// stderr on a scratch full device (`2>/dev/full`).
    StderrFull,
    Signal(i32),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Long {
    Run,
    Validate,
    Adequacy,
    GoldenVerify,
    PerfRecord,
    /// ci/nightly-perf.sh (the history and its output folder under the scratch).
    Nightly,
}

/// The quick paged_kv cases (a handful, each milliseconds on the reference).
const FILTER: &str = "paged_kv/";

impl Long {
    /// The arguments, the results file the command writes (if any) and whether a mid-run
    /// point is reached through the hanging worker (otherwise: the first progress line).
    fn args(self, s: &Scratch, fault: Fault) -> (Vec<String>, Option<PathBuf>) {
        let signal = matches!(fault, Fault::Signal(_));
        let st = |p: PathBuf| p.display().to_string();
        let v = |a: &[&str]| a.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        match self {
            Long::Run => {
                let out = s.path("r.json");
                let mut a = v(&["run", "--suite", "paged_kv", "--json", &st(out.clone())]);
                if signal {
                    a.extend(v(&["--no-golden", "--target", "reference", "--worker"]));
                    a.push(st(s.worker("hanging")));
                } else {
                    a.extend(v(&["--filter", FILTER]));
                }
                (a, Some(out))
            }
            Long::Validate => {
                let out = s.path("validate");
                let w = if signal { "hanging" } else { "noops" };
                let a = vec![
                    "validate".into(),
                    "--worker".into(),
                    st(s.worker(w)),
                    "--suite".into(),
                    "paged_kv".into(),
                    "--tier".into(),
                    "quick".into(),
                    "--out".into(),
                    st(out.clone()),
                ];
                (a, Some(out.join("results.json")))
            }
            Long::Adequacy => {
                // Several cells (faults x seed sets), so a signal finds it mid-run: under a
                // signal about 3000 cells of a millisecond each, seconds in all.
                let out = s.path("a.json");
                let sets = if signal { "1000" } else { "1" };
                let a = v(&[
                    "adequacy",
                    "--suite",
                    "pa_decode",
                    "--seed-sets",
                    sets,
                    "--seed",
                    "1",
                    "--fault",
                    "pa-last-partial-block-dropped",
                    "--fault",
                    "pa-read-one-past-length",
                    "--fault",
                    "pa-block-table-off-by-one",
                    "--json",
                    &st(out.clone()),
                ]);
                (a, Some(out))
            }
            Long::GoldenVerify => (
                v(&["golden", "verify", "--suite", "paged_kv", "--tier", "quick"]),
                None,
            ),
            Long::Nightly => {
                let out = s.path("night");
                let target = if signal { "erring" } else { "reference" };
                let mut a = v(&[
                    "--target",
                    target,
                    "--hardware",
                    "this-cpu",
                    "--no-control",
                    "--tier",
                    "quick",
                    "--suite",
                    "paged_kv",
                    "--history",
                    &st(s.path("history")),
                    "--out",
                    &st(out.clone()),
                ]);
                if !signal {
                    a.extend(v(&["--filter", FILTER]));
                }
                (a, Some(out.join("results.json")))
            }
            Long::PerfRecord => {
                let out = s.path("p.json");
                let mut a = v(&[
                    "perf",
                    "record",
                    "--suite",
                    "paged_kv",
                    "--warmup",
                    "0",
                    "--iterations",
                    "2",
                    "--out",
                    &st(out.clone()),
                ]);
                if signal {
                    a.extend(v(&["--no-golden", "--target", "reference", "--worker"]));
                    a.push(st(s.worker("hanging")));
                } else {
                    a.extend(v(&["--filter", FILTER]));
                }
                (a, Some(out))
            }
        }
    }

    /// Whether a signal finds it mid-run inside the hanging worker's request.
    fn hangs(self) -> bool {
        matches!(
            self,
            Long::Run | Long::Validate | Long::PerfRecord | Long::Nightly
        )
    }

    /// Whether SIGINT / SIGTERM stop it with its partial results (exit 130 / 143) and SIGKILL
    /// leaves a journal: all but golden verify, which writes nothing.
    fn keeps_partial_results(self) -> bool {
        self != Long::GoldenVerify
    }
}

/// The lines of a journal (0 when there is none yet).
fn journal_lines(journal: &Path) -> usize {
    std::fs::read(journal)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .unwrap_or(0)
}

/// The cells an adequacy matrix measured.
fn measured_cells(matrix: &serde_json::Value) -> usize {
    matrix["matrix"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["outcomes"].as_array().unwrap().len())
        .sum()
}

fn check(cmd: Long, fault: Fault) {
    let s = Scratch::new();
    let (args, out) = cmd.args(&s, fault);
    let mut c = if cmd == Long::Nightly {
        s.nightly(&args)
    } else {
        s.command(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let what = format!("{cmd:?} under {fault:?}");
    // The finished cells (or trials) journaled when the signal was sent.
    let mut journaled = 0;
    let status = match fault {
        Fault::BrokenPipe => {
            let w = closed_pipe();
            c.stdout(Stdio::from(w.try_clone().unwrap()))
                .stderr(Stdio::from(w));
            c.status().unwrap()
        }
        Fault::StderrClosed => {
            c.stdout(Stdio::null());
            // SAFETY: close(2) between fork and exec.
            unsafe {
                c.pre_exec(|| {
                    libc::close(2);
                    Ok(())
                });
            }
            c.status().unwrap()
        }
        Fault::StderrFull => {
            let full = mknod(s.dir.path(), "full", 7);
            let f = std::fs::OpenOptions::new().write(true).open(&full).unwrap();
            c.stdout(Stdio::null()).stderr(Stdio::from(f));
            let st = c.status().unwrap();
            assert!(
                is_char_device(&full),
                "{what}: the scratch node was replaced"
            );
            st
        }
        Fault::Signal(sig) => {
            c.stdout(Stdio::null()).stderr(Stdio::piped());
            let mut child = c.spawn().unwrap();
            wait_mid_run(&s, cmd, &mut child, out.as_deref());
            if let Some(out) = &out {
                journaled = journal_lines(&journal_of(out)).saturating_sub(1);
            }
            // SAFETY: signalling the child this test started.
            unsafe {
                libc::kill(child.id() as i32, sig);
            }
            s.wait_or_fail(&mut child, &what)
        }
    };
    assert_ne!(status.code(), Some(101), "{what}: panicked");
    s.assert_nothing_left(&what);
    if cmd == Long::Nightly {
        return nightly_after(&s, fault, status, out.as_deref().unwrap(), &what);
    }
    match fault {
        Fault::Signal(libc::SIGKILL) => after_sigkill(&s, cmd, out.as_deref(), &what, journaled),
        Fault::Signal(sig) if cmd.keeps_partial_results() => {
            let code = if sig == libc::SIGINT { 130 } else { 143 };
            assert_eq!(status.code(), Some(code), "{what}");
            let out = out.unwrap();
            assert!(
                !journal_of(&out).exists(),
                "{what}: the journal outlived the written results"
            );
            if cmd == Long::Adequacy {
                // The partial matrix: every cell finished before the signal, marked
                // interrupted, never a pass.
                let m = json(&out);
                assert!(m["interrupted"].is_string(), "{what}: {m}");
                assert!(!m["unfinished"].as_array().unwrap().is_empty(), "{what}");
                assert!(measured_cells(&m) >= journaled.max(1), "{what}");
            } else if cmd == Long::PerfRecord {
                assert_eq!(
                    json(&out)["cases"].as_array().map(Vec::len),
                    Some(1),
                    "{what}"
                );
            } else {
                let r = json(&out);
                assert!(r["interrupted"].is_string(), "{what}: {r}");
                assert!(!r["unfinished"].as_array().unwrap().is_empty(), "{what}");
            }
        }
        // golden verify installs no handler: a signal ends it at once (it starts no process
        // and writes nothing), or it had finished.
        Fault::Signal(sig) => assert!(
            status.signal() == Some(sig) || matches!(status.code(), Some(0 | 1)),
            "{what}: {status:?}"
        ),
        _ => {
            let expected = match cmd {
                Long::Validate => 4, // the no-ops worker: nothing judged
                _ => 0,
            };
            assert_eq!(status.code(), Some(expected), "{what}");
            if let Some(out) = out {
                let v = json(&out);
                assert!(v.is_object(), "{what}");
                assert!(
                    !journal_of(&out).exists(),
                    "{what}: the journal was not removed"
                );
            }
        }
    }
}

fn journal_of(out: &Path) -> PathBuf {
    PathBuf::from(format!("{}.journal", out.display()))
}

/// Waits until `cmd` is mid-run: inside the hanging worker's request, past its first
/// journaled cell (adequacy), or past its first progress line on stderr.
fn wait_mid_run(s: &Scratch, cmd: Long, child: &mut Child, out: Option<&Path>) {
    let start = Instant::now();
    if cmd == Long::Adequacy {
        let journal = journal_of(out.unwrap());
        // The header and at least one finished cell.
        while journal_lines(&journal) < 2 {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{cmd:?} journaled no cell"
            );
            assert!(child.try_wait().unwrap().is_none(), "{cmd:?} ended early");
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut err = child.stderr.take().unwrap();
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    } else if cmd.hangs() {
        while !s.pids_file().exists() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{cmd:?} never hung"
            );
            assert!(child.try_wait().unwrap().is_none(), "{cmd:?} ended early");
            std::thread::sleep(Duration::from_millis(20));
        }
        // Keep its stderr drained.
        let mut err = child.stderr.take().unwrap();
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    } else {
        use std::io::BufRead;
        let err = child.stderr.take().unwrap();
        let mut lines = std::io::BufReader::new(err);
        let mut first = String::new();
        let _ = lines.read_line(&mut first);
        std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    }
}

/// After SIGKILL: the journal of the commands that keep one recovers into a results file (a
/// partial kill matrix for adequacy) and a report holding what had finished.
fn after_sigkill(s: &Scratch, cmd: Long, out: Option<&Path>, what: &str, journaled: usize) {
    if !cmd.keeps_partial_results() {
        return;
    }
    let out = out.unwrap();
    assert!(
        !out.exists(),
        "{what}: SIGKILL left no time to write {}",
        out.display()
    );
    let journal = journal_of(out);
    if cmd == Long::Adequacy {
        return adequacy_after_sigkill(s, &journal, what, journaled);
    }
    let rec = s.path("recovered");
    let o = s
        .command(&["report", "--input"])
        .arg(&journal)
        .arg("--out")
        .arg(&rec)
        .output()
        .unwrap();
    let finished = if cmd == Long::Validate { 0 } else { 1 };
    // A recovered validate judged nothing (its only worker hung): the report says so, exit 4.
    let code = if finished == 0 { 4 } else { 0 };
    assert_eq!(o.status.code(), Some(code), "{what}: {}", text(&o));
    let r = json(&rec.join("results.json"));
    assert_eq!(
        r["cases"].as_array().unwrap().len(),
        finished,
        "{what}: {r}"
    );
    assert!(
        r["interrupted"].as_str().unwrap().contains("SIGKILL"),
        "{r}"
    );
    assert!(
        !r["unfinished"].as_array().unwrap().is_empty(),
        "{what}: {r}"
    );
    let html = std::fs::read_to_string(rec.join("index.html")).unwrap();
    assert!(!html.contains("all passed"), "{what}");
}

/// The nightly script under `fault`: it never panics (checked above) nor leaves a process;
/// an output fault costs the messages only (the first night is recorded, ingested, reported:
/// exit 0); SIGINT / SIGTERM end it with 130 / 143 once its conform has written the results
/// of what finished (the erring case), marked interrupted, and the night joins no history;
/// after SIGKILL of the script, its conform still ends and keeps that result.
fn nightly_after(
    s: &Scratch,
    fault: Fault,
    status: std::process::ExitStatus,
    results: &Path,
    what: &str,
) {
    let out = results.parent().unwrap();
    let history = s.path("history");
    let nights = || {
        std::fs::read_dir(&history)
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        let n = e.file_name().to_string_lossy().into_owned();
                        n.starts_with("perf-") && n.ends_with(".json")
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    match fault {
        Fault::Signal(sig) => {
            if sig == libc::SIGKILL {
                assert_eq!(status.signal(), Some(libc::SIGKILL), "{what}");
            } else {
                let code = if sig == libc::SIGINT { 130 } else { 143 };
                assert_eq!(status.code(), Some(code), "{what}: {status:?}");
            }
            // The erring case's result, written by conform on the passed-on signal (on
            // SIGKILL of the script: on the parent-death signal), or else in its journal.
            let r = if results.exists() {
                json(results)
            } else {
                let rec = s.path("recovered");
                let o = s
                    .command(&["report", "--input"])
                    .arg(journal_of(results))
                    .arg("--out")
                    .arg(&rec)
                    .output()
                    .unwrap();
                assert!(o.status.code().is_some(), "{what}: {}", text(&o));
                json(&rec.join("results.json"))
            };
            let cases = r["cases"].as_array().unwrap();
            assert!(
                cases.iter().any(|c| c["status"] == "error"),
                "{what}: the finished case was lost: {r}"
            );
            assert!(r["interrupted"].is_string(), "{what}: {r}");
            assert_eq!(
                nights(),
                0,
                "{what}: an interrupted night joined the history"
            );
        }
        _ => {
            assert_eq!(status.code(), Some(0), "{what}: {status:?}");
            let r = json(results);
            assert!(
                r["cases"].as_array().is_some_and(|c| !c.is_empty()),
                "{what}"
            );
            assert!(out.join("perf.json").exists(), "{what}");
            assert!(out.join("report/index.html").exists(), "{what}");
            assert!(history.join("perf-history.sqlite").exists(), "{what}");
            assert_eq!(nights(), 1, "{what}");
        }
    }
}

/// A killed adequacy: `conform report --input a.json.journal` recovers the partial kill matrix
/// (every cell journaled before the kill) and its page, neither of which reads as a pass.
fn adequacy_after_sigkill(s: &Scratch, journal: &Path, what: &str, journaled: usize) {
    let rec = s.path("recovered");
    let o = s
        .command(&["report", "--input"])
        .arg(journal)
        .arg("--out")
        .arg(&rec)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{what}: {}", text(&o));
    let m = json(&rec.join("adequacy.json"));
    assert!(
        measured_cells(&m) >= journaled.max(1),
        "{what}: {journaled} cells journaled before the kill, recovered {}",
        measured_cells(&m)
    );
    assert!(
        m["interrupted"].as_str().unwrap().contains("SIGKILL"),
        "{what}: {m}"
    );
    assert!(!m["unfinished"].as_array().unwrap().is_empty(), "{what}");
    let html = std::fs::read_to_string(rec.join("index.html")).unwrap();
    assert!(html.contains("INTERRUPTED"), "{what}");
    assert!(!html.contains("every required fault was killed"), "{what}");
}

// ---------------------------------------------------------------------------------------------
// Output paths that are not regular files.

/// `--json` on a scratch null device and `--junit` through a symbolic link to the process's
/// stdout: both written through, neither replaced (the issue's reproduction).
fn device_and_symlink_outputs_are_written_through_never_replaced() {
    let s = Scratch::new();
    let null = mknod(s.dir.path(), "n", 3);
    let link = s.path("s");
    std::os::unix::fs::symlink("/proc/self/fd/1", &link).unwrap();
    let o = s
        .command(&["run", "--filter", FILTER, "--json"])
        .arg(&null)
        .arg("--junit")
        .arg(&link)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(is_char_device(&null), "the null node was replaced");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced"
    );
    // The JUnit went through the link to conform's stdout.
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("<testsuites"),
        "{}",
        text(&o)
    );
    // No journal or temporary file beside the device.
    let names: Vec<_> = std::fs::read_dir(s.dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".conform") || n.ends_with(".journal"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

/// A full device: the work is done, the output cannot be written: exit 1 with "cannot
/// write"-style message, and the node is still a node.
fn a_full_device_gives_exit_1_and_is_not_replaced() {
    let s = Scratch::new();
    let full = mknod(s.dir.path(), "full", 7);
    let o = s
        .command(&["run", "--filter", FILTER, "--json"])
        .arg(&full)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("No space left on device"), "{}", text(&o));
    assert!(is_char_device(&full), "the full node was replaced");
}

/// A FIFO (no root needed) is written through to its reader; a link to a regular file has
/// its target replaced and stays a link; a dangling link is refused before any case runs.
fn fifo_and_links_to_files() {
    let s = Scratch::new();
    let fifo = s.path("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo under a temporary directory this test owns.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let real = s.path("real.json");
    std::fs::write(&real, "old").unwrap();
    let link = s.path("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let o = s
        .command(&["run", "--filter", FILTER, "--json"])
        .arg(&fifo)
        .arg("--junit")
        .arg(&link)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let through: serde_json::Value = serde_json::from_str(&reader.join().unwrap()).unwrap();
    assert!(through["cases"].as_array().is_some_and(|c| !c.is_empty()));
    let ft = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    assert!(ft.is_fifo(), "the FIFO was replaced");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(&real)
        .unwrap()
        .contains("<testsuites"));

    let dangling = s.path("dangling.json");
    std::os::unix::fs::symlink(s.path("nowhere/x.json"), &dangling).unwrap();
    let o = s
        .command(&["run", "--filter", FILTER, "--json"])
        .arg(&dangling)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("symbolic link"), "{}", text(&o));
}

// ---------------------------------------------------------------------------------------------
// Honest reports, runnable replay lines, output directories that vanish.

/// validate with a worker implementing none of the suite: exit 4, one skip summary instead of
/// a line per case, and a report that says "nothing judged", not "all passed".
fn validate_that_judged_nothing_is_not_green() {
    let s = Scratch::new();
    let out = s.path("v");
    let o = s
        .command(&["validate", "--suite", "paged_kv", "--worker"])
        .arg(s.worker("noops"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("SKIPPED "), "a line per skipped case:\n{err}");
    assert!(text(&o).contains("skipped:\n  [noops]"), "{}", text(&o));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(!html.contains("all passed"), "the page is green");
    assert!(html.contains("nothing judged"));
}

/// `report` of results with no case exits 4 and says nothing judged; a schema_version it does
/// not read is refused (exit 2).
fn report_of_nothing_and_of_unknown_versions() {
    let s = Scratch::new();
    let empty = s.path("empty.json");
    std::fs::write(
        &empty,
        r#"{"schema_version": 1, "conform_version": "0", "started_at": "t",
            "fresh_seeds": false, "cases": []}"#,
    )
    .unwrap();
    let o = s
        .command(&["report", "--input"])
        .arg(&empty)
        .arg("--out")
        .arg(s.path("rep"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let html = std::fs::read_to_string(s.path("rep/index.html")).unwrap();
    assert!(!html.contains("all passed") && html.contains("nothing judged"));
    let future = s.path("future.json");
    std::fs::write(
        &future,
        std::fs::read_to_string(&empty)
            .unwrap()
            .replace("\"schema_version\": 1", "\"schema_version\": 99"),
    )
    .unwrap();
    let o = s
        .command(&["report", "--input"])
        .arg(&future)
        .arg("--out")
        .arg(s.path("rep2"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("schema_version 99"), "{}", text(&o));
}

/// The replay line validate prints for a worker outside targets/ runs when pasted: it finds
/// the case and the worker (the crashing worker fails again: exit 1, not 2 or 4).
fn the_replay_line_of_validate_runs_when_pasted() {
    let s = Scratch::new();
    let o = s
        .command(&[
            "validate", "--suite", "paged_kv", "--tier", "quick", "--worker",
        ])
        .arg(s.worker("crashing"))
        .arg("--out")
        .arg(s.path("v"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: conform "))
        .unwrap_or_else(|| panic!("no replay line:\n{stdout}"));
    // The line names the project root it was printed under (`--root`): it runs when pasted
    // in another directory, outside any checkout.
    assert!(line.contains("--root"), "{line}");
    let pasted = format!("\"$CONFORM\" {line} --json \"$OUT\"");
    let replayed = s.path("replayed.json");
    let o = Command::new("sh")
        .args(["-c", &pasted])
        .current_dir(s.dir.path())
        .env("CONFORM", env!("CARGO_BIN_EXE_conform"))
        .env("ROOT", repo())
        .env("OUT", &replayed)
        .env("CONFORM_SCRATCH", s.path("scratch"))
        .env_remove("CI")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{pasted}\n{}", text(&o));
    let r = json(&replayed);
    let cases = r["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 1, "{r}");
    assert_eq!(cases[0]["target"], "crashing");
    assert_eq!(cases[0]["status"], "crashed");
}

/// An output directory removed while the run goes on: the work was done, the output was not
/// written: exit 1 (not 2), saying which file.
fn an_output_directory_deleted_mid_run_exits_1() {
    let s = Scratch::new();
    let out = s.path("out");
    std::fs::create_dir_all(&out).unwrap();
    let o = s
        .command(&["run", "--suite", "paged_kv", "--tier", "quick", "--worker"])
        .arg(s.worker("noops"))
        .arg("--json")
        .arg(out.join("r.json"))
        .arg("--junit")
        .arg(s.path("r.xml"))
        .env("DOOMED", &out)
        .output()
        .unwrap();
    assert!(!out.exists(), "the worker did not remove the directory");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("r.json"), "{}", text(&o));
    // The output that could be written still was.
    assert!(s.path("r.xml").exists(), "{}", text(&o));
}

/// `--threads` far beyond the machine is refused at once (it used to start them all), as is 0.
fn absurd_thread_counts_are_refused_at_once() {
    let s = Scratch::new();
    for n in ["100000", "0", "18446744073709551616", "-3"] {
        let mut c = s.command(&["run", "--filter", FILTER, "--threads", n]);
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use wait_timeout::ChildExt;
        let st = child.wait_timeout(Duration::from_secs(60)).unwrap();
        if st.is_none() {
            let _ = child.kill();
        }
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(2), "--threads {n}: {}", text(&o));
        assert!(text(&o).contains("--threads"), "{}", text(&o));
    }
}

/// Frictions: a directory given as the perf history database is named as such (not "disk I/O
/// error"), and a suite name where a case id is expected gets a hint.
fn a_history_directory_and_a_suite_for_a_case_get_clear_messages() {
    let s = Scratch::new();
    for args in [
        vec!["perf", "history", "list", "--db"],
        vec!["perf", "history", "show", "x", "--db"],
    ] {
        let o = s.command(&args).arg(s.dir.path()).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("is a directory"), "{}", text(&o));
        assert!(!text(&o).contains("disk I/O"), "{}", text(&o));
    }
    let o = s.command(&["explain", "paged_kv"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("is a suite, not a case id") && text(&o).contains("--suite paged_kv"),
        "{}",
        text(&o)
    );
}

/// CONFORM_PARENT_PID (what the nightly script sets): a process that is gone by the time
/// conform starts (its launcher killed between fork and exec) stops conform at once with 143,
/// before any work; a live process that is not conform's parent, or a value that is not a pid,
/// leaves conform as it is.
fn a_parent_pid_that_is_gone_stops_conform_at_once() {
    let s = Scratch::new();
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id().to_string();
    gone.wait().unwrap();
    let o = s
        .command(&["list", "--suite", "paged_kv"])
        .env("CONFORM_PARENT_PID", &pid)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(143), "{}", text(&o));
    assert!(text(&o).contains("has already ended"), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    for value in ["1", "not-a-pid"] {
        let o = s
            .command(&["list", "--suite", "paged_kv"])
            .env("CONFORM_PARENT_PID", value)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{value}: {}", text(&o));
        assert!(!o.stdout.is_empty(), "{value}");
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile inputs, expansions, signals inside a computation, workers' children (issue 46).

/// How a measured invocation ended: its output, its wall time and its peak resident memory.
struct Measured {
    output: std::process::Output,
    elapsed: Duration,
    max_rss_mib: u64,
}

/// Runs `c` to its end (killed after `limit`), with its peak resident set size from the
/// kernel's accounting of the child (wait4).
// The child is reaped by the wait4 loop below (which also reads its rusage), not by
// `Child::wait`: clippy cannot see that.
#[allow(clippy::zombie_processes)]
fn measured(mut c: Command, limit: Duration) -> Measured {
    use std::io::Read;
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = c.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let e = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waiting on the child this function started; the out-parameters are valid.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        if start.elapsed() > limit {
            // SAFETY: killing the child this function started.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let elapsed = start.elapsed();
    Measured {
        output: std::process::Output {
            status: std::process::ExitStatus::from_raw(status),
            stdout: o.join().unwrap(),
            stderr: e.join().unwrap(),
        },
        elapsed,
        max_rss_mib: usage.ru_maxrss as u64 / 1024,
    }
}

/// A minimal project under `dir`: `suites/` holding `suites` (name, text), `golden/` empty,
/// `ci/hardware/` the repository's profiles.
fn project(dir: &Path, suites: &[(&str, &str)]) -> PathBuf {
    let root = dir.join("project");
    std::fs::create_dir_all(root.join("suites")).unwrap();
    std::fs::create_dir_all(root.join("golden")).unwrap();
    std::fs::create_dir_all(root.join("ci")).unwrap();
    std::os::unix::fs::symlink(repo().join("ci/hardware"), root.join("ci/hardware")).unwrap();
    for (name, text) in suites {
        std::fs::write(root.join("suites").join(name), text).unwrap();
    }
    root
}

/// The hostile sources of one input: `/dev/zero` (endless zeros), a 10 GB sparse file (no disk,
/// no bytes read) and a named FIFO nobody writes to, each placed at `at` (a link for the
/// device).
#[derive(Clone, Copy, Debug)]
enum Hostile {
    DevZero,
    Sparse10G,
    Fifo,
}

impl Hostile {
    const ALL: [Hostile; 3] = [Hostile::DevZero, Hostile::Sparse10G, Hostile::Fifo];

    fn place(self, at: &Path) {
        let _ = std::fs::remove_file(at);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        match self {
            Hostile::DevZero => std::os::unix::fs::symlink("/dev/zero", at).unwrap(),
            Hostile::Sparse10G => std::fs::File::create(at)
                .unwrap()
                .set_len(10_000_000_000)
                .unwrap(),
            Hostile::Fifo => {
                let c = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).unwrap();
                // SAFETY: mkfifo under a temporary directory this test owns.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }
        }
    }
}

const MINIMAL_RESULTS: &str = r#"{"schema_version": 1, "conform_version": "0",
    "started_at": "t", "fresh_seeds": false, "cases": []}"#;

/// Every kind of file conform reads, given `/dev/zero`, a 10 GB sparse file and a FIFO with no
/// writer: a clean error naming the file (never a hang, an abort or memory in proportion to
/// the input), within seconds and a bounded resident set.
fn hostile_inputs_are_refused_fast_and_small() {
    let s = Scratch::new();
    let valid = s.path("valid.json");
    std::fs::write(&valid, MINIMAL_RESULTS).unwrap();
    let out = s.path("out");
    // (what, the file to make hostile, arguments; `{}` stands for that file)
    let mut kinds: Vec<(&str, PathBuf, Vec<String>)> = Vec::new();
    let a = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let o = out.display().to_string();
    let v = valid.display().to_string();
    kinds.push((
        "results",
        s.path("in/r.json"),
        a(&["report", "--input", "{}", "--out", &o]),
    ));
    kinds.push((
        "journal",
        s.path("in/r.json.journal"),
        a(&["report", "--input", "{}", "--out", &o]),
    ));
    for flag in ["--perf", "--baseline", "--mc2", "--adequacy"] {
        kinds.push((
            flag,
            s.path("in/x.json"),
            a(&["report", "--input", &v, flag, "{}", "--out", &o]),
        ));
    }
    kinds.push((
        "perf compare",
        s.path("in/p.json"),
        a(&["perf", "compare", "--baseline", "{}", "--candidate", "{}"]),
    ));
    let db = s.path("h/h.sqlite").display().to_string();
    kinds.push((
        "perf history ingest",
        s.path("in/p.json"),
        a(&["perf", "history", "ingest", "--db", &db, "{}"]),
    ));
    kinds.push((
        "perf history gate",
        s.path("in/p.json"),
        a(&["perf", "history", "gate", "--db", &db, "--candidate", "{}"]),
    ));
    kinds.push((
        "history database",
        s.path("in/h.sqlite"),
        a(&["perf", "history", "list", "--db", "{}"]),
    ));
    kinds.push((
        "mc2 costs",
        s.path("in/costs.toml"),
        a(&[
            "mc2", "plan", "--m", "4096", "--k", "3072", "--n", "8192", "--dtype", "f16",
            "--costs", "{}",
        ]),
    ));
    let worker_dir = s.path("in/w");
    kinds.push((
        "worker declaration",
        worker_dir.join("target.toml"),
        a(&[
            "run",
            "--suite",
            "paged_kv",
            "--worker",
            &worker_dir.display().to_string(),
        ]),
    ));
    let keep = s.path("keep");
    kinds.push((
        "kept index",
        keep.join("index.json"),
        a(&[
            "run",
            "--filter",
            FILTER,
            "--keep-outputs",
            &keep.display().to_string(),
        ]),
    ));
    let root = project(s.dir.path(), &[]);
    let proot = root.display().to_string();
    kinds.push((
        "suite",
        root.join("suites/x.toml"),
        a(&["--root", &proot, "list"]),
    ));
    // A project with the repository's suites and a hostile golden MANIFEST, hardware profile
    // or golden tensor file.
    let golden_root = s.path("golden-project");
    std::fs::create_dir_all(golden_root.join("golden")).unwrap();
    std::fs::create_dir_all(golden_root.join("ci/hardware")).unwrap();
    std::os::unix::fs::symlink(repo().join("suites"), golden_root.join("suites")).unwrap();
    let groot = golden_root.display().to_string();
    kinds.push((
        "golden manifest",
        golden_root.join("golden/MANIFEST.toml"),
        a(&["--root", &groot, "run", "--filter", FILTER]),
    ));
    kinds.push((
        "hardware profile",
        golden_root.join("ci/hardware/x.toml"),
        a(&[
            "--root",
            &groot,
            "run",
            "--filter",
            FILTER,
            "--no-golden",
            "--perf",
            "--hardware",
            "x",
        ]),
    ));
    let tensors_root = s.path("tensors-project");
    for sub in ["suites", "ci"] {
        std::fs::create_dir_all(&tensors_root).unwrap();
        std::os::unix::fs::symlink(repo().join(sub), tensors_root.join(sub)).unwrap();
    }
    std::fs::create_dir_all(tensors_root.join("golden")).unwrap();
    std::fs::copy(
        repo().join("golden/MANIFEST.toml"),
        tensors_root.join("golden/MANIFEST.toml"),
    )
    .unwrap();
    let case = "paged_kv/bf16/BnBsH/blocks4-bs16-hkv2-d64-t37-pad5";
    kinds.push((
        "golden tensor file",
        tensors_root.join(format!("golden/{case}.safetensors")),
        a(&[
            "--root",
            &tensors_root.display().to_string(),
            "run",
            "--filter",
            &format!("^{case}$"),
        ]),
    ));
    // A named FIFO is waited on for a writer for 3 s: tried on a few kinds only (each of the
    // readers goes through the same opener).
    let fifo_kinds = [
        "results",
        "journal",
        "perf compare",
        "suite",
        "golden tensor file",
    ];
    for (what, file, args) in &kinds {
        for h in Hostile::ALL {
            if matches!(h, Hostile::Fifo) && !fifo_kinds.contains(what) {
                continue;
            }
            h.place(file);
            let f = file.display().to_string();
            let args: Vec<String> = args.iter().map(|x| x.replace("{}", &f)).collect();
            let mut c = s.bare();
            if !args.iter().any(|a| a == "--root") {
                c.arg("--root").arg(repo());
            }
            c.args(&args);
            let m = measured(c, Duration::from_secs(60));
            let t = text(&m.output);
            let case = format!("{what} as {h:?} ({}):\n{t}", args.join(" "));
            assert!(
                m.elapsed < Duration::from_secs(20),
                "{case}: took {:?}",
                m.elapsed
            );
            assert!(
                m.max_rss_mib < 512,
                "{case}: {} MiB resident",
                m.max_rss_mib
            );
            let code = m.output.status.code();
            // An input error (2), or for the golden tensor file the case's error (1); never a
            // pass, an abort, a signal or a panic.
            let expected = if *what == "golden tensor file" { 1 } else { 2 };
            assert_eq!(code, Some(expected), "{case}");
            let name = file.file_name().unwrap().to_string_lossy();
            assert!(
                t.contains(&*name),
                "{case}: the message does not name the file"
            );
        }
        let _ = std::fs::remove_file(file);
    }
    s.assert_nothing_left("hostile inputs");
}

/// A suite of a few KiB whose grid has 1000 x 1000 x 100 combinations (10^8 cases): every
/// command that loads the suites refuses it before expanding anything, with the count, fast.
fn a_grid_of_10_to_the_8_cases_is_refused_before_expanding() {
    let s = Scratch::new();
    let axis = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    let suite = format!(
        "[suite]\nname = \"huge\"\nop = \"paged_kv\"\n\n[defaults]\nrecipe = \"reference\"\n\n\
         [[grid]]\nname = \"a{{a}}-b{{b}}-c{{c}}\"\naxes.a = [{}]\naxes.b = [{}]\naxes.c = [{}]\n",
        axis(1000),
        axis(1000),
        axis(100)
    );
    assert!(suite.len() < 12 << 10, "{} bytes", suite.len());
    let root = project(s.dir.path(), &[("huge.toml", &suite)]);
    for args in [
        vec!["list"],
        vec!["run", "--no-golden"],
        vec!["explain", "huge/a0-b0-c0"],
    ] {
        let mut c = s.bare();
        c.arg("--root").arg(&root).args(&args);
        let m = measured(c, Duration::from_secs(60));
        let t = text(&m.output);
        assert_eq!(m.output.status.code(), Some(2), "{args:?}: {t}");
        assert!(
            t.contains("100000000 combinations") && t.contains("huge.toml"),
            "{args:?}: {t}"
        );
        assert!(
            m.elapsed < Duration::from_secs(10),
            "{args:?}: {:?}",
            m.elapsed
        );
        assert!(m.max_rss_mib < 256, "{args:?}: {} MiB", m.max_rss_mib);
    }
}

/// A quick case, then a reference case long enough to be inside its computation when the
/// signal comes (quant_matmul, 2048 x 8192 x 8192 int8 products: on two cores about 2 s of
/// input generation, 2 s of the weights' transpose, then a minute of row blocks).
const LONG_REFERENCE_SUITE: &str = r#"[suite]
name = "quant_matmul"
op = "quant_matmul"

[defaults]
recipe = "ascend_a2"
check = { policy = "bitwise" }

[[case]]
name = "quick"
params = { m = 4, k = 64, n = 16, out = "bf16", scale = "f32" }

[[case]]
name = "long"
params = { m = 2048, k = 8192, n = 8192, out = "bf16", scale = "f32" }
"#;

/// Starts `conform run` of [`LONG_REFERENCE_SUITE`] (through `wrap`, e.g. `timeout`) and waits
/// until the quick case is journaled and the long one has been computing for `inside`.
fn start_long_reference_run(s: &Scratch, wrap: &[&str], inside: Duration) -> (Child, PathBuf) {
    let root = project(s.dir.path(), &[("quant_matmul.toml", LONG_REFERENCE_SUITE)]);
    let out = s.path("r.json");
    let mut c = if wrap.is_empty() {
        s.bare()
    } else {
        let mut c = Command::new(wrap[0]);
        c.args(&wrap[1..])
            .arg(env!("CARGO_BIN_EXE_conform"))
            .current_dir(s.dir.path())
            .env("CONFORM_FAULT_TAG", &s.tag)
            .env("CONFORM_SCRATCH", s.path("scratch"))
            .stdin(Stdio::null());
        c
    };
    c.arg("--root")
        .arg(&root)
        .args([
            "run",
            "--no-golden",
            "--suite",
            "quant_matmul",
            "--threads",
            "2",
            "--json",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let journal = journal_of(&out);
    let start = Instant::now();
    while journal_lines(&journal) < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the quick case never finished"
        );
        assert!(child.try_wait().unwrap().is_none(), "conform ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(inside);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the long case ended early"
    );
    (child, out)
}

/// The results after an interrupt inside the long case: the quick case, the long one
/// unfinished, marked interrupted by `signal`.
fn check_interrupted_results(out: &Path, signal: &str) {
    let r = json(out);
    assert_eq!(r["interrupted"], signal, "{r}");
    let cases = r["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 1, "{r}");
    assert_eq!(cases[0]["id"], "quant_matmul/quick");
    assert_eq!(cases[0]["status"], "passed");
    let unfinished = r["unfinished"].as_array().unwrap();
    assert!(
        unfinished.iter().any(|u| u["id"] == "quant_matmul/long"),
        "{r}"
    );
    assert!(
        !journal_of(out).exists(),
        "the journal outlived the results"
    );
}

/// SIGTERM while the in-process reference computes a long case (in its row blocks, 6 s in):
/// conform stops within a second or so (the reference is cancelled at its next task), writes
/// the finished case's result and exits 143; nothing is left running.
fn sigterm_inside_a_long_reference_case() {
    let s = Scratch::new();
    let (mut child, out) = start_long_reference_run(&s, &[], Duration::from_secs(6));
    let sent = Instant::now();
    // SAFETY: signalling the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = s.wait_or_fail(&mut child, "SIGTERM inside the reference");
    let took = sent.elapsed();
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert!(
        took < Duration::from_secs(3),
        "SIGTERM took {took:?} to stop the case"
    );
    check_interrupted_results(&out, "SIGTERM");
    s.assert_nothing_left("SIGTERM inside the reference");
}

/// Two SIGINTs in a row (3 s into the long case: the weights' transpose): the second does not
/// throw away what the run has: the finished case's result is written all the same (exit 130).
fn a_second_signal_still_writes_the_results() {
    let s = Scratch::new();
    let (mut child, out) = start_long_reference_run(&s, &[], Duration::from_secs(3));
    for _ in 0..2 {
        // SAFETY: signalling the child this test started.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGINT);
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    let status = s.wait_or_fail(&mut child, "two SIGINTs");
    assert_eq!(status.code(), Some(130), "{status:?}");
    check_interrupted_results(&out, "SIGINT");
    s.assert_nothing_left("two SIGINTs");
}

/// `timeout` sends SIGTERM when its time is up and returns at once: conform must end with it,
/// not compute on as an orphan. (`timeout 12` here; the issue's case was `timeout 40`.)
fn timeout_leaves_nothing_running() {
    let s = Scratch::new();
    let (mut child, out) = start_long_reference_run(&s, &["timeout", "12"], Duration::ZERO);
    let status = s.wait_or_fail(&mut child, "timeout 12");
    // timeout's own code when the time ran out.
    assert_eq!(status.code(), Some(124), "{status:?}");
    s.assert_nothing_left("conform under `timeout 12`");
    check_interrupted_results(&out, "SIGTERM");
}

/// A worker that starts a helper per request and ends by itself, normally (exit 0 at shutdown)
/// or by crashing: the helpers end with it, and none outlives `conform run`.
fn a_workers_children_end_with_it() {
    for crash in [false, true] {
        let s = Scratch::new();
        let mut c = s.command(&["run", "--suite", "paged_kv", "--tier", "quick", "--worker"]);
        c.arg(s.worker("leaver"));
        if crash {
            c.env("CRASH_AFTER_CHILD", "1");
        }
        let o = c.output().unwrap();
        let expected = if crash { 1 } else { 4 };
        assert_eq!(
            o.status.code(),
            Some(expected),
            "crash={crash}: {}",
            text(&o)
        );
        let helpers = std::fs::read_to_string(s.pids_file()).unwrap_or_default();
        assert!(
            !helpers.trim().is_empty(),
            "crash={crash}: no helper was started"
        );
        s.assert_nothing_left(&format!("crash={crash}: the worker's helpers"));
    }
}

/// A Python worker `script` in the scratch's `contrib/<name>/` with its `target.toml`; returns
/// the directory.
fn python_worker(s: &Scratch, name: &str, script: &str) -> PathBuf {
    let w = s.path(&format!("contrib/{name}"));
    std::fs::create_dir_all(&w).unwrap();
    std::fs::write(w.join("worker.py"), script).unwrap();
    std::fs::write(
        w.join("target.toml"),
        "command = \"python3\"\nargs = [\"${TARGET_DIR}/worker.py\"]\n",
    )
    .unwrap();
    w
}

/// A worker named `name` declaring `op` for bf16 only (`dtypes`) with `recipe`, answering every
/// request with the JSON object `reply` (Python, with the request as `req`).
fn bf16_only_worker(name: &str, op: &str, recipe: &str, reply: &str) -> String {
    format!(
        r#"
import json, sys
print(json.dumps({{"type": "hello", "protocol": 1, "worker": {{"name": "{name}", "version": "1"}},
                  "libraries": {{}}, "device": "CPU (test)",
                  "capabilities": {{"ops": {{"{op}": {{"dtypes": ["bf16"], "recipes": ["{recipe}"]}}}}}}}}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    if req["type"] == "shutdown":
        break
    print(json.dumps(dict({{"type": "result", "id": req["id"]}}, **{reply})), flush=True)
"#
    )
}

/// Declares `quant_matmul` with `dtypes` (an op whose cases have no `dtype` parameter) and
/// fails every request it is sent: the declaration must not be silently ignored.
fn qmm_dtypes_worker() -> String {
    bf16_only_worker(
        "qmmdtypes",
        "quant_matmul",
        "mine",
        r#"{"status": "error", "message": "a case reached a worker whose dtypes say nothing"}"#,
    )
}

/// Suite inputs that would check nothing (NaN or infinite bounds, low >= high, a negative
/// std) and a NaN parameter are refused when the suites load, quoting what the file says.
fn suite_numbers_that_check_nothing_are_refused_quoting_the_file() {
    let s = Scratch::new();
    // `conform list` over a project of the given suite files: its exit code and output.
    let list = |suites: &[(&str, &str)]| {
        let dir = tempfile::tempdir().unwrap();
        let root = project(dir.path(), suites);
        let o = s
            .bare()
            .arg("--root")
            .arg(&root)
            .arg("list")
            .output()
            .unwrap();
        (o.status.code(), text(&o))
    };
    let suite = |inputs: &str, extra: &str| {
        format!(
            "[suite]\nname = \"quant_matmul\"\nop = \"quant_matmul\"\n\n[defaults]\n\
             recipe = \"ascend_a2\"\ncheck = {{ policy = \"bitwise\" }}\n\n[[case]]\nname = \"x\"\n\
             inputs = {inputs}\nparams = {{ m = 4, k = 64, n = 16, out = \"bf16\"{extra} }}\n"
        )
    };
    for (inputs, extra, said) in [
        (
            r#"{ kind = "uniform", low = nan, high = inf }"#,
            "",
            "`low = nan` is not a finite number",
        ),
        (
            r#"{ kind = "uniform", low = 2.0, high = 1.0 }"#,
            "",
            "`low = 2.0` is not below `high = 1.0`",
        ),
        (
            r#"{ kind = "normal", mean = 0.0, std = -1.0 }"#,
            "",
            "`std = -1.0` is not a standard deviation above 0",
        ),
        (
            r#"{ kind = "cann_outliers", outlier_scale = nan }"#,
            "",
            "`outlier_scale = nan`",
        ),
    ] {
        let (code, t) = list(&[("quant_matmul.toml", &suite(inputs, extra))]);
        assert_eq!(code, Some(2), "{inputs}{extra}: {t}");
        assert!(t.contains(said) && t.contains("quant_matmul/x"), "{t}");
        assert!(!t.contains("invalid type: null"), "{t}");
    }
    // The issue's case: `scale = nan` read "invalid type: null, expected f64".
    let mla = "[suite]\nname = \"mla_decode\"\nop = \"mla_decode\"\n\n[defaults]\n\
               recipe = \"ascend_mla\"\n\n[[case]]\nname = \"x\"\nparams = { dtype = \"bf16\", \
               batch = 1, num_heads = 2, block_size = 16, actual_seq_lengths_kv = [5], \
               scale = nan }\n";
    let (code, t) = list(&[("mla_decode.toml", mla)]);
    assert_eq!(code, Some(2), "{t}");
    assert!(
        t.contains("`scale = nan`") && !t.contains("invalid type: null"),
        "{t}"
    );
}

/// `dtypes` declared for `quant_matmul` (no `dtype` parameter: the output type is `out`) is
/// not ignored: every case is skipped saying so and pointing at `limits.out.one_of`, so the run
/// judged nothing (exit 4), instead of sending the worker cases its declaration rules out.
fn dtypes_for_an_op_without_a_dtype_parameter_are_not_ignored() {
    let s = Scratch::new();
    let w = python_worker(&s, "qmmdtypes", &qmm_dtypes_worker());
    let o = s
        .command(&["run", "--suite", "quant_matmul", "--worker"])
        .arg(w.join("target.toml"))
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(4), "{t}");
    assert!(
        t.contains("no `dtype` parameter") && t.contains("limits.out.one_of"),
        "{t}"
    );
}

/// Declares `mxfp4_dequant` for bf16 only (`dtypes`) and answers every request `ok` without
/// writing its output (left poisoned), with a note naming the case's `dtype` as sent (absent
/// when the case leaves it at its default).
fn mxfp4_bf16_only_worker() -> String {
    bf16_only_worker(
        "mxbf16",
        "mxfp4_dequant",
        "mx_ocp",
        r#"{"status": "ok", "outputs": req["outputs"],
             "notes": ["reached with dtype %s" % req["params"].get("dtype", "absent")]}"#,
    )
}

/// `dtypes` declared for an op whose `dtype` has a default (`mxfp4_dequant`: bf16) admits the
/// cases that leave `dtype` out as that default: they reach the worker (with `dtype` absent
/// from the request), while the f16 cases are skipped. They used to be skipped as cases
/// "with no `dtype` parameter". The worker's note, the same on each of the case's input sets,
/// is recorded once (it was once per input set).
fn dtypes_admit_the_cases_at_the_ops_default_dtype() {
    let s = Scratch::new();
    let w = python_worker(&s, "mxbf16", &mxfp4_bf16_only_worker());
    let o = s
        .command(&[
            "run",
            "--suite",
            "fp4_dequant",
            "--filter",
            "^fp4_dequant/mxfp4/(bf16/n12-k32/special-scales|f16/n4-k7168/low_first)$",
            "--json",
        ])
        .arg(s.path("r.json"))
        .arg("--worker")
        .arg(w.join("target.toml"))
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(!t.contains("no `dtype` parameter"), "{t}");
    assert!(
        t.contains("dtype f16 is not supported for `mxfp4_dequant`"),
        "{t}"
    );
    let r = json(&s.path("r.json"));
    let case = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "fp4_dequant/mxfp4/bf16/n12-k32/special-scales")
        .expect("the bf16-by-default case ran");
    assert_eq!(case["status"], "failed", "{case}");
    assert_eq!(
        case["notes"],
        serde_json::json!(["reached with dtype absent"]),
        "{case}"
    );
}

/// `conform explain` prints the ledger's claim text for the int8 quant_matmul case (the one
/// text docs/ascend.md and the report print), not a stale copy.
fn explain_prints_the_ledgers_claim_text() {
    let s = Scratch::new();
    let id =
        "quant_matmul/a2/int8/packed-scale-offset-i32-bias/m8-k7168-n64/deepseek-r1/edges-ties";
    let o = s.command(&["explain", id]).output().unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    let ledger = std::fs::read_to_string(repo().join("docs/ascend.md")).unwrap();
    let row = ledger
        .lines()
        .find(|l| l.starts_with("| `qmm.claim.packed_offset` |"))
        .unwrap();
    let claim = row.split('|').nth(2).unwrap().trim();
    assert!(
        t.contains(&format!("qmm.claim.packed_offset: {claim}")),
        "explain does not print the ledger's claim `{claim}`:\n{t}"
    );
}

/// The main job says that it verified the golden store, and how much; a run that did not
/// compare anything with it says so too.
fn the_main_job_says_it_verified_golden() {
    let s = Scratch::new();
    let o = s.command(&["run", "--filter", FILTER]).output().unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("golden: "))
        .unwrap_or_else(|| panic!("no golden line:\n{stdout}"));
    let cases = json_cases(&s, &["run", "--filter", FILTER]);
    assert!(
        line.contains(&format!("of {cases} case(s) verified bit for bit")),
        "{line} ({cases} cases)"
    );
    let o = s
        .command(&["run", "--filter", FILTER, "--no-golden"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("golden: not verified"),
        "{}",
        text(&o)
    );
}

/// How many cases a run of `args` writes to its results file.
fn json_cases(s: &Scratch, args: &[&str]) -> usize {
    let out = s.path("count.json");
    let o = s.command(args).arg("--json").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    json(&out)["cases"].as_array().unwrap().len()
}

fn main() {
    let not_root = (!is_root()).then(|| {
        "not root: mknod of scratch device nodes needs root (CI runs as root)".to_string()
    });
    let no_python = Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .map_or(true, |s| !s.success())
        .then(|| "no python3 for the test workers".to_string());
    let mut tests = vec![
        trials::Test {
            name: "device_and_symlink_outputs_are_written_through_never_replaced",
            body: device_and_symlink_outputs_are_written_through_never_replaced,
            missing: not_root.clone(),
        },
        trials::Test {
            name: "a_full_device_gives_exit_1_and_is_not_replaced",
            body: a_full_device_gives_exit_1_and_is_not_replaced,
            missing: not_root.clone(),
        },
        trials::Test {
            name: "fifo_and_links_to_files",
            body: fifo_and_links_to_files,
            missing: None,
        },
        trials::Test {
            name: "validate_that_judged_nothing_is_not_green",
            body: validate_that_judged_nothing_is_not_green,
            missing: no_python.clone(),
        },
        trials::Test {
            name: "report_of_nothing_and_of_unknown_versions",
            body: report_of_nothing_and_of_unknown_versions,
            missing: None,
        },
        trials::Test {
            name: "the_replay_line_of_validate_runs_when_pasted",
            body: the_replay_line_of_validate_runs_when_pasted,
            missing: no_python.clone(),
        },
        trials::Test {
            name: "an_output_directory_deleted_mid_run_exits_1",
            body: an_output_directory_deleted_mid_run_exits_1,
            missing: no_python.clone(),
        },
        trials::Test {
            name: "a_history_directory_and_a_suite_for_a_case_get_clear_messages",
            body: a_history_directory_and_a_suite_for_a_case_get_clear_messages,
            missing: None,
        },
        trials::Test {
            name: "a_parent_pid_that_is_gone_stops_conform_at_once",
            body: a_parent_pid_that_is_gone_stops_conform_at_once,
            missing: None,
        },
        trials::Test {
            name: "absurd_thread_counts_are_refused_at_once",
            body: absurd_thread_counts_are_refused_at_once,
            missing: None,
        },
        trials::Test {
            name: "hostile_inputs_are_refused_fast_and_small",
            body: hostile_inputs_are_refused_fast_and_small,
            missing: None,
        },
        trials::Test {
            name: "a_grid_of_10_to_the_8_cases_is_refused_before_expanding",
            body: a_grid_of_10_to_the_8_cases_is_refused_before_expanding,
            missing: None,
        },
        trials::Test {
            name: "sigterm_inside_a_long_reference_case",
            body: sigterm_inside_a_long_reference_case,
            missing: None,
        },
        trials::Test {
            name: "a_second_signal_still_writes_the_results",
            body: a_second_signal_still_writes_the_results,
            missing: None,
        },
        trials::Test {
            name: "timeout_leaves_nothing_running",
            body: timeout_leaves_nothing_running,
            missing: None,
        },
        trials::Test {
            name: "suite_numbers_that_check_nothing_are_refused_quoting_the_file",
            body: suite_numbers_that_check_nothing_are_refused_quoting_the_file,
            missing: None,
        },
        trials::Test {
            name: "dtypes_for_an_op_without_a_dtype_parameter_are_not_ignored",
            body: dtypes_for_an_op_without_a_dtype_parameter_are_not_ignored,
            missing: no_python.clone(),
        },
        trials::Test {
            name: "dtypes_admit_the_cases_at_the_ops_default_dtype",
            body: dtypes_admit_the_cases_at_the_ops_default_dtype,
            missing: no_python.clone(),
        },
        trials::Test {
            name: "explain_prints_the_ledgers_claim_text",
            body: explain_prints_the_ledgers_claim_text,
            missing: None,
        },
        trials::Test {
            name: "the_main_job_says_it_verified_golden",
            body: the_main_job_says_it_verified_golden,
            missing: None,
        },
        trials::Test {
            name: "a_workers_children_end_with_it",
            body: a_workers_children_end_with_it,
            missing: no_python.clone(),
        },
    ];
    macro_rules! matrix {
        ($($name:ident: $cmd:expr, $fault:expr;)*) => {
            $(
                fn $name() {
                    check($cmd, $fault)
                }
                let fault: Fault = $fault;
                let cmd: Long = $cmd;
                let missing = if fault == Fault::StderrFull {
                    not_root.clone()
                } else if cmd.hangs() || cmd == Long::Validate {
                    no_python.clone()
                } else {
                    None
                };
                tests.push(trials::Test {
                    name: concat!("matrix::", stringify!($name)),
                    body: $name,
                    missing,
                });
            )*
        };
    }
    use Fault::*;
    use Long::*;
    const INT: Fault = Signal(libc::SIGINT);
    const TERM: Fault = Signal(libc::SIGTERM);
    const KILL: Fault = Signal(libc::SIGKILL);
    matrix! {
        run_broken_pipe: Run, BrokenPipe;
        run_stderr_closed: Run, StderrClosed;
        run_stderr_full: Run, StderrFull;
        run_sigint: Run, INT;
        run_sigterm: Run, TERM;
        run_sigkill: Run, KILL;
        validate_broken_pipe: Validate, BrokenPipe;
        validate_stderr_closed: Validate, StderrClosed;
        validate_stderr_full: Validate, StderrFull;
        validate_sigint: Validate, INT;
        validate_sigterm: Validate, TERM;
        validate_sigkill: Validate, KILL;
        adequacy_broken_pipe: Adequacy, BrokenPipe;
        adequacy_stderr_closed: Adequacy, StderrClosed;
        adequacy_stderr_full: Adequacy, StderrFull;
        adequacy_sigint: Adequacy, INT;
        adequacy_sigterm: Adequacy, TERM;
        adequacy_sigkill: Adequacy, KILL;
        golden_verify_broken_pipe: GoldenVerify, BrokenPipe;
        golden_verify_stderr_closed: GoldenVerify, StderrClosed;
        golden_verify_stderr_full: GoldenVerify, StderrFull;
        golden_verify_sigint: GoldenVerify, INT;
        golden_verify_sigterm: GoldenVerify, TERM;
        golden_verify_sigkill: GoldenVerify, KILL;
        perf_record_broken_pipe: PerfRecord, BrokenPipe;
        perf_record_stderr_closed: PerfRecord, StderrClosed;
        perf_record_stderr_full: PerfRecord, StderrFull;
        perf_record_sigint: PerfRecord, INT;
        perf_record_sigterm: PerfRecord, TERM;
        perf_record_sigkill: PerfRecord, KILL;
        nightly_broken_pipe: Nightly, BrokenPipe;
        nightly_stderr_closed: Nightly, StderrClosed;
        nightly_stderr_full: Nightly, StderrFull;
        nightly_sigint: Nightly, INT;
        nightly_sigterm: Nightly, TERM;
        nightly_sigkill: Nightly, KILL;
    }
    trials::run(tests)
}
