//! Minimal `conform` entry point wiring `conform mc2` (the lead's full CLI replaces this file).

use std::process::ExitCode;

use clap::Parser;
use conform_harness::cli::mc2::{self, Mc2Args};

#[derive(Debug, Parser)]
#[command(
    name = "conform",
    about = "Conformance harness for Ascend LLM-inference kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// MC2 (matmul + communication) planning.
    Mc2(Mc2Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Mc2(args) => match mc2::run(&args, &mut std::io::stdout().lock()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(e.exit_code())
            }
        },
    }
}
