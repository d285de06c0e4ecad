//! Every user-facing message of the harness, one module per area.

pub mod perf;
