//! User-facing strings of `conform run --keep-outputs DIR`.

use std::fmt::Display;
use std::path::Path;

/// A case result's note: an input set's files could not be (all) written.
pub fn set_not_written(set: u32, rel: &str, err: &dyn Display) -> String {
    format!("--keep-outputs: input set {set} not (fully) kept in {rel}: {err}")
}

/// A case result's note: the index could not be rewritten after the trial.
pub fn index_not_written(err: &dyn Display) -> String {
    format!("--keep-outputs: index.json not updated: {err}")
}

/// The line after a run's summary: where the kept tensors are.
pub fn kept(dir: &Path, entries: usize) -> String {
    format!(
        "kept the tensors of {entries} input set(s) in {} (listed in {})",
        dir.display(),
        dir.join(super::keep::INDEX_FILE).display()
    )
}
