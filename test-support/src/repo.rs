//! The repository root, for the tests that read the project's files (suites, golden store,
//! CI scripts) or run against it.

use std::path::{Path, PathBuf};

/// The repository root (the parent of this crate's folder).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The repository root as an absolute path without symbolic links or `..` (for what compares
/// or prints it: scripts' arguments, workers' paths, replay lines).
pub fn repo_canonical() -> PathBuf {
    repo().canonicalize().expect("the repository root")
}
