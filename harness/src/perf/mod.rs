//! Performance: timing records, robust statistics, the regression gate, roofline figures,
//! hardware profiles and budgets.
//!
//! - [`perf_file`]: the JSON perf record (raw samples + environment).
//! - [`stats`], [`welch`], [`mann_whitney`], [`signed_rank`], [`student_t`]: the statistics;
//!   [`case_rng`]: keyed random streams for the gate simulations.
//! - [`compare`]: the baseline/candidate gate and its verdicts; [`rounds`]: the verdict of an
//!   A/B comparison timed in rounds (the same-night control), held to the family of its
//!   cases by [`family`] and re-timed by [`confirmation`]; [`metric`]: wall or CPU time.
//! - [`control`]: the kept build of the nightly gate's same-night control.
//! - [`history`]: the perf history store, and the gate against a series' newest segment;
//!   [`changepoint`]: E-divisive change points of a series.
//! - [`roofline`], [`hardware`], [`budget`]: how fast a kernel should be; [`soc`]: a profile's
//!   SoC core counts, which recipes that model a kernel's run-time tiling read;
//!   [`built_in_profiles`]: the profiles built into the library.

pub mod budget;
pub mod built_in_profiles;
pub mod case_rng;
pub mod changepoint;
pub mod compare;
pub mod confirmation;
pub mod control;
pub mod error;
pub mod family;
pub mod hardware;
pub mod history;
pub mod mann_whitney;
pub mod metric;
pub mod perf_file;
pub mod roofline;
pub mod rounds;
pub mod signed_rank;
pub mod soc;
pub mod stats;
pub mod student_t;
pub mod verdict_text;
pub mod welch;

pub use budget::{
    evaluate_budget, validate_budgets, Budget, BudgetOutcome, BudgetProblem, Budgets,
};
pub use compare::{compare, compare_samples, Comparison, GateConfig, SampleComparison, Verdict};
pub use error::PerfError;
pub use hardware::{load_profiles, HardwareProfile};
pub use perf_file::{
    Environment, EnvironmentCapture, PerfFile, PerfFileIo, PerfRecord, PerfRecordBuild,
};
pub use roofline::{roofline, Roofline, Work};
