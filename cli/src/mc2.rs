//! `conform mc2 ...`: MC2 planning commands.
//!
//! `conform mc2 plan --m 4096 --k 3072 --n 8192 --dtype f16 --costs FILE [--json]` plans the
//! M-axis split of MatmulAllReduce from a cost file (`conform_harness::mc2_plan`), simulates the
//! two-stream timeline, and prints the bound, the tiles, the serial and predicted times.
//! With `--json` it prints one object with keys `bound`, `tiles`, `serial_us`, `predicted_us`,
//! and more (`gain_us`, `measured_fused_us`, `unsplit`, `plan`, `timeline`).

use std::io::Write;
use std::path::PathBuf;

use conform_harness::mc2_plan::{plan_json, Mc2PlanError, PlanRequest};

/// `conform mc2`.
#[derive(Debug, clap::Args)]
pub struct Mc2Args {
    #[command(subcommand)]
    pub command: Mc2Command,
}

/// The `mc2` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Mc2Command {
    /// Plan the M-axis split of MatmulAllReduce and predict its fused time.
    Plan(PlanArgs),
}

/// `conform mc2 plan`.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// Rows of x1 (M; B * S for a [B, S, K] activation).
    #[arg(long, allow_negative_numbers = true)]
    pub m: u64,
    /// Reduction dimension K.
    #[arg(long, allow_negative_numbers = true)]
    pub k: u64,
    /// Columns of x2 and of the output (N).
    #[arg(long, allow_negative_numbers = true)]
    pub n: u64,
    /// Output dtype: f16 or bf16.
    #[arg(long)]
    pub dtype: String,
    /// Cost file (TOML), e.g. suites/mc2/costs-seed-example.toml.
    #[arg(long)]
    pub costs: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Why `conform mc2` failed.
#[derive(Debug, thiserror::Error)]
pub enum Mc2CliError {
    /// The plan cannot be made (a bad value, the cost file, the planner).
    #[error(transparent)]
    Plan(#[from] Mc2PlanError),
    /// Writing the report failed.
    #[error("cannot write the report: {0}")]
    Output(#[from] std::io::Error),
}

impl Mc2CliError {
    /// Process exit code: usage for usage and input errors, failure for output failures.
    pub fn exit_code(&self) -> i32 {
        match self {
            Mc2CliError::Plan(_) => conform_harness::exit_code::USAGE,
            Mc2CliError::Output(_) => conform_harness::exit_code::FAILURE,
        }
    }
}

/// Runs `conform mc2 ...`, writing the report to `out`.
pub fn run(args: &Mc2Args, out: &mut dyn Write) -> Result<(), Mc2CliError> {
    match &args.command {
        Mc2Command::Plan(p) => plan(p, out),
    }
}

fn plan(args: &PlanArgs, out: &mut dyn Write) -> Result<(), Mc2CliError> {
    let (json, text) = plan_json(&PlanRequest {
        m: args.m,
        k: args.k,
        n: args.n,
        dtype: args.dtype.clone(),
        costs: args.costs.clone(),
    })?;
    if args.json {
        writeln!(out, "{json}")?;
    } else {
        write!(out, "{text}")?;
    }
    Ok(())
}
