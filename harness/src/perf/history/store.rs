//! The perf history store: every raw sample of every ingested perf file, in one SQLite file.
//!
//! Reading commands open the file read-only and never create it; `ingest` creates it when it
//! is absent. Before anything is written the file is inspected: a damaged file, a database of
//! another application, or a history of a newer schema is refused by name and left as it was.
//! Each ingested file is one transaction, so an interrupted ingest leaves the store as before.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use super::error::HistoryError;
use super::schema::{self, Found, SCHEMA_VERSION};
use crate::perf::PerfFile;

/// An open history.
pub struct History {
    conn: Connection,
    path: PathBuf,
}

/// Where an ingested file came from, beyond what its environment says.
#[derive(Debug, Clone, Default)]
pub struct RunMeta {
    /// Overrides the file's `environment.tier`.
    pub tier: Option<String>,
    /// Overrides the file's `environment.seed`.
    pub seed: Option<String>,
    /// The file's name, for the record.
    pub source: Option<String>,
}

/// What `ingest` did with a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ingested {
    /// A new run with this many series and samples.
    New {
        run_id: i64,
        series: usize,
        samples: usize,
    },
    /// The same file (by digest) is already run `run_id`; nothing was added.
    AlreadyPresent { run_id: i64 },
}

/// One (case, target, hardware); `hardware` is empty when the records named none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesKey {
    pub id: i64,
    pub case: String,
    pub target: String,
    pub hardware: String,
}

impl SeriesKey {
    /// `case [target, hardware]` for messages.
    pub fn label(&self) -> String {
        if self.hardware.is_empty() {
            format!("{} [{}]", self.case, self.target)
        } else {
            format!("{} [{}, {}]", self.case, self.target, self.hardware)
        }
    }
}

/// A series with its extent.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesSummary {
    pub key: SeriesKey,
    pub runs: usize,
    pub samples: usize,
    pub first_date: String,
    pub last_date: String,
}

/// One series in one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Night {
    pub run_id: i64,
    pub digest: String,
    pub date: String,
    pub commit: Option<String>,
    pub params_digest: Option<String>,
    pub samples: Vec<f64>,
}

/// The digest that identifies a perf file in the history (blake3 of its JSON).
pub fn run_digest(file: &PerfFile) -> String {
    let text = serde_json::to_vec(file).unwrap_or_default();
    blake3::hash(&text).to_hex().to_string()
}

fn is_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

impl History {
    /// Opens an existing history for reading.
    pub fn open(path: &Path) -> Result<History, HistoryError> {
        Self::check_not_url(path)?;
        if !path.exists() {
            return Err(HistoryError::Missing {
                path: path.to_path_buf(),
            });
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| Self::classify(path, "opening", e))?;
        let h = History {
            conn,
            path: path.to_path_buf(),
        };
        match h.inspect()? {
            Found::Version(v) if v == SCHEMA_VERSION => Ok(h),
            Found::Version(v) if v > SCHEMA_VERSION => Err(HistoryError::NewerSchema {
                path: path.to_path_buf(),
                found: v,
                supported: SCHEMA_VERSION,
            }),
            Found::Version(v) => Err(HistoryError::Damaged {
                path: path.to_path_buf(),
                what: format!(
                    "schema version {v} is older than {SCHEMA_VERSION}; ingest into it once to upgrade it"
                ),
            }),
            Found::Empty => Err(HistoryError::Foreign {
                path: path.to_path_buf(),
                tables: "none".to_string(),
            }),
            Found::Foreign(t) => Err(HistoryError::Foreign {
                path: path.to_path_buf(),
                tables: t.join(", "),
            }),
        }
    }

    /// Opens a history for ingesting, creating the file (and its tables) when it is absent and
    /// upgrading an older schema.
    pub fn open_or_create(path: &Path) -> Result<History, HistoryError> {
        Self::check_not_url(path)?;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| Self::classify(path, "opening", e))?;
        let mut h = History {
            conn,
            path: path.to_path_buf(),
        };
        let from = match h.inspect()? {
            Found::Empty => 0,
            Found::Version(v) if v > SCHEMA_VERSION => {
                return Err(HistoryError::NewerSchema {
                    path: path.to_path_buf(),
                    found: v,
                    supported: SCHEMA_VERSION,
                })
            }
            Found::Version(v) => v,
            Found::Foreign(t) => {
                return Err(HistoryError::Foreign {
                    path: path.to_path_buf(),
                    tables: t.join(", "),
                })
            }
        };
        if from < SCHEMA_VERSION {
            schema::migrate(&mut h.conn, from).map_err(|e| h.sql("creating the tables", e))?;
        }
        Ok(h)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_not_url(path: &Path) -> Result<(), HistoryError> {
        let s = path.to_string_lossy();
        if is_url(&s) {
            return Err(HistoryError::UnsupportedUrl {
                url: s.into_owned(),
            });
        }
        Ok(())
    }

