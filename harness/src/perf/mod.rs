//! Performance: timing records, robust statistics, the regression gate, roofline figures,
//! hardware profiles and budgets.
//!
//! - [`perf_file`]: the JSON perf record (raw samples + environment).
//! - [`stats`], [`mann_whitney`], [`bootstrap`]: the statistics.
//! - [`compare`]: the baseline/candidate gate and its verdicts.
//! - [`roofline`], [`hardware`], [`budget`]: how fast a kernel should be.

pub mod bootstrap;
pub mod budget;
pub mod compare;
pub mod error;
pub mod hardware;
pub mod mann_whitney;
pub mod perf_file;
pub mod roofline;
pub mod stats;

pub use budget::{evaluate_budget, validate_budgets, Budget, BudgetOutcome, Budgets};
pub use compare::{compare, compare_samples, Comparison, GateConfig, SampleComparison, Verdict};
pub use error::PerfError;
pub use hardware::{load_profiles, HardwareProfile};
pub use perf_file::{Environment, PerfFile, PerfRecord};
pub use roofline::{roofline, Roofline, Work};
