use clap::Parser;
use conform_harness::cli::{Cli, Command};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Report(args) => {
            conform_harness::cli::report::run(&args)?;
        }
    }
    Ok(())
}
