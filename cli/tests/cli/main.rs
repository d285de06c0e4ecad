//! The conform-cli integration tests that run the `conform` binary, as one test binary (one
//! link instead of one per file; matklad's "one tests/ binary"): each file a module, their
//! shared helpers in ../support/. The tests with their own `main` (libtest-mimic: ignored at
//! run time with the reason when what they need is missing) stay separate binaries.

#[path = "../support/cli.rs"]
mod cli;
#[path = "../support/copy_dir.rs"]
mod copy_dir;
#[path = "../support/history_scenario.rs"]
mod history_scenario;
#[path = "../support/snap.rs"]
mod snap;

mod cli_adequacy;
mod cli_contract;
mod cli_fingerprint;
mod cli_golden_review;
mod cli_hanging_worker;
mod cli_honest_exits;
mod cli_interrupt;
mod cli_keep_outputs;
mod cli_numbers;
mod cli_suites_and_golden;
mod exit_code_table;
mod mc2_cli;
mod output_snapshots;
mod perf_compare_cli;
mod perf_history;
mod report_cli;
mod schemas_validate_outputs;
