//! Numerics verdicts: how one output tensor of a target is judged against the reference.
//!
//! A suite names a [`CheckPolicy`] per output (one judge per policy, in [`policies`]); the runner builds a [`Comparison`] (the
//! target's tensor, the expected tensor, optionally the oracle and a same-precision baseline,
//! the output's spec and the poison patterns) and calls [`evaluate`], which fills the
//! [`crate::results::OutputMetrics`] every verdict records. Policies, formulas and sources:
//! docs/verdicts.md.

mod check_policy;
mod comparison;
mod evaluate;
mod heatmap;
mod histogram;
mod index;
mod judge;
mod kernel;
pub mod lane;
mod metrics;
mod pass;
pub mod policies;
mod policy;
mod subnormal;
pub mod two_fill;
mod worst;

pub use check_policy::{CheckError, CheckPolicy};
pub use comparison::Comparison;
pub use evaluate::{evaluate, VerdictError};
pub use heatmap::HEATMAP_MAX_SIDE;
pub use index::format_index;
pub use judge::{judge, JudgeError};
pub use kernel::CHUNK;
pub use metrics::{CANN_EPS, FLASHINFER_EPS};
pub use policy::{CannDtype, CannLevel, CannRatioLimits, Needs, PolicyError, CANN_STANDARD_CLAIMS};
pub use worst::WORST_COUNT;
