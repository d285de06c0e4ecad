//! Errors of `conform report`: each names the file, field or plot at fault.

use crate::messages::report as msg;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{}", msg::read_failed(.path, .source))]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}", msg::parse_failed(.path, .source))]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{}", msg::bad_field(.path, .field, .reason))]
    Field {
        path: PathBuf,
        field: String,
        reason: String,
    },
    #[error("{}", msg::unknown_schema_version(.path, *.found, crate::results::RESULTS_SCHEMA_VERSION))]
    SchemaVersion { path: PathBuf, found: u64 },
    #[error("{}", msg::baseline_is_record(.path))]
    BaselineIsRecord { path: PathBuf },
    #[error("{}", msg::write_failed(.path, .source))]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}", msg::plot_failed(.plot, .message))]
    Plot { plot: &'static str, message: String },
    #[error(transparent)]
    History(#[from] crate::perf::history::HistoryError),
}

impl ReportError {
    /// Adapter for plotters' error types: `.map_err(ReportError::plot("histogram"))`.
    pub fn plot<E: std::fmt::Display>(plot: &'static str) -> impl FnOnce(E) -> ReportError {
        move |e| ReportError::Plot {
            plot,
            message: e.to_string(),
        }
    }
}
