//! The `conform` process's exit codes: the one table of them (README.md and docs/results.md
//! repeat it). No other file spells an exit code as a literal; scripts that call `conform` can
//! depend on this crate for the values.

/// Every selected case passed (skips are not failures), or a command succeeded.
pub const SUCCESS: i32 = 0;
/// At least one case failed, errored, timed out or crashed (a golden file that `run` finds
/// corrupt ends its case as an error); or golden drift; or a perf regression; or a
/// `fingerprint` knob whose bits match another value than the claimed one (or none), or a
/// fingerprint re-check that still disagrees; or an output could not be written after the work
/// was done.
pub const FAILURE: i32 = 1;
/// Usage, suite, golden-store or input-file error (also an output path that cannot be
/// written, found before any case ran): nothing (more) was run. `golden verify` also ends
/// with it when it finds the store damaged.
pub const USAGE: i32 = 2;
/// A check could not give a verdict, and nothing failed: a comparison with an INCONCLUSIVE
/// case (too few samples or rounds, op parameters that differ, A/B rounds that disagree) or
/// a case the A/B control could not time on both sides. A check that could not run is not a
/// check that passed.
pub const INCONCLUSIVE: i32 = 3;
/// Nothing was judged: the selection matched no case, every selected case was skipped, a
/// perf file / comparison holds no case to judge, `report` was given results that judged
/// no case, or `fingerprint` fingerprinted no case. A run that checked nothing is not green
/// (`--allow-skips` turns "every case skipped" back into 0).
pub const NOTHING_JUDGED: i32 = 4;
/// The reader of stdout went away (`conform list | head -1`): 128 + SIGPIPE, what a Unix
/// filter killed by SIGPIPE reports; nothing more is printed. The long commands (run,
/// validate, adequacy, golden, perf record, report) still finish, write their files and exit
/// with their own code.
pub const BROKEN_PIPE: i32 = 141;
/// Interrupted by SIGINT (128 + 2): the finished cases' results were written, marked
/// interrupted.
pub const INTERRUPTED_SIGINT: i32 = 130;
/// Interrupted by SIGTERM (128 + 15), as CI runners cancel jobs.
pub const INTERRUPTED_SIGTERM: i32 = 143;
