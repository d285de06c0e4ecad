//! `conform` (minimal wiring on the perf branch; the lead's main.rs replaces it).

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "conform",
    version,
    about = "Conformance and performance gates for LLM-inference kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Performance records and the regression gate.
    #[command(subcommand)]
    Perf(conform_harness::cli::perf::PerfCommand),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Perf(cmd) => std::process::ExitCode::from(conform_harness::cli::perf::run(cmd)),
    }
}
