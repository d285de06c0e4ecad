//! What `conform adequacy` needs around [`super::measure`]: the faults a request names, where
//! the finished cells are journaled, and the files of a measured kill matrix.

use super::AdequacyReport;
use conform_reference::faults::{self, Fault};
use std::path::{Path, PathBuf};

/// Fault names that are in no catalogue entry.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown fault(s): {} (see `conform adequacy --list-faults`)",
    .0.join(", ")
)]
pub struct UnknownFaults(pub Vec<String>);

/// Why the files of a kill matrix (or its journal's directory) cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum AdequacyOutputError {
    /// The report directory (where the journal goes) cannot be created.
    #[error("{}: {error}", dir.display())]
    ReportDir { dir: PathBuf, error: std::io::Error },
    /// The matrix does not serialise.
    #[error("{0}")]
    Json(serde_json::Error),
    /// The JSON file cannot be written.
    #[error("{}: {error}", path.display())]
    WriteJson {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The page cannot be written.
    #[error("cannot write {}: {error}", path.display())]
    WritePage {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// The faults of the catalogue `names` names (every fault when `names` is empty), in the
/// catalogue's order; or the names that are in no catalogue entry.
pub fn choose_faults(names: &[String]) -> Result<Vec<&'static Fault>, UnknownFaults> {
    let all = faults::catalogue();
    if names.is_empty() {
        return Ok(all);
    }
    let unknown: Vec<String> = names
        .iter()
        .filter(|n| faults::find(n).is_none())
        .cloned()
        .collect();
    if !unknown.is_empty() {
        return Err(UnknownFaults(unknown));
    }
    Ok(all
        .into_iter()
        .filter(|f| names.iter().any(|n| n == f.name))
        .collect())
}

/// Where the finished cells are journaled: beside `json`, else in the `report` directory
/// (created now), else nowhere.
pub fn journal_path(
    json: Option<&Path>,
    report: Option<&Path>,
) -> Result<Option<PathBuf>, AdequacyOutputError> {
    // Nothing is created beside a device or FIFO given as the JSON output.
    if let Some(j) = json.and_then(super::journal::path_beside) {
        return Ok(Some(j));
    }
    match report {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|error| AdequacyOutputError::ReportDir {
                dir: dir.to_path_buf(),
                error,
            })?;
            Ok(Some(super::journal::path_in_report_dir(dir)))
        }
        None => Ok(None),
    }
}

/// Writes the kill matrix as JSON to `json` and as a page into the `report` directory (each
/// when given); returns the page's path.
pub fn write_outputs(
    report: &AdequacyReport,
    json: Option<&Path>,
    report_dir: Option<&Path>,
) -> Result<Option<PathBuf>, AdequacyOutputError> {
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(report).map_err(AdequacyOutputError::Json)?;
        crate::atomic_file::write(path, text.as_bytes()).map_err(|error| {
            AdequacyOutputError::WriteJson {
                path: path.to_path_buf(),
                error,
            }
        })?;
    }
    match report_dir {
        Some(dir) => crate::html::write_index(dir, &super::html::page(report))
            .map(Some)
            .map_err(|(path, error)| AdequacyOutputError::WritePage { path, error }),
        None => Ok(None),
    }
}
