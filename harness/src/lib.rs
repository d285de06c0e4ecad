//! conform-harness: suites, golden data, verdicts, performance gates, reports: the library
//! under the `conform` command line (the `conform-cli` crate). [`session::execute`] runs
//! selected cases on targets and returns typed results.

pub mod adequacy;
pub mod atomic_file;
pub mod case_data;
pub mod console;
pub mod fingerprint;
pub use conform_metadata::exit_code;
pub mod golden;
pub mod html;
/// Reading any file conform is given within a size limit (one helper for every reader).
pub use conform_targets::input_file;
pub mod interrupt;
pub mod ledger;
pub mod make_report;
pub mod mc2_costs;
pub mod mc2_plan;
pub mod messages;
pub mod perf;
pub mod project;
pub mod report;
pub mod results;
pub mod runner;
pub mod seed;
pub mod session;
pub mod suite;
pub mod verdict;
