//! conform-harness: suites, golden data, verdicts, performance gates, reports.

pub mod cli;
pub mod messages;
pub mod report;
pub mod results;
