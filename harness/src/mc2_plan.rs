//! MC2 (matmul + all-reduce) planning: the M-axis split of MatmulAllReduce planned from a cost
//! file (see [`crate::mc2_costs`]), its two-stream timeline simulated, as one JSON value (the
//! keys `bound`, `tiles`, `serial_us`, `predicted_us`, `gain_us`, `measured_fused_us`,
//! `unsplit`, `plan`, `timeline`) and its text report.

use std::path::PathBuf;

use conform_reference::formats::DType;
use conform_reference::mc2::{plan_split, simulate_tiles, CostAxis, Mc2Error, PlanInputs};

use crate::mc2_costs::{load_costs, Mc2CostsError};
use crate::messages::mc2 as msg;

/// The largest M, K or N `mc2 plan` accepts: 2^31 - 1, the int32 extent every Ascend
/// kernel interface uses for a dimension. Anything larger is a typo, not a shape.
pub const MAX_DIM: u64 = (1 << 31) - 1;

/// A plan to make: the shape, the output dtype and the cost file.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    /// Rows of x1 (M).
    pub m: u64,
    /// Reduction dimension K.
    pub k: u64,
    /// Columns of x2 and of the output (N).
    pub n: u64,
    /// Output dtype: f16 or bf16.
    pub dtype: String,
    /// Cost file (TOML).
    pub costs: PathBuf,
}

/// Why a plan cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum Mc2PlanError {
    /// A bad value (unknown dtype, shape not matching the cost file).
    #[error("{0}")]
    Usage(String),
    /// The cost file is unreadable or invalid.
    #[error(transparent)]
    Costs(#[from] Mc2CostsError),
    /// The planner or the simulator rejected the input (M = 0, ...).
    #[error("invalid plan input: {0}")]
    Plan(#[from] Mc2Error),
}

/// The plan and its timeline: as one JSON value, and as the text report.
pub fn plan_json(args: &PlanRequest) -> Result<(serde_json::Value, String), Mc2PlanError> {
    let dtype = match args.dtype.parse::<DType>() {
        Ok(d @ (DType::F16 | DType::Bf16)) => d,
        _ => return Err(Mc2PlanError::Usage(msg::unknown_dtype(&args.dtype))),
    };
    for (name, v) in [("m", args.m), ("k", args.k), ("n", args.n)] {
        if v > MAX_DIM {
            return Err(Mc2PlanError::Usage(msg::dimension_too_large(
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
            return Err(Mc2PlanError::Usage(msg::shape_mismatch(
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
    let text = msg::PlanReport {
        m: args.m,
        k: args.k,
        n: args.n,
        dtype: dtype.name(),
        costs_path: &path,
        plan: &plan,
        timeline: &timeline,
        measured_unsplit: unsplit.is_some(),
        measured_fused_us: measured_fused,
    }
    .to_string();
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
