//! SIGINT / SIGTERM during a run: the signal handler only records the signal; a watcher thread
//! then cancels the reference computations under way ([`cancel_token`]: the in-process
//! reference stops at its next task, within a second), kills every live worker's process group
//! at once (a hanging worker is not waited for, nor orphaned); the runner stops starting cases,
//! and the command writes the results of the cases that finished, marked interrupted, then
//! exits 130 / 143.
//!
//! A second signal does not wait for that: the watcher writes what the run has (the results
//! recovered from its journal, through the command's [`set_last_resort`] writer) and exits
//! with the first signal's code. When the command is already writing its own outputs
//! ([`writing_outputs`]) those are let finish instead, so no file is written twice at once.

use conform_reference::cancel::CancelToken;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

static RECEIVED: AtomicI32 = AtomicI32::new(0);
static COUNT: AtomicUsize = AtomicUsize::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only atomic operations: async-signal-safe. The first signal names the interrupt.
    let _ = RECEIVED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    COUNT.fetch_add(1, Ordering::SeqCst);
}

/// The token the reference computations of this process run under (set by the watcher once a
/// signal came).
pub fn cancel_token() -> &'static CancelToken {
    static TOKEN: OnceLock<CancelToken> = OnceLock::new();
    TOKEN.get_or_init(CancelToken::new)
}

/// What a second signal writes before conform exits.
type LastResort = Box<dyn FnOnce(i32) + Send>;

/// The outputs' state: whether the command has written them (then a second signal only exits),
/// and the writer of last resort a second signal runs when it has not.
struct Outputs {
    written: bool,
    last_resort: Option<LastResort>,
}

static OUTPUTS: Mutex<Outputs> = Mutex::new(Outputs {
    written: false,
    last_resort: None,
});

fn outputs() -> std::sync::MutexGuard<'static, Outputs> {
    OUTPUTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets what a second signal writes (given the first signal's number) when the command has not
/// written its outputs yet: typically the results recovered from the run's journal.
pub fn set_last_resort(write: impl FnOnce(i32) + Send + 'static) {
    outputs().last_resort = Some(Box::new(write));
}

/// Runs `write` (the command writing its own outputs) so that a second signal coming
/// meanwhile waits for it to finish rather than writing the same files at the same time.
pub fn writing_outputs<R>(write: impl FnOnce() -> R) -> R {
    let mut o = outputs();
    let r = write();
    o.written = true;
    o.last_resort = None;
    r
}

/// Installs the handlers and starts the watcher thread (once per process).
pub fn install() {
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    #[cfg(unix)]
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a handler that performs two atomic operations and an
        // empty mask; sigaction is called before any worker exists.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = 0;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    let _ = std::thread::Builder::new()
        .name("interrupt-watcher".into())
        .spawn(|| loop {
            if let Some(sig) = received() {
                cancel_token().cancel();
                // Keep killing: a request in flight may restart its worker once more.
                conform_targets::worker::live::kill_all_workers();
                if COUNT.load(Ordering::SeqCst) >= 2 {
                    second_signal(sig);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        });
}

/// The second signal: write what the run has (unless the command has written or is writing
/// its outputs: this waits for them) and exit with the first signal's code.
/// A writer the command has under way is waited for up to [`SECOND_SIGNAL_WAIT`] (an output
/// that blocks, such as a FIFO nobody reads, does not hold the exit).
fn second_signal(sig: i32) -> ! {
    let start = std::time::Instant::now();
    let guard = loop {
        match OUTPUTS.try_lock() {
            Ok(g) => break Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => break Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if start.elapsed() < SECOND_SIGNAL_WAIT => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(std::sync::TryLockError::WouldBlock) => break None,
        }
    };
    if let Some(mut o) = guard
        && !o.written
        && let Some(write) = o.last_resort.take()
    {
        crate::errln!("{}", crate::messages::second_signal());
        write(sig);
    }
    conform_targets::worker::live::kill_all_workers();
    std::process::exit(exit_code(sig))
}

/// How long a second signal waits for outputs the command is writing.
const SECOND_SIGNAL_WAIT: Duration = Duration::from_secs(5);

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

/// The variable a launching script sets to its own process id (`CONFORM_PARENT_PID=$$`) so
/// that conform ends with it: ci/nightly-perf.sh does, because SIGKILL of a script cannot be
/// trapped and would otherwise orphan the conform it runs.
pub const PARENT_PID_VAR: &str = "CONFORM_PARENT_PID";

/// Honours [`PARENT_PID_VAR`]; called first thing in `main`, before any thread exists. When
/// the named process is conform's parent, the kernel is asked to send conform SIGTERM when
/// that parent dies (PR_SET_PDEATHSIG; Linux), which conform handles as any SIGTERM: workers
/// killed, the results of what finished written, exit 143. A parent already gone by then (the
/// race between fork and this call) ends conform at once with 143. A process that is not
/// conform's parent (conform started by a program the script started) leaves it as it is.
/// The variable is removed from the environment, so the workers conform starts do not see it.
pub fn die_with_parent_from_env() {
    let Some(value) = std::env::var_os(PARENT_PID_VAR) else {
        return;
    };
    // SAFETY: called at the start of main, before any other thread exists.
    unsafe { std::env::remove_var(PARENT_PID_VAR) };
    let Some(pid) = value.to_str().and_then(|v| v.trim().parse::<i32>().ok()) else {
        crate::errln!(
            "{}",
            crate::messages::error_line(&format!(
                "{PARENT_PID_VAR}={}: not a process id; ignored",
                value.to_string_lossy()
            ))
        );
        return;
    };
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getppid, kill(pid, 0) and prctl(PR_SET_PDEATHSIG) have no memory effects.
        let (parent, alive) = unsafe {
            (
                libc::getppid(),
                libc::kill(pid, 0) == 0
                    || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM),
            )
        };
        if parent != pid {
            if alive || pid <= 1 {
                return;
            }
            crate::errln!("{}", crate::messages::parent_gone(pid));
            std::process::exit(crate::exit_code::INTERRUPTED_SIGTERM);
        }
        // SAFETY: as above.
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            );
        }
        // The parent may have died between getppid and prctl: then no signal will come.
        // SAFETY: as above.
        if unsafe { libc::getppid() } != pid {
            crate::errln!("{}", crate::messages::parent_gone(pid));
            std::process::exit(crate::exit_code::INTERRUPTED_SIGTERM);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = pid;
}
