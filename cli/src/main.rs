//! The `conform` binary: parse arguments, run the command, exit with its documented code.
//! Errors reach here as `cli::error::CliError` values, printed and mapped to their documented
//! exit code in one place (`cli::error::report`).

use clap::Parser;
use conform_cli as cli;
use conform_harness::{console, exit_code};

/// Whether a panic is `println!` failing on a closed stdout (`conform list | head -1`).
fn is_broken_stdout(payload: &(dyn std::any::Any + Send)) -> bool {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    text.contains("failed printing to stdout") && text.contains("Broken pipe")
}

fn main() {
    // SIGPIPE stays ignored (a worker that dies mid-request must give EPIPE, not kill us), so
    // a reader that closes our stdout early makes println! panic: end quietly, like a Unix
    // filter killed by SIGPIPE (exit 141), instead of printing a panic and exiting 101.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_broken_stdout(info.payload()) {
            default_hook(info);
        }
    }));
    conform_harness::console::ensure_standard_fds();
    // A script that sets CONFORM_PARENT_PID=$$ (ci/nightly-perf.sh) takes conform with it when
    // it is killed, SIGKILL included.
    conform_harness::interrupt::die_with_parent_from_env();
    let parsed = cli::Cli::parse();
    let prints_to_stdout = parsed.command.output_is_stdout();
    let code = match std::panic::catch_unwind(|| cli::run(parsed)) {
        // A command whose output is stdout ends like a filter whose reader went away; the long
        // commands (run, validate, ...) wrote their files and keep their own code.
        Ok(Ok(_)) if prints_to_stdout && console::stdout_closed() => exit_code::BROKEN_PIPE,
        Ok(Ok(code)) => code,
        Ok(Err(e)) => cli::error::report(&e),
        Err(p) if is_broken_stdout(&*p) => exit_code::BROKEN_PIPE,
        Err(p) => std::panic::resume_unwind(p),
    };
    std::process::exit(code);
}
