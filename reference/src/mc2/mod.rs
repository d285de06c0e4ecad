//! MC2 (matmul + communication) reference: functional MatmulAllReduce, AllGatherMatmul and
//! MatmulReduceScatter over simulated ranks with the kernel's numerics; the M-axis split planner
//! of seed 000; piecewise cost models, their fitting; and a two-stream timeline simulator.
//!
//! See `docs/mc2.md` for the numerics, the planner and the seed's min-vs-max discrepancy.

pub mod all_gather_matmul;
pub mod all_to_all;
pub mod cost_model;
pub mod error;
pub mod fit;
pub mod matmul_all_reduce;
pub mod matmul_reduce_scatter;
pub mod planner;
pub mod problem;
pub mod reduction;
pub mod timeline;

pub use all_gather_matmul::{all_gather_matmul, AllGatherMatmulInputs, AllGatherMatmulOutput};
pub use all_to_all::{simulate_all_to_all, AllToAll, AllToAllTimeline, LinkProfile, RankSpan};
pub use cost_model::{AxisCost, CostAxis, PiecewiseCost, Polynomial};
pub use error::Mc2Error;
pub use fit::{fit_piecewise, fit_polynomial, fit_single, FitReport, SegmentKind};
pub use matmul_all_reduce::{matmul_all_reduce, matmul_all_reduce_tiled, MatmulAllReduceInputs};
pub use matmul_reduce_scatter::{matmul_reduce_scatter, MatmulReduceScatterInputs};
pub use planner::{
    plan_split, Bound, Plan, PlanInputs, PlannerConfig, ShortTileBounds, ShortTileRule,
    UnsplitTimes,
};
pub use problem::{
    decode_bits, encode_bits, Accumulation, EpiloguePlacement, Mc2Numerics, Mc2Shape, RankOperands,
    X3Entry,
};
pub use reduction::ReductionOrder;
pub use timeline::{simulate, simulate_tiles, Inflation, TileSpan, Timeline};
