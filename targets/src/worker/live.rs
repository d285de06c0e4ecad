//! What this process has started and must clean up however it ends: the process groups of
//! live workers and the scratch directories of requests in flight.
//!
//! An interrupted run (SIGINT/SIGTERM) calls [`kill_all_workers`] from a watcher thread, so a
//! worker that hangs is killed at once (with its children, through its process group) instead
//! of being orphaned; the request waiting on it then returns and its scratch directory is
//! removed as the stack unwinds normally. Scratch directories carry the creating process id in
//! their name (`conform-case-<pid>-...`), so [`clean_stale_scratch`] can remove what a run
//! killed with SIGKILL left behind.
//!
//! SIGKILL cannot be caught, so what kills the workers then is a *guardian*: a small `sh`
//! process started with the first worker, in its own process group, that reads the worker
//! groups this process registers (`+PGID`) and forgets (`-PGID`) from a pipe whose only
//! writer is this process. When this process ends, however it ends, the kernel closes that
//! pipe; the guardian reads end-of-file and sends SIGKILL to every group still registered,
//! then exits. (A parent-death signal set in the worker would not do: conform starts workers
//! from threads that end, and the signal fires when the starting *thread* ends; nor would it
//! reach the worker's own children.) A worker started in the instant before its group is
//! registered, or one that leaves its process group, is not covered.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;

static LIVE_GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// The guardian's stdin (None until the first worker, or when it could not be started).
static GUARDIAN: Mutex<Option<Guardian>> = Mutex::new(None);

struct Guardian {
    stdin: std::process::ChildStdin,
    pid: u32,
}

/// The guardian's script: keep the registered groups; at end-of-file kill those left.
const GUARDIAN_SCRIPT: &str = r#"g=""
while IFS= read -r l; do
  case "$l" in
    +*) g="$g ${l#+}" ;;
    -*) n=""; for p in $g; do [ "$p" = "${l#-}" ] || n="$n $p"; done; g="$n" ;;
  esac
done
for p in $g; do kill -9 "-$p" 2>/dev/null; done
"#;

/// Tells the guardian (started on first use) a line; a guardian that cannot be started or has
/// died is dropped silently: the run goes on, only the SIGKILL cover is lost.
fn tell_guardian(line: &str) {
    use std::io::Write;
    let Ok(mut g) = GUARDIAN.lock() else {
        return;
    };
    if g.is_none() {
        *g = start_guardian();
    }
    let ok = g.as_mut().is_some_and(|gd| {
        gd.stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| gd.stdin.flush())
            .is_ok()
    });
    if !ok {
        *g = None;
    }
}

#[cfg(unix)]
fn start_guardian() -> Option<Guardian> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let mut cmd = Command::new("sh");
    cmd.args(["-c", GUARDIAN_SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only setpgid between fork and exec (async-signal-safe). Its own group keeps a
    // terminal's Ctrl-C (sent to conform's group) from ending it before conform.
    unsafe {
        cmd.pre_exec(|| {
            libc::setpgid(0, 0);
            Ok(())
        });
    }
    let mut child = cmd.spawn().ok()?;
    let stdin = child.stdin.take()?;
    let pid = child.id();
    // Reap it when it exits (at the end of this process it is adopted and reaped by init).
    let _ = std::thread::Builder::new()
        .name("worker-guardian".into())
        .spawn(move || {
            let _ = child.wait();
        });
    Some(Guardian { stdin, pid })
}

#[cfg(not(unix))]
fn start_guardian() -> Option<Guardian> {
    None
}

/// The guardian's process id, once a worker has been started (for tests).
pub fn guardian_pid() -> Option<u32> {
    GUARDIAN.lock().ok()?.as_ref().map(|g| g.pid)
}

/// Records a started worker (its process group id equals its pid: it calls setpgid(0, 0)).
pub(crate) fn register(pid: u32) {
    if let Ok(mut g) = LIVE_GROUPS.lock() {
        g.insert(pid as i32);
    }
    tell_guardian(&format!("+{pid}"));
}

/// Forgets a worker that was killed or reaped.
pub(crate) fn unregister(pid: u32) {
    let known = LIVE_GROUPS
        .lock()
        .map(|mut g| g.remove(&(pid as i32)))
        .unwrap_or(false);
    if known {
        tell_guardian(&format!("-{pid}"));
    }
}

/// How many workers this process has running.
pub fn live_workers() -> usize {
    LIVE_GROUPS.lock().map(|g| g.len()).unwrap_or(0)
}

/// Sends SIGKILL to the process group of every live worker (the owners reap them).
pub fn kill_all_workers() {
    let groups: Vec<i32> = match LIVE_GROUPS.lock() {
        Ok(g) => g.iter().copied().collect(),
        Err(_) => return,
    };
    #[cfg(unix)]
    for pid in groups {
        // SAFETY: plain syscall on a process group this process created (setpgid in
        // pre_exec); a group that has already gone gives ESRCH, which is harmless.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    #[cfg(not(unix))]
    let _ = groups;
}

/// The scratch-directory prefix of this process: `conform-case-<pid>-`.
pub fn scratch_prefix() -> String {
    format!("conform-case-{}-", std::process::id())
}

/// Removes scratch directories under `root` left by conform processes that no longer exist
/// (named `conform-case-<pid>-...` with a dead pid). Returns how many were removed.
pub fn clean_stale_scratch(root: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("conform-case-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if pid != std::process::id() as i32
            && !process_exists(pid)
            && std::fs::remove_dir_all(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

#[cfg(unix)]
fn process_exists(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(not(unix))]
fn process_exists(_pid: i32) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn the_guardian_kills_registered_groups_when_its_pipe_closes_and_spares_forgotten_ones() {
        use std::os::unix::process::CommandExt;
        let start = |secs: &str| {
            let mut c = std::process::Command::new("sleep");
            c.arg(secs);
            // SAFETY: setpgid only, between fork and exec.
            unsafe {
                c.pre_exec(|| {
                    libc::setpgid(0, 0);
                    Ok(())
                });
            }
            c.spawn().unwrap()
        };
        let mut kept = start("30");
        let mut forgotten = start("30");
        let mut g = start_guardian().expect("sh starts");
        use std::io::Write;
        writeln!(g.stdin, "+{}", kept.id()).unwrap();
        writeln!(g.stdin, "+{}", forgotten.id()).unwrap();
        writeln!(g.stdin, "-{}", forgotten.id()).unwrap();
        drop(g.stdin); // what the kernel does when this process dies
        use wait_timeout::ChildExt;
        let st = kept
            .wait_timeout(std::time::Duration::from_secs(10))
            .unwrap()
            .expect("the registered group was killed");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(st.signal(), Some(libc::SIGKILL));
        assert!(
            forgotten.try_wait().unwrap().is_none(),
            "a forgotten group was killed"
        );
        forgotten.kill().unwrap();
        forgotten.wait().unwrap();
    }

    #[test]
    fn stale_scratch_of_dead_processes_is_removed_and_live_ones_kept() {
        let root = tempfile::tempdir().unwrap();
        // A pid that cannot exist (above the kernel's pid_max).
        let dead = root.path().join("conform-case-2147483646-abc");
        let mine = root.path().join(format!("{}x", scratch_prefix()));
        let other = root.path().join("unrelated");
        for d in [&dead, &mine, &other] {
            std::fs::create_dir_all(d.join("inner")).unwrap();
        }
        assert_eq!(clean_stale_scratch(root.path()), 1);
        assert!(!dead.exists() && mine.exists() && other.exists());
    }
}
