//! The history's tables and their migrations. The version lives in the `conform_history`
//! table (key `schema_version`); a file without that table is someone else's database and is
//! never touched, and a version above [`SCHEMA_VERSION`] is refused (a newer conform wrote it).
//!
//! Version 1:
//! - `runs`: one ingested perf file (a night, or one `perf record`): its digest (a file is
//!   ingested once), date, commit, host, device, library and driver versions (JSON), tier,
//!   seed, source file name.
//! - `series`: one (case, target, hardware).
//! - `measurements`: one series in one run: the op parameters' digest, warm-up, iterations,
//!   FLOPs and bytes of one iteration.
//! - `samples`: every raw sample, clustered by (series, run, index) so one series reads as a
//!   range scan.

use rusqlite::Connection;

/// The version this build writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

/// The statements that bring a database from version `i` to `i + 1`.
const MIGRATIONS: [&str; 1] = [r#"
CREATE TABLE conform_history (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    digest TEXT NOT NULL UNIQUE,
    date TEXT NOT NULL,
    commit_id TEXT,
    hostname TEXT,
    device TEXT,
    versions TEXT NOT NULL DEFAULT '{}',
    tier TEXT,
    seed TEXT,
    source TEXT,
    ingested_at TEXT NOT NULL
);
CREATE INDEX runs_by_date ON runs (date, id);
CREATE TABLE series (
    id INTEGER PRIMARY KEY,
    case_id TEXT NOT NULL,
    target TEXT NOT NULL,
    hardware TEXT NOT NULL,
    UNIQUE (case_id, target, hardware)
);
CREATE TABLE measurements (
    series_id INTEGER NOT NULL REFERENCES series (id),
    run_id INTEGER NOT NULL REFERENCES runs (id),
    params_digest TEXT,
    warmup INTEGER,
    iterations INTEGER,
    flops REAL,
    bytes REAL,
    PRIMARY KEY (series_id, run_id)
) WITHOUT ROWID;
CREATE TABLE samples (
    series_id INTEGER NOT NULL,
    run_id INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    value_us REAL NOT NULL,
    PRIMARY KEY (series_id, run_id, idx)
) WITHOUT ROWID;
INSERT INTO conform_history (key, value) VALUES ('application', 'conform perf history');
"#];

/// What a database holds before we write to it.
pub enum Found {
    /// No tables at all: a new (or empty) file.
    Empty,
    /// A conform history at this version.
    Version(i64),
    /// Tables, but not ours.
    Foreign(Vec<String>),
}

/// Reads what the database is, without writing.
pub fn inspect(conn: &Connection) -> rusqlite::Result<Found> {
    let mut stmt =
        conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")?;
    let tables: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    if tables.is_empty() {
        return Ok(Found::Empty);
    }
    if !tables.iter().any(|t| t == "conform_history") {
        return Ok(Found::Foreign(tables));
    }
    let v: Option<String> = conn
        .query_row(
            "SELECT value FROM conform_history WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    Ok(match v.and_then(|v| v.parse::<i64>().ok()) {
        Some(v) => Found::Version(v),
        None => Found::Foreign(tables),
    })
}

/// Applies the migrations from `from` (0 for an empty database) to [`SCHEMA_VERSION`] in one
/// transaction.
pub fn migrate(conn: &mut Connection, from: i64) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    for step in &MIGRATIONS[from as usize..] {
        tx.execute_batch(step)?;
    }
    tx.execute(
        "INSERT OR REPLACE INTO conform_history (key, value) VALUES ('schema_version', ?1)",
        [SCHEMA_VERSION.to_string()],
    )?;
    tx.commit()
}
