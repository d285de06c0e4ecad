//! What this process has started and must clean up however it ends: the process groups of
//! live workers and the scratch directories of requests in flight.
//!
//! An interrupted run (SIGINT/SIGTERM) calls [`kill_all_workers`] from a watcher thread, so a
//! worker that hangs is killed at once (with its children, through its process group) instead
//! of being orphaned; the request waiting on it then returns and its scratch directory is
//! removed as the stack unwinds normally. Scratch directories carry the creating process id in
//! their name (`conform-case-<pid>-...`), so [`clean_stale_scratch`] can remove what a run
//! killed with SIGKILL left behind.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;

static LIVE_GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Records a started worker (its process group id equals its pid: it calls setpgid(0, 0)).
pub(crate) fn register(pid: u32) {
    if let Ok(mut g) = LIVE_GROUPS.lock() {
        g.insert(pid as i32);
    }
}

/// Forgets a worker that was killed or reaped.
pub(crate) fn unregister(pid: u32) {
    if let Ok(mut g) = LIVE_GROUPS.lock() {
        g.remove(&(pid as i32));
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
