//! Typed errors of the MC2 reference: bad shapes and inputs of the functional ops, invalid cost
//! models, fits that cannot be computed, and planner parameters out of range.

/// Everything that can go wrong in [`crate::mc2`]. Each variant names the offending parameter.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Mc2Error {
    /// A dimension that must be positive is zero (`M = 0`, `N = 0`, ...).
    #[error("{name} must be greater than 0")]
    ZeroDimension { name: &'static str },

    /// MC2 runs on 1, 2, 4 or 8 ranks.
    #[error("rank count {ranks} is not supported (expected 1, 2, 4 or 8)")]
    UnsupportedRankCount { ranks: usize },

    /// A tensor's element count does not match its declared shape.
    #[error("{tensor} has {actual} elements, expected {expected}")]
    ShapeMismatch {
        tensor: String,
        expected: usize,
        actual: usize,
    },

    /// An input value is not representable in the input dtype (inputs are f32 values that must
    /// already lie on the dtype's grid).
    #[error("{tensor}[{index}] = {value:e} is not a {dtype} value")]
    OffGrid {
        tensor: String,
        index: usize,
        value: f32,
        dtype: &'static str,
    },

    /// MC2 kernels compute in f16 or bf16.
    #[error("dtype {dtype} is not supported by MC2 (expected f16 or bf16)")]
    UnsupportedDType { dtype: &'static str },

    /// The tiles do not partition the M axis.
    #[error("tiles {tiles:?} do not partition M = {m} (every tile > 0, sum = M)")]
    BadTiling { m: usize, tiles: Vec<usize> },

    /// The tile schedule is not a permutation of the tile indices.
    #[error("schedule {schedule:?} is not a permutation of 0..{tiles}")]
    BadSchedule { tiles: usize, schedule: Vec<usize> },

    /// A dimension must be a multiple of the rank count (reduce-scatter splits M by rank).
    #[error("{name} = {value} is not a multiple of the rank count {ranks}")]
    NotDivisibleByRanks {
        name: &'static str,
        value: usize,
        ranks: usize,
    },

    /// A cost model has no segment, or breakpoints and segments do not match.
    #[error("cost model `{model}`: {segments} segment(s) need {expected} breakpoint(s), got {breakpoints}")]
    SegmentCount {
        model: String,
        segments: usize,
        expected: usize,
        breakpoints: usize,
    },

    /// A coefficient or breakpoint is NaN or infinite.
    #[error("cost model `{model}`: {what} is not finite")]
    NonFinite { model: String, what: String },

    /// Breakpoints must be positive and strictly increasing.
    #[error("cost model `{model}`: breakpoint {index} ({value}) must be > 0 and greater than the previous one")]
    BreakpointOrder {
        model: String,
        index: usize,
        value: f64,
    },

    /// A cost model must never decrease: more data never takes less time.
    #[error("cost model `{model}` is not monotone non-decreasing: {detail}")]
    NonMonotone { model: String, detail: String },

    /// A cost model must not predict a negative time.
    #[error("cost model `{model}` predicts a negative time {value} us at x = 0")]
    NegativeCost { model: String, value: f64 },

    /// The inverse of a cost model does not exist for this time (the model is bounded).
    #[error("cost model `{model}` never reaches {time_us} us")]
    NotInvertible { model: String, time_us: f64 },

    /// Too few measurements for the requested fit.
    #[error("fit needs at least {needed} distinct points, got {got}")]
    NotEnoughPoints { needed: usize, got: usize },

    /// The least-squares system is singular (e.g. all x equal).
    #[error("least-squares system is singular (the x values do not determine a {kind} fit)")]
    SingularFit { kind: &'static str },

    /// A measurement is NaN or infinite.
    #[error("measurement {index} ({x}, {y}) is not finite")]
    NonFiniteMeasurement { index: usize, x: f64, y: f64 },

    /// A planner or timeline parameter is out of range.
    #[error("parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        name: &'static str,
        value: String,
        reason: &'static str,
    },
}
