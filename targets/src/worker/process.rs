//! A worker process: spawn it, exchange JSON lines, capture stderr, kill it.
//!
//! Every wait has a timeout: stdout is read by a thread that sends complete lines over a
//! channel, so the harness waits on `recv_timeout`. stderr is drained by a second thread into
//! a bounded ring buffer (the tail goes into the case's report). The worker runs in its own
//! process group, so killing it also kills what it started (e.g. torchrun's ranks). Resource
//! limits (RLIMIT_AS, RLIMIT_CPU) are applied between fork and exec on Unix.

use super::config::ResolvedConfig;
use crate::target::ExitReason;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest protocol line accepted (data travels in files, not on the pipe).
pub const MAX_LINE_BYTES: usize = 4 << 20;
/// How much stderr is kept.
pub const STDERR_RING_BYTES: usize = 64 << 10;
/// How much stderr a report shows.
pub const STDERR_TAIL_BYTES: usize = 4 << 10;

/// What reading the worker's stdout produced.
#[derive(Debug, PartialEq)]
pub enum Received {
    Line(String),
    /// A line longer than [`MAX_LINE_BYTES`] (the rest of the stream is abandoned).
    TooLong,
    /// Not valid UTF-8.
    NotUtf8,
    /// stdout closed (the worker exited or closed it).
    Closed,
    /// Nothing within the timeout.
    Timeout,
}

enum Event {
    Line(String),
    TooLong,
    NotUtf8,
    Closed,
}

/// Captured stderr: the last [`STDERR_RING_BYTES`] bytes and a running total.
#[derive(Default)]
struct Ring {
    bytes: VecDeque<u8>,
    total: u64,
}

/// A shared handle to a worker's stderr capture.
#[derive(Clone, Default)]
pub struct StderrCapture(Arc<Mutex<Ring>>);

impl StderrCapture {
    fn push(&self, chunk: &[u8]) {
        let mut r = self.0.lock().unwrap_or_else(|e| e.into_inner());
        r.total += chunk.len() as u64;
        r.bytes.extend(chunk);
        let excess = r.bytes.len().saturating_sub(STDERR_RING_BYTES);
        r.bytes.drain(..excess);
    }

    /// The byte count so far; pass it to [`StderrCapture::tail_since`] later.
    pub fn mark(&self) -> u64 {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    /// What was written after `mark` (at most [`STDERR_TAIL_BYTES`], the last ones, starting
    /// at a line boundary when cut), as lossy UTF-8.
    pub fn tail_since(&self, mark: u64) -> String {
        let r = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let new = (r.total.saturating_sub(mark)).min(r.bytes.len() as u64) as usize;
        let take = new.min(STDERR_TAIL_BYTES);
        let start = r.bytes.len() - take;
        let v: Vec<u8> = r.bytes.iter().skip(start).copied().collect();
        let mut s = String::from_utf8_lossy(&v).into_owned();
        if take < new {
            if let Some(i) = s.find('\n') {
                s.drain(..=i);
            }
            s.insert_str(0, "[...]\n");
        }
        s
    }
}

/// A running worker.
pub struct WorkerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Event>,
    stderr: StderrCapture,
    stderr_closed: Arc<std::sync::atomic::AtomicBool>,
    exited: Option<ExitReason>,
}

fn read_lines<R: Read>(out: R, tx: mpsc::Sender<Event>) {
    let mut reader = BufReader::with_capacity(64 << 10, out);
    let mut line: Vec<u8> = Vec::new();
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if buf.is_empty() {
            break;
        }
        let (used, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                line.extend_from_slice(&buf[..i]);
                (i + 1, true)
            }
            None => {
                line.extend_from_slice(buf);
                (buf.len(), false)
            }
        };
        reader.consume(used);
        if line.len() > MAX_LINE_BYTES {
            let _ = tx.send(Event::TooLong);
            return;
        }
        if done {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let ev = match String::from_utf8(std::mem::take(&mut line)) {
                Ok(s) => Event::Line(s),
                Err(_) => Event::NotUtf8,
            };
            if tx.send(ev).is_err() {
                return;
            }
        }
    }
    let _ = tx.send(Event::Closed);
}

