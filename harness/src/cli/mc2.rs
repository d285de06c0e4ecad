//! `conform mc2 ...`: MC2 planning commands.
//!
//! `conform mc2 plan --m 4096 --k 3072 --n 8192 --dtype f16 --costs FILE [--json]` plans the
//! M-axis split of MatmulAllReduce from a cost file (see `crate::mc2_costs`), simulates the
//! two-stream timeline, and prints the bound, the tiles, the serial and predicted times.
//! With `--json` it prints one object with keys `bound`, `tiles`, `serial_us`, `predicted_us`,
//! and more (`gain_us`, `measured_fused_us`, `unsplit`, `plan`, `timeline`).

use std::io::Write;
use std::path::PathBuf;

use conform_reference::formats::DType;
use conform_reference::mc2::{plan_split, simulate_tiles, CostAxis, Mc2Error, PlanInputs};

use crate::mc2_costs::{load_costs, Mc2CostsError};
use crate::messages::mc2 as msg;

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

/// The largest M, K or N `mc2 plan` accepts: 2^31 - 1, the int32 extent every Ascend
/// kernel interface uses for a dimension. Anything larger is a typo, not a shape.
pub const MAX_DIM: u64 = (1 << 31) - 1;

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
    /// Bad command-line value (unknown dtype, shape not matching the cost file).
    #[error("{0}")]
    Usage(String),
    /// The cost file is unreadable or invalid.
    #[error(transparent)]
    Costs(#[from] Mc2CostsError),
    /// The planner or the simulator rejected the input (M = 0, ...).
    #[error("invalid plan input: {0}")]
    Plan(#[from] Mc2Error),
    /// Writing the report failed.
    #[error("cannot write the report: {0}")]
    Output(#[from] std::io::Error),
}

impl Mc2CliError {
    /// Process exit code: usage for usage and input errors, failure for output failures.
    pub fn exit_code(&self) -> i32 {
        match self {
            Mc2CliError::Usage(_) | Mc2CliError::Costs(_) | Mc2CliError::Plan(_) => {
                crate::exit_code::USAGE
            }
            Mc2CliError::Output(_) => crate::exit_code::FAILURE,
        }
    }
}

/// Runs `conform mc2 ...`, writing the report to `out`.
pub fn run(args: &Mc2Args, out: &mut dyn Write) -> Result<(), Mc2CliError> {
    match &args.command {
        Mc2Command::Plan(p) => plan(p, out),
    }
}

/// `conform mc2 plan`: the plan and its timeline as a JSON value (the `--json` output).
pub fn plan_json(args: &PlanArgs) -> Result<(serde_json::Value, String), Mc2CliError> {
    let dtype = match args.dtype.parse::<DType>() {
        Ok(d @ (DType::F16 | DType::Bf16)) => d,
        _ => return Err(Mc2CliError::Usage(msg::unknown_dtype(&args.dtype))),
    };
    for (name, v) in [("m", args.m), ("k", args.k), ("n", args.n)] {
        if v > MAX_DIM {
            return Err(Mc2CliError::Usage(msg::dimension_too_large(
                name, v, MAX_DIM,
            )));
        }
    }
    let costs = load_costs(&args.costs)?;
    let path = args.costs.display().to_string();
    let uses_rows = costs.matmul.axis == CostAxis::Rows || costs.comm.axis == CostAxis::Rows;
    let mut measured_applies = false;
    if let Some(s) = costs.shape {
        let same_kn = s.k == args.k && s.n == args.n && s.dtype == dtype;
        if uses_rows && !same_kn {
            return Err(Mc2CliError::Usage(msg::shape_mismatch(
                &path,
                (s.k, s.n, s.dtype.name()),
                (args.k, args.n, dtype.name()),
            )));
        }
        measured_applies = same_kn && s.m == args.m;
    }
    let unsplit = if measured_applies {
        costs.unsplit
    } else {
        None
    };
    let element_bytes = dtype.size_bytes() as u64;
    let plan = plan_split(
        &PlanInputs {
            m: args.m,
            k: args.k,
            n: args.n,
            element_bytes,
            matmul: &costs.matmul,
            comm: &costs.comm,
            unsplit,
        },
        &costs.planner,
    )?;
    let timeline = simulate_tiles(
        &plan.tiles,
        args.k,
        args.n,
        element_bytes,
        &costs.matmul,
        &costs.comm,
        costs.inflation,
        Some(plan.unsplit),
    )?;
    let measured_fused = if measured_applies {
        costs.measured_fused_us
    } else {
        None
    };
    let text = msg::plan_report(&msg::PlanReport {
        m: args.m,
        k: args.k,
        n: args.n,
        dtype: dtype.name(),
        costs_path: &path,
        plan: &plan,
        timeline: &timeline,
        measured_unsplit: unsplit.is_some(),
        measured_fused_us: measured_fused,
    });
    let json = serde_json::json!({
        "bound": plan.bound.name(),
        "tiles": plan.tiles,
        "serial_us": timeline.serial_us,
        "predicted_us": timeline.makespan_us,
        "gain_us": timeline.gain_us,
        "gain_fraction": timeline.gain_fraction,
        "measured_fused_us": measured_fused,
        "unsplit": {
            "matmul_us": plan.unsplit.matmul_us,
            "comm_us": plan.unsplit.comm_us,
            "source": msg::unsplit_source(unsplit.is_some()),
        },
        "shape": { "m": args.m, "k": args.k, "n": args.n, "dtype": dtype.name() },
        "plan": plan,
        "timeline": timeline.tiles,
    });
    Ok((json, text))
}

fn plan(args: &PlanArgs, out: &mut dyn Write) -> Result<(), Mc2CliError> {
    let (json, text) = plan_json(args)?;
    if args.json {
        writeln!(out, "{json}")?;
    } else {
        write!(out, "{text}")?;
    }
    Ok(())
}
