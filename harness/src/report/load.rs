//! Reading the report's input files: each error names the file (and the field when the
//! content is wrong). Every file is read within its size limit ([`crate::input_file`]); the
//! JSON ones as a stream, so a large results file is never held twice (its text and its value).

use super::error::ReportError;
use super::mc2_input::{self, Mc2Timeline};
use super::perf_input::{self, Comparison, PerfFile};
use crate::input_file::{self, Limit};
use crate::results::RunResults;
use serde_json::Value;
use std::path::Path;

fn read(path: &Path, limit: Limit) -> Result<String, ReportError> {
    input_file::read_text(path, limit).map_err(|source| ReportError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// A JSON file parsed as it is read, within `limit`: a read error (the limit, a NUL byte, an
/// I/O error) is a read error, anything else a parse error.
fn json<T: serde::de::DeserializeOwned>(path: &Path, limit: Limit) -> Result<T, ReportError> {
    let read_error = |source| ReportError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = input_file::open_text(path, limit).map_err(read_error)?;
    serde_json::from_reader(std::io::BufReader::new(file)).map_err(|e| {
        if e.is_io() {
            read_error(e.into())
        } else {
            ReportError::Parse {
                path: path.to_path_buf(),
                source: e,
            }
        }
    })
}

/// Whether `path` names a results journal (`PATH.journal`, what a run killed by SIGKILL leaves).
pub fn is_journal(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "journal")
}

/// A results file (its `schema_version` checked first), or a journal recovered into one.
pub fn results(path: &Path) -> Result<RunResults, ReportError> {
    if is_journal(path) {
        let text = read(path, Limit::RESULTS)?;
        return crate::runner::journal::recover(&text).map_err(|reason| ReportError::Field {
            path: path.to_path_buf(),
            field: "journal".to_string(),
            reason: reason.to_string(),
        });
    }
    let value: Value = json(path, Limit::RESULTS)?;
    let version = value.get("schema_version").and_then(Value::as_u64);
    if let Some(v) = version
        && v != u64::from(crate::results::RESULTS_SCHEMA_VERSION)
    {
        return Err(ReportError::SchemaVersion {
            path: path.to_path_buf(),
            found: v,
        });
    }
    serde_json::from_value(value).map_err(|source| ReportError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

pub fn perf_file(path: &Path) -> Result<PerfFile, ReportError> {
    perf_input::perf_file(&json(path, Limit::PERF)?, path)
}

pub fn comparisons(path: &Path) -> Result<Vec<Comparison>, ReportError> {
    perf_input::comparisons(&json(path, Limit::PERF)?, path)
}

pub fn mc2_timeline(path: &Path) -> Result<Mc2Timeline, ReportError> {
    mc2_input::timeline(&json(path, Limit::PERF)?, path)
}

/// A kill matrix written by `conform adequacy --json`.
pub fn adequacy(path: &Path) -> Result<crate::adequacy::AdequacyReport, ReportError> {
    json(path, Limit::RESULTS)
}
