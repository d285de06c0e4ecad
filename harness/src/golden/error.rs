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
    #[error("refusing to bless golden data with CI set: golden files change only through a reviewed `conform golden bless` + `conform golden accept` on a developer machine")]
    BlessOnCi,
}
