//! The `conform` process's exit codes (documented in README.md and docs/results.md).

/// Every selected case passed (skips are not failures), or a command succeeded.
pub const SUCCESS: i32 = 0;
/// At least one case failed, errored, timed out or crashed; or golden drift; or a perf
/// regression.
pub const FAILURE: i32 = 1;
/// Usage, suite, golden-store or input-file error: nothing (more) was run.
pub const USAGE: i32 = 2;
/// The selection matched no case.
pub const NO_CASES: i32 = 4;