#[cfg(unix)]
fn apply_limits(cmd: &mut Command, cfg: &ResolvedConfig) {
    use std::os::unix::process::CommandExt;
    let address_space = cfg
        .limits
        .address_space_mb
        .map(|mb| mb.saturating_mul(1 << 20));
    let cpu = cfg.limits.cpu_s;
    // SAFETY: between fork and exec only async-signal-safe calls are made (setpgid,
    // setrlimit), with no allocation.
    unsafe {
        cmd.pre_exec(move || {
            // Own process group, so a kill reaches the worker's children too.
            libc::setpgid(0, 0);
            if let Some(bytes) = address_space {
                let lim = libc::rlimit {
                    rlim_cur: bytes as libc::rlim_t,
                    rlim_max: bytes as libc::rlim_t,
                };
                libc::setrlimit(libc::RLIMIT_AS, &lim);
            }
            if let Some(secs) = cpu {
                let lim = libc::rlimit {
                    rlim_cur: secs as libc::rlim_t,
                    rlim_max: secs.saturating_add(5) as libc::rlim_t,
                };
                libc::setrlimit(libc::RLIMIT_CPU, &lim);
            }
            Ok(())
        });
    }
}

#[cfg(not(unix))]
fn apply_limits(_cmd: &mut Command, _cfg: &ResolvedConfig) {}

fn exit_reason(status: std::process::ExitStatus) -> ExitReason {
    if let Some(c) = status.code() {
        return ExitReason::Code(c);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(s) = status.signal() {
            return ExitReason::Signal(s);
        }
    }
    ExitReason::Unknown
}

/// Sends SIGKILL to the process group `pid` leads (the worker's: set up in `pre_exec`).
fn kill_group(pid: u32) {
    #[cfg(unix)]
    // SAFETY: plain syscall; the group was created by setpgid in pre_exec. After the leader
    // has been reaped its number stays reserved while any member of the group lives, so the
    // signal reaches only what the worker started (or nothing: ESRCH).
    unsafe {
        libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
    }
    #[cfg(not(unix))]
    let _ = pid;
}

/// The end of a worker, however it ended (its own exit, a crash, a kill): every process left
/// in its group is killed, and the group is no longer the guardian's to kill.
fn end_group(pid: u32) {
    kill_group(pid);
    super::live::unregister(pid);
}

/// The variable every worker process is started with, holding [`layout_pad`]'s text.
pub const LAYOUT_PAD_VAR: &str = "CONFORM_LAYOUT_PAD";

/// A run of `x` of random length, 0 to 4095 bytes, drawn afresh for each process. The size of
/// a process's environment moves where its stack starts, and with it the alignment of what
/// the kernel keeps there: two copies of one build started from different paths were timed
/// up to 1.4x apart, consistently over every round of fresh processes, by the same-night
/// control (a known bias of measurement: Mytkowicz, Diwan, Hauswirth and Sweeney, ASPLOS
/// 2009). Padded at random, that layout is drawn anew for every process, so it varies from
/// round to round like any placement, and the rounds' paired ratios average over it instead
/// of taking one layout for a change.
pub fn layout_pad() -> String {
    use std::hash::{BuildHasher, Hasher};
    // A fresh RandomState is keyed from the process's random seed and a per-use counter.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    "x".repeat((h.finish() % 4096) as usize)
}

