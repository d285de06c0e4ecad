//! The repository root, for the library's tests that read the project's files (suites, CI
//! scripts, fixtures). The tests that run the `conform` binary live in the CLI crate (their
//! shared helpers: conform-test-support's `cli`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The repository root as an absolute path without symbolic links or `..`.
pub fn repo_canonical() -> PathBuf {
    repo().canonicalize().expect("the repository root")
}

/// Every quick case of the project's suites.
pub fn quick_cases() -> Vec<conform_harness::suite::Case> {
    conform_harness::suite::select::load_all(&repo().join("suites"))
        .expect("the suites load")
        .into_iter()
        .filter(|c| c.tier == conform_harness::suite::Tier::Quick)
        .collect()
}
