//! Running the `conform` binary from the CLI tests: one definition of the project root, the
//! invocation (never under a CI variable the test did not set, stdin closed so nothing waits
//! for an answer) and the check that no run panics, whatever its exit code.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root (the project the tests run against unless they copy it).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `conform --root ROOT ARGS...` with `CI` and the variables in `unset` removed from its
/// environment; panics (failing the test) when the run panicked.
pub fn conform_without(root: &Path, args: &[&str], unset: &[&str]) -> Output {
    output(command(root, args, unset))
}

/// The command `conform --root ROOT ARGS...` run in ROOT, with stdin closed and `CI` and the
/// variables in `unset` removed from its environment.
pub fn command(root: &Path, args: &[&str], unset: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_conform"));
    cmd.arg("--root")
        .arg(root)
        .args(args)
        .current_dir(root)
        .env_remove("CI")
        .stdin(Stdio::null());
    for var in unset {
        cmd.env_remove(var);
    }
    cmd
}

/// Runs `cmd` to completion; panics (failing the test) when the run panicked.
pub fn output(mut cmd: Command) -> Output {
    let o = cmd.output().expect("conform runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked at"), "{err}");
    o
}

/// `conform --root ROOT ARGS...` without `CI` in its environment.
pub fn conform(root: &Path, args: &[&str]) -> Output {
    conform_without(root, args, &[])
}

/// Stdout then stderr, as one text.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
