//! conform-harness: suites, golden data, verdicts, performance gates, reports.

pub mod adequacy;
pub mod atomic_file;
pub mod case_data;
pub mod cli;
pub mod console;
pub use conform_metadata::exit_code;
pub mod golden;
pub mod interrupt;
pub mod ledger;
pub mod mc2_costs;
pub mod messages;
pub mod perf;
pub mod report;
pub mod results;
pub mod runner;
pub mod seed;
pub mod suite;
pub mod verdict;
