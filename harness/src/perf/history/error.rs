//! Errors of the perf history store. Each names the database file (or URL) and what is wrong
//! with it; none leaves a partly written store behind (every write is one transaction).

use std::path::PathBuf;

use crate::perf::PerfError;

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{path}: no such perf history (create one with `conform perf history ingest`)")]
    Missing { path: PathBuf },
    #[error("{path}: not a SQLite database (a damaged file, or another kind of file); nothing was written to it")]
    NotADatabase { path: PathBuf },
    #[error("{path}: a SQLite database that is not a conform perf history (its tables: {tables}); nothing was written to it")]
    Foreign { path: PathBuf, tables: String },
    #[error("{path}: perf history schema version {found} is newer than this conform reads (up to {supported}); use a newer conform, nothing was written to it")]
    NewerSchema {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error(
        "{url}: PostgreSQL perf histories are not supported by this build; give a SQLite file path"
    )]
    UnsupportedUrl { url: String },
    #[error("{path}: {doing}: {source}")]
    Sql {
        path: PathBuf,
        doing: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    #[error("{path}: {what}")]
    Damaged { path: PathBuf, what: String },
    #[error(
        "{path}: no series for case `{case}`{}{}",
        on("target", target),
        on("hardware", hardware)
    )]
    UnknownSeries {
        path: PathBuf,
        case: String,
        target: Option<String>,
        hardware: Option<String>,
    },
    #[error("{path}: case `{case}` has several series ({series}); choose one with --target / --hardware")]
    AmbiguousSeries {
        path: PathBuf,
        case: String,
        series: String,
    },
    #[error(transparent)]
    Perf(#[from] PerfError),
}

fn on(what: &str, v: &Option<String>) -> String {
    v.as_ref()
        .map_or_else(String::new, |v| format!(" ({what} `{v}`)"))
}
