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
    #[error("{path}: not a valid perf file: {source}")]
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
