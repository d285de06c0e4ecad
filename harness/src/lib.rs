//! conform-harness library.

pub mod cli;
pub mod mc2_costs;
pub mod messages;
