//! Printing that never stops a command: every line conform prints goes through [`outln!`] /
//! [`errln!`] (and [`out!`] for text without a newline), which ignore write errors.
//!
//! A closed, broken or full stderr (`2>&1 | head -1`, `2>/dev/full`, `2>&-`) must not end a
//! run with a panic (exit 101) before its results are written; progress and messages are only
//! lost. A stdout whose reader went away (`conform list | head -1`) is remembered, nothing more
//! is printed to it, and the command goes on to write its files: the commands whose output *is*
//! stdout then exit 141 (see `main.rs`), the long ones with their own code.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout, ignoring errors (a broken pipe is remembered and ends printing).
pub fn out(text: std::fmt::Arguments<'_>) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    let r = o.write_fmt(text).and_then(|()| o.flush());
    if let Err(e) = r
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Writes `text` to stderr, ignoring every error.
pub fn err(text: std::fmt::Arguments<'_>) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_fmt(text);
    let _ = e.flush();
}

/// Whether a write to stdout found its reader gone.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// Makes sure descriptors 0, 1 and 2 are open (on `/dev/null` when the caller closed them:
/// `conform run >&-`). Otherwise the first file conform opens would get descriptor 1 or 2, and
/// every message would be written into it (a results journal, say).
pub fn ensure_standard_fds() {
    #[cfg(unix)]
    for fd in 0..=2 {
        // SAFETY: F_GETFD only queries the descriptor; open(2) with a static C string.
        unsafe {
            if libc::fcntl(fd, libc::F_GETFD) == -1 {
                let flags = if fd == 0 {
                    libc::O_RDONLY
                } else {
                    libc::O_WRONLY
                };
                let got = libc::open(c"/dev/null".as_ptr(), flags);
                if got >= 0 && got != fd {
                    libc::dup2(got, fd);
                    libc::close(got);
                }
            }
        }
    }
}

/// `println!` that never panics: see the module documentation.
#[macro_export]
macro_rules! outln {
    () => { $crate::console::out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::console::out(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` that never panics.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::console::out(format_args!($($arg)*)) };
}

/// `eprintln!` that never panics: a closed, broken or full stderr only loses the line.
#[macro_export]
macro_rules! errln {
    () => { $crate::console::err(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::console::err(format_args!("{}\n", format_args!($($arg)*))) };
}
