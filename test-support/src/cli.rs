//! Running the `conform` binary from the tests: one definition of the project root, the
//! invocation (never under a CI variable the test did not set, stdin closed so nothing waits
//! for an answer) and the check that no run panics, whatever its exit code.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

pub use crate::repo::{repo, repo_canonical};

/// The `conform` binary the tests run: the path the test runner gives at run time
/// (`CARGO_BIN_EXE_conform`, or nextest's `NEXTEST_BIN_EXE_conform`), else the binary beside
/// the test executable's `deps/` folder (`target/<profile>/conform`), where cargo builds a
/// package's binaries before running its integration tests. Panics (failing the test) when
/// there is none.
pub fn binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            let given = ["CARGO_BIN_EXE_conform", "NEXTEST_BIN_EXE_conform"]
                .into_iter()
                .find_map(std::env::var_os)
                .map(PathBuf::from);
            let path = given.unwrap_or_else(|| {
                let test = std::env::current_exe().expect("the test executable's path");
                let mut dir = test.parent().expect("the test executable's folder");
                if dir.ends_with("deps") {
                    dir = dir.parent().expect("the folder above deps/");
                }
                dir.join(format!("conform{}", std::env::consts::EXE_SUFFIX))
            });
            assert!(
                path.is_file(),
                "the conform binary is not at {}: run the CLI's tests with cargo test, which \
                 builds it",
                path.display()
            );
            path
        })
        .clone()
}

/// `conform --root ROOT ARGS...` with `CI` and the variables in `unset` removed from its
/// environment; panics (failing the test) when the run panicked.
pub fn conform_without(root: &Path, args: &[&str], unset: &[&str]) -> Output {
    output(command(root, args, unset))
}

/// The command `conform --root ROOT ARGS...` run in ROOT, with stdin closed and `CI` and the
/// variables in `unset` removed from its environment.
pub fn command(root: &Path, args: &[&str], unset: &[&str]) -> Command {
    let mut cmd = Command::new(binary());
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

/// A `--filter` that selects the case `id` and no other: `^id$`, its regex characters escaped.
pub fn exact_filter(id: &str) -> String {
    let escaped: String = id
        .chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect();
    format!("^{escaped}$")
}

/// Stdout then stderr, as one text.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The variables of the caller's environment that would change what a test's `conform`
/// does: the project root and the targets a run must find.
pub const CALLER_ENV: [&str; 2] = ["CONFORM_ROOT", "CONFORM_REQUIRE_TARGETS"];

/// `conform --root ROOT ARGS...` without `CI`, `CONFORM_ROOT` or `CONFORM_REQUIRE_TARGETS` from
/// the caller's environment.
pub fn conform_clean(root: &Path, args: &[&str]) -> Output {
    conform_without(root, args, &CALLER_ENV)
}

/// `conform ARGS...` as a user runs it from `cwd`: `--root ROOT` only when `root` is given,
/// stdin closed, without `CI` or [`CALLER_ENV`]; panics (failing the test) when it panicked.
pub fn conform_in(cwd: &Path, root: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(binary());
    if let Some(r) = root {
        cmd.arg("--root").arg(r);
    }
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("CI")
        .stdin(Stdio::null());
    for var in CALLER_ENV {
        cmd.env_remove(var);
    }
    output(cmd)
}

/// `conform ARGS...` with no project (the commands that only read the files they are given:
/// `report`, `mc2 plan`, `perf compare`), stdin closed; panics when it panicked.
pub fn conform_files<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    let mut cmd = Command::new(binary());
    cmd.args(args).env_remove("CI").stdin(Stdio::null());
    output(cmd)
}
