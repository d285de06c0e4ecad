//! The conform-cli integration tests that run the `conform` binary, as one test binary (one
//! link instead of one per file; matklad's "one tests/ binary"): each file a module, with its
//! own helpers beside them (`snap.rs`) and what other test binaries also use from the
//! conform-test-support crate. The tests with their own `main` (libtest-mimic: ignored at run
//! time with the reason when what they need is missing) stay separate binaries.

use conform_test_support::{cli, copy_dir, history_scenario};

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
