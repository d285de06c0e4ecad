//! Reading the report's input files: each error names the file (and the field when the
//! content is wrong).

use super::error::ReportError;
use super::mc2_input::{self, Mc2Timeline};
use super::perf_input::{self, Comparison, PerfFile};
use crate::results::RunResults;
use serde_json::Value;
use std::path::Path;

fn read(path: &Path) -> Result<String, ReportError> {
    std::fs::read_to_string(path).map_err(|source| ReportError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn json(path: &Path) -> Result<Value, ReportError> {
    serde_json::from_str(&read(path)?).map_err(|source| ReportError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// Whether `path` names a results journal (`PATH.journal`, what a run killed by SIGKILL leaves).
pub fn is_journal(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "journal")
}

/// A results file (its `schema_version` checked first), or a journal recovered into one.
pub fn results(path: &Path) -> Result<RunResults, ReportError> {
    let text = read(path)?;
    if is_journal(path) {
        return crate::runner::journal::recover(&text).map_err(|reason| ReportError::Field {
            path: path.to_path_buf(),
            field: "journal".to_string(),
            reason,
        });
    }
    let value: Value = serde_json::from_str(&text).map_err(|source| ReportError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
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
    perf_input::perf_file(&json(path)?, path)
}

pub fn comparisons(path: &Path) -> Result<Vec<Comparison>, ReportError> {
    perf_input::comparisons(&json(path)?, path)
}

pub fn mc2_timeline(path: &Path) -> Result<Mc2Timeline, ReportError> {
    mc2_input::timeline(&json(path)?, path)
}

/// A kill matrix written by `conform adequacy --json`.
pub fn adequacy(path: &Path) -> Result<crate::adequacy::AdequacyReport, ReportError> {
    serde_json::from_str(&read(path)?).map_err(|source| ReportError::Parse {
        path: path.to_path_buf(),
        source,
    })
}
