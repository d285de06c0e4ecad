//! The `conform` command line (clap). Minimal wiring on the `report` branch; the lead owns
//! this file and merges the other subcommands.

pub mod report;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "conform", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write the HTML report.
    Report(report::ReportArgs),
}
