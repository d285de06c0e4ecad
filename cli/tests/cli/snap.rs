//! Snapshot assertions on a `conform` run (snapbox): the run as `cli::conform_without` makes
//! it (no `CI`, no `CONFORM_ROOT`, stdin closed, no panic), with the project root redacted to
//! `[ROOT]` and per-case durations `(N ms)` to `([MS] ms)`. `SNAPSHOTS=overwrite` rewrites the
//! expected texts (inline `str![]` and files) after an intended change; review the diff.
#![allow(dead_code)]

use snapbox::cmd::OutputAssert;
use snapbox::{Assert, Redactions};
use std::path::Path;

/// `conform --root ROOT ARGS...` ready for snapshot assertions. ROOT should be canonical (no
/// `..`, no symlinks), as conform prints it.
pub fn conform_snap(root: &Path, args: &[&str]) -> OutputAssert {
    conform_snap_with(root, args, &[])
}

/// As [`conform_snap`] with `env` added to conform's environment (after removing `CI` and
/// `CONFORM_ROOT`).
pub fn conform_snap_with(root: &Path, args: &[&str], env: &[(&str, &str)]) -> OutputAssert {
    let mut cmd = super::cli::command(root, args, &["CONFORM_ROOT"]);
    cmd.envs(env.iter().copied());
    let o = super::cli::output(cmd);
    OutputAssert::new(o).with_assert(assert_for(root))
}

/// The snapshot comparison used for a run under `root`.
pub fn assert_for(root: &Path) -> Assert {
    let mut redactions = Redactions::new();
    redactions.insert("[ROOT]", root.to_path_buf()).unwrap();
    redactions
        .insert(
            "[MS]",
            regex::Regex::new(r"\((?<redacted>[0-9]+) ms\)").unwrap(),
        )
        .unwrap();
    Assert::new()
        .action_env(snapbox::assert::DEFAULT_ACTION_ENV)
        .redact_with(redactions)
}