impl WorkerProcess {
    /// Starts the worker.
    pub fn spawn(cfg: &ResolvedConfig) -> std::io::Result<WorkerProcess> {
        let mut cmd = Command::new(&cfg.command);
        cmd.args(&cfg.args)
            .envs(&cfg.env)
            .env(LAYOUT_PAD_VAR, layout_pad())
            .current_dir(&cfg.working_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        apply_limits(&mut cmd, cfg);
        let mut child = cmd.spawn()?;
        super::live::register(child.id());
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("worker-stdout".into())
            .spawn(move || read_lines(stdout, tx))?;
        let capture = StderrCapture::default();
        let sink = capture.clone();
        let stderr_closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let closed = stderr_closed.clone();
        std::thread::Builder::new()
            .name("worker-stderr".into())
            .spawn(move || {
                let mut stderr = stderr;
                let mut buf = [0u8; 8192];
                loop {
                    match stderr.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => sink.push(&buf[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                closed.store(true, std::sync::atomic::Ordering::Release);
            })?;
        Ok(WorkerProcess {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            stderr: capture,
            stderr_closed,
            exited: None,
        })
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The stderr capture.
    pub fn stderr(&self) -> &StderrCapture {
        &self.stderr
    }

    /// Waits up to `timeout` for stderr to close (after an exit, so the tail is complete).
    pub fn wait_stderr_closed(&self, timeout: Duration) {
        let start = std::time::Instant::now();
        while !self
            .stderr_closed
            .load(std::sync::atomic::Ordering::Acquire)
            && start.elapsed() < timeout
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Writes one JSON line to the worker's stdin.
    pub fn send_line(&mut self, line: &str) -> std::io::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdin closed"))?;
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        stdin.write_all(&buf)?;
        stdin.flush()
    }

    /// Waits up to `timeout` for the next line.
    pub fn recv(&mut self, timeout: Duration) -> Received {
        match self.lines.recv_timeout(timeout) {
            Ok(Event::Line(s)) => Received::Line(s),
            Ok(Event::TooLong) => Received::TooLong,
            Ok(Event::NotUtf8) => Received::NotUtf8,
            Ok(Event::Closed) | Err(RecvTimeoutError::Disconnected) => Received::Closed,
            Err(RecvTimeoutError::Timeout) => Received::Timeout,
        }
    }

    /// Waits up to `timeout` for the process to exit, and says how it ended (Unknown if it
    /// is still running).
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitReason {
        if let Some(r) = &self.exited {
            return r.clone();
        }
        use wait_timeout::ChildExt;
        match self.child.wait_timeout(timeout) {
            Ok(Some(status)) => {
                let r = exit_reason(status);
                self.exited = Some(r.clone());
                // The worker is gone; what it started goes with it (a helper it left running
                // would outlive conform, and on a device host hold the device).
                end_group(self.child.id());
                r
            }
            _ => ExitReason::Unknown,
        }
    }

    /// Kills the worker and its process group, and reaps it. A worker that has already exited
    /// had its group killed when it was reaped ([`WorkerProcess::wait_exit`]).
    pub fn kill(&mut self) {
        if self.exited.is_some() {
            return;
        }
        self.stdin = None;
        kill_group(self.child.id());
        let _ = self.child.kill();
        if let Ok(status) = self.child.wait() {
            self.exited = Some(exit_reason(status));
        }
        end_group(self.child.id());
    }

    /// Asks the worker to exit (closing stdin after `shutdown_line`), waits up to `grace`,
    /// then kills it.
    pub fn shutdown(&mut self, shutdown_line: &str, grace: Duration) {
        let _ = self.send_line(shutdown_line);
        self.stdin = None;
        if self.wait_exit(grace) == ExitReason::Unknown && self.exited.is_none() {
            self.kill();
        }
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::config::{Limits, Timeouts};
    use std::collections::BTreeMap;

    #[test]
    fn every_process_gets_a_layout_pad_of_its_own_length() {
        let lengths: std::collections::BTreeSet<usize> =
            (0..64).map(|_| layout_pad().len()).collect();
        assert!(lengths.iter().all(|&n| n < 4096), "{lengths:?}");
        // 64 draws from 4096 lengths: all equal only if the draw were fixed.
        assert!(lengths.len() > 32, "{lengths:?}");
        let pad = layout_pad();
        assert!(pad.bytes().all(|b| b == b'x'));
    }

    fn sh(script: &str) -> ResolvedConfig {
        ResolvedConfig {
            description: String::new(),
            command: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: BTreeMap::new(),
            working_dir: std::env::temp_dir(),
            device_group: "cpu".into(),
            timeouts: Timeouts::default(),
            limits: Limits::default(),
            nondeterministic: None,
        }
    }

    #[test]
    fn lines_timeouts_and_exit_codes() {
        let mut p =
            WorkerProcess::spawn(&sh("read x; echo \"got $x\"; echo oops >&2; exit 3")).unwrap();
        let mark = p.stderr().mark();
        p.send_line("hello").unwrap();
        assert_eq!(
            p.recv(Duration::from_secs(5)),
            Received::Line("got hello".into())
        );
        assert_eq!(p.recv(Duration::from_secs(5)), Received::Closed);
        assert_eq!(p.wait_exit(Duration::from_secs(5)), ExitReason::Code(3));
        // stderr is read by its own thread; give it a moment.
        for _ in 0..50 {
            if p.stderr().tail_since(mark).contains("oops") {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(p.stderr().tail_since(mark), "oops\n");
    }

    #[test]
    fn silent_worker_times_out_and_is_killed_with_its_children() {
        let mut p = WorkerProcess::spawn(&sh("sleep 30 & sleep 30")).unwrap();
        let t = std::time::Instant::now();
        assert_eq!(p.recv(Duration::from_millis(200)), Received::Timeout);
        p.kill();
        assert_eq!(p.wait_exit(Duration::from_secs(1)), ExitReason::Signal(9));
        // The background sleep held stdout open too; killing the group closes it.
        assert_eq!(p.recv(Duration::from_secs(5)), Received::Closed);
        assert!(t.elapsed() < Duration::from_secs(10));
    }

    /// Whether process `pid` is alive (not gone, not a zombie).
    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
    }

    /// A worker that leaves a child behind and exits by itself (`exit 0`: its normal end, or
    /// `kill -SEGV $$`: a crash) takes the child with it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_left_behind_dies_with_its_worker_however_it_exits() {
        for (end, reason) in [
            ("exit 0", ExitReason::Code(0)),
            ("kill -SEGV $$", ExitReason::Signal(libc::SIGSEGV)),
        ] {
            // The child's stdout is not the worker's pipe, so the pipe closes when the worker
            // exits (as a helper daemon's would).
            let mut p = WorkerProcess::spawn(&sh(&format!(
                "sleep 300 >/dev/null 2>&1 </dev/null & echo $!; read x; {end}"
            )))
            .unwrap();
            let Received::Line(child) = p.recv(Duration::from_secs(10)) else {
                panic!("no child pid");
            };
            let child: i32 = child.trim().parse().unwrap();
            assert!(alive(child));
            p.send_line("go").unwrap();
            assert_eq!(p.recv(Duration::from_secs(10)), Received::Closed, "{end}");
            assert_eq!(p.wait_exit(Duration::from_secs(10)), reason, "{end}");
            let t = std::time::Instant::now();
            while alive(child) && t.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(
                !alive(child),
                "{end}: the worker's child {child} outlived it"
            );
        }
    }

    #[test]
    fn stderr_ring_is_bounded() {
        let c = StderrCapture::default();
        let m = c.mark();
        for i in 0..20000 {
            c.push(format!("line {i}\n").as_bytes());
        }
        let t = c.tail_since(m);
        assert!(t.len() <= STDERR_TAIL_BYTES + 8);
        assert!(t.starts_with("[...]\nline "), "{}", &t[..20]);
        assert!(t.ends_with("line 19999\n"));
        assert_eq!(c.tail_since(c.mark()), "");
    }

    #[test]
    fn overlong_lines_are_refused() {
        let mut p = WorkerProcess::spawn(&sh("head -c 5000000 /dev/zero | tr '\\0' x")).unwrap();
        assert_eq!(p.recv(Duration::from_secs(10)), Received::TooLong);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn address_space_limit_applies() {
        let mut cfg = sh("ulimit -v");
        cfg.limits.address_space_mb = Some(512);
        let mut p = WorkerProcess::spawn(&cfg).unwrap();
        assert_eq!(
            p.recv(Duration::from_secs(5)),
            Received::Line((512 * 1024).to_string())
        );
    }
}
