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

pub fn results(path: &Path) -> Result<RunResults, ReportError> {
    serde_json::from_str(&read(path)?).map_err(|source| ReportError::Parse {
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