    fn classify(path: &Path, doing: &'static str, e: rusqlite::Error) -> HistoryError {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase)
            | Some(rusqlite::ErrorCode::DatabaseCorrupt) => HistoryError::NotADatabase {
                path: path.to_path_buf(),
            },
            _ => HistoryError::Sql {
                path: path.to_path_buf(),
                doing,
                source: e,
            },
        }
    }

    fn sql(&self, doing: &'static str, e: rusqlite::Error) -> HistoryError {
        Self::classify(&self.path, doing, e)
    }

    fn inspect(&self) -> Result<Found, HistoryError> {
        schema::inspect(&self.conn).map_err(|e| self.sql("reading the schema", e))
    }

    /// Adds every record of `file` as one run (one transaction). A file whose digest is
    /// already present is not added again.
    pub fn ingest(&mut self, file: &PerfFile, meta: &RunMeta) -> Result<Ingested, HistoryError> {
        let digest = run_digest(file);
        let path = self.path.clone();
        let err = |doing, e| Self::classify(&path, doing, e);
        if let Some(run_id) = self
            .conn
            .query_row("SELECT id FROM runs WHERE digest = ?1", [&digest], |r| {
                r.get::<_, i64>(0)
            })
            .optional()
            .map_err(|e| err("looking up the run", e))?
        {
            return Ok(Ingested::AlreadyPresent { run_id });
        }
        let env = file.environment.clone().unwrap_or_default();
        let now = crate::perf::perf_file::utc_now_rfc3339();
        let versions = serde_json::to_string(&env.versions).unwrap_or_else(|_| "{}".into());
        let tx = self
            .conn
            .transaction()
            .map_err(|e| err("starting a transaction", e))?;
        tx.execute(
            "INSERT INTO runs (digest, date, commit_id, hostname, device, versions, tier, seed, source, ingested_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                digest,
                env.date.clone().unwrap_or_else(|| now.clone()),
                env.commit,
                env.hostname,
                env.device,
                versions,
                meta.tier.clone().or(env.tier),
                meta.seed.clone().or(env.seed),
                meta.source,
                now
            ],
        )
        .map_err(|e| err("adding the run", e))?;
        let run_id = tx.last_insert_rowid();
        let mut samples = 0usize;
        {
            let mut find = tx
                .prepare_cached(
                    "SELECT id FROM series WHERE case_id = ?1 AND target = ?2 AND hardware = ?3",
                )
                .map_err(|e| err("preparing", e))?;
            let mut add_series = tx
                .prepare_cached(
                    "INSERT INTO series (case_id, target, hardware) VALUES (?1, ?2, ?3)",
                )
                .map_err(|e| err("preparing", e))?;
            let mut add_measurement = tx
                .prepare_cached(
                    "INSERT INTO measurements (series_id, run_id, params_digest, warmup, iterations, flops, bytes)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(|e| err("preparing", e))?;
            let mut add_sample = tx
                .prepare_cached(
                    "INSERT INTO samples (series_id, run_id, idx, value_us) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(|e| err("preparing", e))?;
            for rec in &file.cases {
                let hw = rec.hardware.clone().unwrap_or_default();
                let sid = match find
                    .query_row(params![rec.id, rec.target, hw], |r| r.get::<_, i64>(0))
                    .optional()
                    .map_err(|e| err("looking up a series", e))?
                {
                    Some(id) => id,
                    None => {
                        add_series
                            .execute(params![rec.id, rec.target, hw])
                            .map_err(|e| err("adding a series", e))?;
                        tx.last_insert_rowid()
                    }
                };
                add_measurement
                    .execute(params![
                        sid,
                        run_id,
                        rec.params_digest,
                        rec.warmup,
                        rec.iterations,
                        rec.flops,
                        rec.bytes
                    ])
                    .map_err(|e| err("adding a measurement", e))?;
                for (i, v) in rec.samples_us.iter().enumerate() {
                    add_sample
                        .execute(params![sid, run_id, i as i64, v])
                        .map_err(|e| err("adding a sample", e))?;
                }
                samples += rec.samples_us.len();
            }
        }
        tx.commit().map_err(|e| err("committing", e))?;
        Ok(Ingested::New {
            run_id,
            series: file.cases.len(),
            samples,
        })
    }

    /// Every series with its number of runs and samples and its first and last date.
    pub fn series(&self) -> Result<Vec<SeriesSummary>, HistoryError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT s.id, s.case_id, s.target, s.hardware,
                        COUNT(*), MIN(r.date), MAX(r.date),
                        (SELECT COUNT(*) FROM samples x WHERE x.series_id = s.id)
                 FROM series s JOIN measurements m ON m.series_id = s.id
                 JOIN runs r ON r.id = m.run_id
                 GROUP BY s.id ORDER BY s.case_id, s.target, s.hardware",
            )
            .map_err(|e| self.sql("listing the series", e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(SeriesSummary {
                    key: SeriesKey {
                        id: r.get(0)?,
                        case: r.get(1)?,
                        target: r.get(2)?,
                        hardware: r.get(3)?,
                    },
                    runs: r.get::<_, i64>(4)? as usize,
                    first_date: r.get(5)?,
                    last_date: r.get(6)?,
                    samples: r.get::<_, i64>(7)? as usize,
                })
            })
            .map_err(|e| self.sql("listing the series", e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.sql("listing the series", e))
    }

    /// Every run, oldest first: (id, date, commit).
    pub fn runs(&self) -> Result<Vec<(i64, String, Option<String>)>, HistoryError> {
        self.conn
            .prepare("SELECT id, date, commit_id FROM runs ORDER BY date, id")
            .and_then(|mut s| {
                s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| self.sql("listing the runs", e))
    }

    /// The series of `case`, narrowed by target and hardware when given; an error names the
    /// candidates when several remain.
    pub fn find_series(
        &self,
        case: &str,
        target: Option<&str>,
        hardware: Option<&str>,
    ) -> Result<SeriesKey, HistoryError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, case_id, target, hardware FROM series WHERE case_id = ?1
                 ORDER BY target, hardware",
            )
            .map_err(|e| self.sql("finding the series", e))?;
        let all: Vec<SeriesKey> = stmt
            .query_map([case], |r| {
                Ok(SeriesKey {
                    id: r.get(0)?,
                    case: r.get(1)?,
                    target: r.get(2)?,
                    hardware: r.get(3)?,
                })
            })
            .and_then(|rows| rows.collect::<Result<_, _>>())
            .map_err(|e| self.sql("finding the series", e))?;
        let mut found: Vec<SeriesKey> = all
            .into_iter()
            .filter(|k| target.is_none_or(|t| k.target == t))
            .filter(|k| hardware.is_none_or(|h| k.hardware == h))
            .collect();
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err(HistoryError::UnknownSeries {
                path: self.path.clone(),
                case: case.to_string(),
                target: target.map(str::to_string),
                hardware: hardware.map(str::to_string),
            }),
            _ => Err(HistoryError::AmbiguousSeries {
                path: self.path.clone(),
                case: case.to_string(),
                series: found
                    .iter()
                    .map(SeriesKey::label)
                    .collect::<Vec<_>>()
                    .join("; "),
            }),
        }
    }

    /// The exact series (case, target, hardware), if the history has it.
    pub fn series_of(
        &self,
        case: &str,
        target: &str,
        hardware: &str,
    ) -> Result<Option<SeriesKey>, HistoryError> {
        self.conn
            .prepare_cached(
                "SELECT id FROM series WHERE case_id = ?1 AND target = ?2 AND hardware = ?3",
            )
            .and_then(|mut s| {
                s.query_row(params![case, target, hardware], |r| r.get::<_, i64>(0))
                    .optional()
            })
            .map(|id| {
                id.map(|id| SeriesKey {
                    id,
                    case: case.to_string(),
                    target: target.to_string(),
                    hardware: hardware.to_string(),
                })
            })
            .map_err(|e| self.sql("finding the series", e))
    }

    /// Every run of a series, oldest first (by date, then by ingestion order), with its
    /// samples in the order they were measured.
    pub fn nights(&self, series: &SeriesKey) -> Result<Vec<Night>, HistoryError> {
        let mut runs = self
            .conn
            .prepare_cached(
                "SELECT r.id, r.digest, r.date, r.commit_id, m.params_digest
                 FROM measurements m JOIN runs r ON r.id = m.run_id
                 WHERE m.series_id = ?1 ORDER BY r.date, r.id",
            )
            .map_err(|e| self.sql("reading the runs", e))?;
        let mut nights: Vec<Night> = runs
            .query_map([series.id], |r| {
                Ok(Night {
                    run_id: r.get(0)?,
                    digest: r.get(1)?,
                    date: r.get(2)?,
                    commit: r.get(3)?,
                    params_digest: r.get(4)?,
                    samples: Vec::new(),
                })
            })
            .and_then(|rows| rows.collect::<Result<_, _>>())
            .map_err(|e| self.sql("reading the runs", e))?;
        let index: std::collections::HashMap<i64, usize> = nights
            .iter()
            .enumerate()
            .map(|(i, n)| (n.run_id, i))
            .collect();
        let mut samples = self
            .conn
            .prepare_cached(
                "SELECT run_id, value_us FROM samples WHERE series_id = ?1 ORDER BY run_id, idx",
            )
            .map_err(|e| self.sql("reading the samples", e))?;
        let mut rows = samples
            .query([series.id])
            .map_err(|e| self.sql("reading the samples", e))?;
        while let Some(row) = rows
            .next()
            .map_err(|e| self.sql("reading the samples", e))?
        {
            let (run, v): (i64, f64) = (
                row.get(0).map_err(|e| self.sql("reading the samples", e))?,
                row.get(1).map_err(|e| self.sql("reading the samples", e))?,
            );
            let Some(&i) = index.get(&run) else {
                return Err(HistoryError::Damaged {
                    path: self.path.clone(),
                    what: format!(
                        "samples of run {run} for `{}` have no measurement row",
                        series.label()
                    ),
                });
            };
            if !(v.is_finite() && v > 0.0) {
                return Err(HistoryError::Damaged {
                    path: self.path.clone(),
                    what: format!("run {run} of `{}` holds the sample {v}", series.label()),
                });
            }
            nights[i].samples.push(v);
        }
        Ok(nights)
    }

    /// Writes every sample (optionally only the series whose case matches `case`) as CSV:
    /// one row per sample. Returns the number of rows.
    pub fn export_csv(
        &self,
        out: &mut dyn std::io::Write,
        case: Option<&regex::Regex>,
    ) -> Result<usize, HistoryError> {
        let io = |e: std::io::Error| HistoryError::Damaged {
            path: self.path.clone(),
            what: format!("writing the CSV: {e}"),
        };
        writeln!(
            out,
            "run_id,date,commit,hostname,device,tier,seed,case,target,hardware,params_digest,sample_index,value_us"
        )
        .map_err(io)?;
        let mut stmt = self
            .conn
            .prepare(
                "SELECT r.id, r.date, r.commit_id, r.hostname, r.device, r.tier, r.seed,
                        s.case_id, s.target, s.hardware, m.params_digest, x.idx, x.value_us
                 FROM samples x
                 JOIN series s ON s.id = x.series_id
                 JOIN runs r ON r.id = x.run_id
                 JOIN measurements m ON m.series_id = x.series_id AND m.run_id = x.run_id
                 ORDER BY s.case_id, s.target, s.hardware, r.date, r.id, x.idx",
            )
            .map_err(|e| self.sql("exporting", e))?;
        let mut rows = stmt.query([]).map_err(|e| self.sql("exporting", e))?;
        let mut n = 0;
        while let Some(r) = rows.next().map_err(|e| self.sql("exporting", e))? {
            let text = |i: usize| -> Result<String, HistoryError> {
                let v: Option<String> = r.get(i).map_err(|e| self.sql("exporting", e))?;
                Ok(csv_field(v.as_deref().unwrap_or("")))
            };
            let case_id: String = r.get(7).map_err(|e| self.sql("exporting", e))?;
            if case.is_some_and(|re| !re.is_match(&case_id)) {
                continue;
            }
            let run: i64 = r.get(0).map_err(|e| self.sql("exporting", e))?;
            let idx: i64 = r.get(11).map_err(|e| self.sql("exporting", e))?;
            let v: f64 = r.get(12).map_err(|e| self.sql("exporting", e))?;
            writeln!(
                out,
                "{run},{},{},{},{},{},{},{},{},{},{},{idx},{v}",
                text(1)?,
                text(2)?,
                text(3)?,
                text(4)?,
                text(5)?,
                text(6)?,
                csv_field(&case_id),
                text(8)?,
                text(9)?,
                text(10)?,
            )
            .map_err(io)?;
            n += 1;
        }
        Ok(n)
    }
}

/// A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
