//! Errors of the perf history store. Each names the database — the file, or the PostgreSQL URL
//! with any password hidden — and what is wrong with it; none leaves a partly written store
//! behind (every write is one transaction).

use super::backend::BackendError;
use crate::perf::PerfError;

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{location}: no such perf history (create one with `conform perf history ingest`)")]
    Missing { location: String },
    #[error("{location}: not a SQLite database (a damaged file, or another kind of file); nothing was written to it")]
    NotADatabase { location: String },
    #[error("{location}: a database that is not a conform perf history (its tables: {tables}); nothing was written to it")]
    Foreign { location: String, tables: String },
    #[error("{location}: perf history schema version {found} is newer than this conform reads (up to {supported}); use a newer conform, nothing was written to it")]
    NewerSchema {
        location: String,
        found: i64,
        supported: i64,
    },
    #[error("{location}: cannot connect to the PostgreSQL server: {source}")]
    Unreachable {
        location: String,
        #[source]
        source: BackendError,
    },
    #[error("{location}: {doing}: {source}")]
    Sql {
        location: String,
        doing: &'static str,
        #[source]
        source: BackendError,
    },
    #[error("{location}: {what}")]
    Damaged { location: String, what: String },
    #[error(
        "{location}: no series for case `{case}`{}{}",
        on("target", target),
        on("hardware", hardware)
    )]
    UnknownSeries {
        location: String,
        case: String,
        target: Option<String>,
        hardware: Option<String>,
    },
    #[error("{location}: case `{case}` has several series ({series}); choose one with --target / --hardware")]
    AmbiguousSeries {
        location: String,
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
