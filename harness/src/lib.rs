//! conform-harness: suites, golden data, verdicts, performance gates, reports.

pub mod results;
pub mod verdict;
