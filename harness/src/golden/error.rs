//! Golden-store errors (exit code 2: the store itself is unusable). Drift is not an error but
//! a verification outcome (exit code 1).

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum GoldenError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: malformed manifest: {message}")]
    Manifest { path: PathBuf, message: String },
    #[error(transparent)]
    File(#[from] conform_targets::tensor_file::TensorFileError),
    #[error("case `{id}`: {message}")]
    Compute { id: String, message: String },
    /// The case's inputs or reference outputs could not be computed.
    #[error(transparent)]
    CaseData(#[from] crate::case_data::CaseDataError),
    /// A golden file whose bytes disagree with MANIFEST.toml: the store was altered.
    #[error("{path}: golden store corruption: {problem} (the file changed after `conform golden accept`; restore it from version control, or bless and review)")]
    Corrupt { path: PathBuf, problem: String },
    #[error("refusing to accept: the staged golden data no longer matches the suites for {} (the case changed or disappeared after `conform golden bless`); run `conform golden bless` again and review", ids.join(", "))]
    StagedStale { ids: Vec<String> },
    #[error(
        "case `{id}`: no golden entry in MANIFEST.toml; run `conform golden bless` and review"
    )]
    NotInManifest { id: String },
    #[error("case `{id}`: the golden entry was blessed for another definition of the case (params, recipe, generator, seed or tier changed); run `conform golden bless` and review")]
    Stale { id: String },
    #[error("refusing to bless golden data with CI set: golden files change only through a reviewed `conform golden bless` + `conform golden accept` on a developer machine")]
    BlessOnCi,
}
