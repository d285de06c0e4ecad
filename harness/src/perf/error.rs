//! Errors of the performance module. Every variant names the file and the field or case at
//! fault, so a bad input is reported, never a panic.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a valid perf file: {source}{}", json_hint(source))]
    PerfJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: case `{case}` (target `{target}`): {field}: {problem}")]
    InvalidCase {
        path: PathBuf,
        case: String,
        target: String,
        field: &'static str,
        problem: String,
    },
    #[error(
        "{path}: case `{case}` (target `{target}`, hardware `{hardware}`) appears more than once"
    )]
    DuplicateCase {
        path: PathBuf,
        case: String,
        target: String,
        hardware: String,
    },
    #[error("{path}: not a valid hardware profile: {source}")]
    HardwareToml {
        path: PathBuf,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("{path}: {field}: {problem}")]
    InvalidHardware {
        path: PathBuf,
        field: String,
        problem: String,
    },
    #[error("hardware profile `{0}` is defined twice")]
    DuplicateHardware(String),
    #[error("budget for `{hardware}`: {field}: {problem}")]
    InvalidBudget {
        hardware: String,
        field: &'static str,
        problem: String,
    },
    #[error("{field}: {problem}")]
    InvalidArgument {
        field: &'static str,
        problem: String,
    },
    #[error("hardware profile `{profile}` has no peak for dtype `{dtype}` (it lists: {known})")]
    UnknownDtype {
        profile: String,
        dtype: String,
        known: String,
    },
    #[error("cannot serialise the perf file: {0}")]
    Serialise(#[source] serde_json::Error),
}

/// What a bare serde position means for a perf file: JSON has no NaN or Infinity, so a
/// non-finite sample written by a broken timer shows up as a syntax error at its position.
fn json_hint(e: &serde_json::Error) -> &'static str {
    if e.is_syntax() {
        " (samples_us and every other number must be finite: JSON has no NaN or Infinity, \
         so a non-finite timing is written as a bare token the parser stops at)"
    } else {
        ""
    }
}

impl From<conform_metadata::compare::InvalidSetting> for PerfError {
    fn from(e: conform_metadata::compare::InvalidSetting) -> Self {
        PerfError::InvalidArgument {
            field: e.field,
            problem: e.problem,
        }
    }
}
