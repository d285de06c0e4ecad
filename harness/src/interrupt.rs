//! SIGINT / SIGTERM during a run: the signal handler only records the signal; a watcher thread
//! kills every live worker's process group at once (a hanging worker is not waited for, nor
//! orphaned); the runner stops starting cases, and the command writes the results of the cases
//! that finished, marked interrupted, then exits 130 / 143. A second signal ends the process
//! at once (the handler is installed with SA_RESETHAND).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

static RECEIVED: AtomicI32 = AtomicI32::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    RECEIVED.store(sig, Ordering::SeqCst);
}

/// Installs the handlers and starts the watcher thread (once per process).
pub fn install() {
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    #[cfg(unix)]
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a handler that performs one atomic store, an empty
        // mask and SA_RESETHAND; sigaction is called before any worker exists.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    let _ = std::thread::Builder::new()
        .name("interrupt-watcher".into())
        .spawn(|| loop {
            if received().is_some() {
                // Keep killing: a request in flight may restart its worker once more.
                conform_targets::worker::live::kill_all_workers();
            }
            std::thread::sleep(Duration::from_millis(20));
        });
}

/// The signal received, if any.
pub fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The signal's name, for the results file.
pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        s => format!("signal {s}"),
    }
}

/// The documented exit code of an interrupted command.
pub fn exit_code(sig: i32) -> i32 {
    match sig {
        libc::SIGTERM => crate::exit_code::INTERRUPTED_SIGTERM,
        libc::SIGINT => crate::exit_code::INTERRUPTED_SIGINT,
        s => 128 + s,
    }
}
