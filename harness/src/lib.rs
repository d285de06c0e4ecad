//! conform-harness library.

pub mod cli;
pub mod messages;
pub mod perf;
