//! The `conform` binary: parse arguments, run the command, exit with its documented code.
//! Errors reach here as `anyhow` values only at this edge.

use clap::Parser;
use conform_harness::{cli, exit_code, messages};

fn main() {
    // Die quietly of SIGPIPE like any Unix filter (`conform list | head -1`) instead of
    // panicking in println! on the broken pipe.
    // SAFETY: restoring the default disposition of SIGPIPE at start-up, before any thread
    // exists; no handler is installed.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args = cli::Cli::parse();
    let code = match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", messages::error_line(&format!("{e:#}")));
            exit_code::USAGE
        }
    };
    std::process::exit(code);
}
