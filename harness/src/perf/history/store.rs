//! The perf history store: every raw sample of every ingested perf file, in one SQLite file or
//! in a PostgreSQL database shared by many runners (a `postgres://` or `postgresql://` URL;
//! the same tables, [`super::schema`]).
//!
//! Reading commands open a file read-only and never create it; `ingest` creates it when it is
//! absent. Before anything is written the database is inspected: a damaged file, a database of
//! another application, or a history of a newer schema is refused by name and left as it was.
//! Each ingested file is one transaction, so an interrupted ingest leaves the store as before.

use std::path::Path;

use super::backend::{Backend, BackendError, Value};
use super::error::HistoryError;
use super::schema::{self, Found, SCHEMA_VERSION};
use crate::perf::PerfFile;

/// An open history.
pub struct History {
    db: Backend,
    /// The file, or the URL without its password, for messages.
    location: String,
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

/// Whether `location` names a PostgreSQL database rather than a file.
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// A URL as messages show it: `user:password@` becomes `user:***@`.
pub fn redacted(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => match rest[..at].find(':') {
            Some(colon) => format!(
                "{}{}:***{}",
                &url[..scheme_end],
                &rest[..colon],
                &rest[at..]
            ),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// A directory given where the history's database file is expected: SQLite would only say
/// "disk I/O error" or "unable to open database file". Nor is anything else but a regular file
/// (a device such as `/dev/zero`, a FIFO, which SQLite would wait on forever): a history is
/// a SQLite file, read page by page, so its size needs no limit of its own.
fn refuse_directory(location: &str) -> Result<(), HistoryError> {
    let Ok(meta) = std::fs::metadata(location) else {
        return Ok(());
    };
    let what = if meta.is_dir() {
        "is a directory, not a perf history database file (give a file path, e.g. \
         DIR/perf-history.sqlite)"
    } else if !meta.is_file() {
        "is not a regular file (a device, a FIFO or a socket): a perf history is a SQLite \
         database file"
    } else {
        return Ok(());
    };
    Err(HistoryError::Damaged {
        location: location.to_string(),
        what: what.to_string(),
    })
}

impl History {
    /// Opens an existing history for reading: a file path or a PostgreSQL URL.
    pub fn open(location: &str) -> Result<History, HistoryError> {
        let mut h = if is_postgres_url(location) {
            Self::connect(location)?
        } else {
            let path = Path::new(location);
            refuse_directory(location)?;
            if !path.exists() {
                return Err(HistoryError::Missing {
                    location: location.to_string(),
                });
            }
            History {
                db: Backend::open_sqlite(path, false)
                    .map_err(|e| classify(location, "opening", e))?,
                location: location.to_string(),
            }
        };
        match h.inspect()? {
            Found::Version(v) if v == SCHEMA_VERSION => Ok(h),
            Found::Version(v) if v > SCHEMA_VERSION => Err(h.newer(v)),
            Found::Version(v) => Err(HistoryError::Damaged {
                location: h.location.clone(),
                what: format!(
                    "schema version {v} is older than {SCHEMA_VERSION}; ingest into it once to upgrade it"
                ),
            }),
            Found::Empty if !h.db.is_sqlite() => Err(HistoryError::Missing {
                location: h.location.clone(),
            }),
            Found::Empty => Err(HistoryError::Foreign {
                location: h.location.clone(),
                tables: "none".to_string(),
            }),
            Found::Foreign(t) => Err(HistoryError::Foreign {
                location: h.location.clone(),
                tables: t.join(", "),
            }),
        }
    }

    /// [`History::open_or_create`], creating the directory of a SQLite file first when it is
    /// missing.
    pub fn open_or_create_with_dir(location: &str) -> Result<History, HistoryError> {
        if !is_postgres_url(location)
            && let Some(dir) = std::path::Path::new(location).parent()
            && !dir.as_os_str().is_empty()
            && !dir.exists()
        {
            std::fs::create_dir_all(dir).map_err(|e| HistoryError::Damaged {
                location: location.to_string(),
                what: format!("creating its directory {}: {e}", dir.display()),
            })?;
        }
        Self::open_or_create(location)
    }

    /// Opens a history for ingesting, creating the file (and the tables, in a file or an empty
    /// PostgreSQL schema) when absent and upgrading an older schema.
    pub fn open_or_create(location: &str) -> Result<History, HistoryError> {
        let mut h = if is_postgres_url(location) {
            Self::connect(location)?
        } else {
            refuse_directory(location)?;
            History {
                db: Backend::open_sqlite(Path::new(location), true)
                    .map_err(|e| classify(location, "opening", e))?,
                location: location.to_string(),
            }
        };
        let from = match h.inspect()? {
            Found::Empty => 0,
            Found::Version(v) if v > SCHEMA_VERSION => return Err(h.newer(v)),
            Found::Version(v) => v,
            Found::Foreign(t) => {
                return Err(HistoryError::Foreign {
                    location: h.location.clone(),
                    tables: t.join(", "),
                })
            }
        };
        if from < SCHEMA_VERSION {
            schema::migrate(&mut h.db, from).map_err(|e| h.sql("creating the tables", e))?;
        }
        Ok(h)
    }

    fn connect(url: &str) -> Result<History, HistoryError> {
        let location = redacted(url);
        let db = Backend::connect_postgres(url).map_err(|source| HistoryError::Unreachable {
            location: location.clone(),
            source,
        })?;
        Ok(History { db, location })
    }

    /// The file, or the URL without its password.
    pub fn location(&self) -> &str {
        &self.location
    }

    fn newer(&self, found: i64) -> HistoryError {
        HistoryError::NewerSchema {
            location: self.location.clone(),
            found,
            supported: SCHEMA_VERSION,
        }
    }

    fn sql(&self, doing: &'static str, e: BackendError) -> HistoryError {
        classify(&self.location, doing, e)
    }

    fn inspect(&mut self) -> Result<Found, HistoryError> {
        schema::inspect(&mut self.db).map_err(|e| self.sql("reading the schema", e))
    }

    fn query(
        &mut self,
        doing: &'static str,
        sql: &str,
        params: &[Value],
    ) -> Result<Vec<Vec<Value>>, HistoryError> {
        self.db
            .query(sql, params)
            .map_err(|e| classify(&self.location, doing, e))
    }

    /// Adds every record of `file` as one run (one transaction). A file whose digest is
    /// already present is not added again.
    pub fn ingest(&mut self, file: &PerfFile, meta: &RunMeta) -> Result<Ingested, HistoryError> {
        let digest = run_digest(file);
        let found = self.query(
            "looking up the run",
            "SELECT id FROM runs WHERE digest = ?1",
            &[Value::text(&digest)],
        )?;
        if let Some(run_id) = found.first().and_then(|r| r[0].as_i64()) {
            return Ok(Ingested::AlreadyPresent { run_id });
        }
        self.db
            .batch("BEGIN")
            .map_err(|e| self.sql("starting a transaction", e))?;
        match self.ingest_in_transaction(file, meta, &digest) {
            Ok(done) => {
                self.db
                    .batch("COMMIT")
                    .map_err(|e| self.sql("committing", e))?;
                Ok(done)
            }
            Err(e) => {
                let _ = self.db.batch("ROLLBACK");
                Err(e)
            }
        }
    }

    fn ingest_in_transaction(
        &mut self,
        file: &PerfFile,
        meta: &RunMeta,
        digest: &str,
    ) -> Result<Ingested, HistoryError> {
        let env = file.environment.clone().unwrap_or_default();
        let now = crate::perf::perf_file::utc_now_rfc3339();
        let versions = serde_json::to_string(&env.versions).unwrap_or_else(|_| "{}".into());
        let run = self.query(
            "adding the run",
            "INSERT INTO runs (digest, date, commit_id, hostname, device, versions, tier, seed, source, ingested_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) RETURNING id",
            &[
                Value::text(digest),
                Value::text(env.date.clone().unwrap_or_else(|| now.clone())),
                Value::opt_text(env.commit.as_deref()),
                Value::opt_text(env.hostname.as_deref()),
                Value::opt_text(env.device.as_deref()),
                Value::text(versions),
                Value::opt_text(meta.tier.as_deref().or(env.tier.as_deref())),
                Value::opt_text(meta.seed.as_deref().or(env.seed.as_deref())),
                Value::opt_text(meta.source.as_deref()),
                Value::text(now),
            ],
        )?;
        let run_id =
            run.first()
                .and_then(|r| r[0].as_i64())
                .ok_or_else(|| HistoryError::Damaged {
                    location: self.location.clone(),
                    what: "the new run got no id".to_string(),
                })?;
        let mut samples = 0usize;
        for rec in &file.cases {
            let hw = rec.hardware.clone().unwrap_or_default();
            let key = [
                Value::text(&rec.id),
                Value::text(&rec.target),
                Value::text(&hw),
            ];
            let found = self.query(
                "looking up a series",
                "SELECT id FROM series WHERE case_id = ?1 AND target = ?2 AND hardware = ?3",
                &key,
            )?;
            let sid = match found.first().and_then(|r| r[0].as_i64()) {
                Some(id) => id,
                None => self
                    .query(
                        "adding a series",
                        "INSERT INTO series (case_id, target, hardware) VALUES (?1, ?2, ?3) RETURNING id",
                        &key,
                    )?
                    .first()
                    .and_then(|r| r[0].as_i64())
                    .ok_or_else(|| HistoryError::Damaged {
                        location: self.location.clone(),
                        what: "a new series got no id".to_string(),
                    })?,
            };
            self.db
                .execute(
                    "INSERT INTO measurements (series_id, run_id, params_digest, warmup, iterations, flops, bytes)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    &[
                        Value::Int(Some(sid)),
                        Value::Int(Some(run_id)),
                        Value::opt_text(rec.params_digest.as_deref()),
                        Value::Int(rec.warmup.map(i64::from)),
                        Value::Int(rec.iterations.map(i64::from)),
                        Value::Real(rec.flops),
                        Value::Real(rec.bytes),
                    ],
                )
                .map_err(|e| self.sql("adding a measurement", e))?;
            for (i, v) in rec.samples_us.iter().enumerate() {
                self.db
                    .execute(
                        "INSERT INTO samples (series_id, run_id, idx, value_us) VALUES (?1, ?2, ?3, ?4)",
                        &[
                            Value::Int(Some(sid)),
                            Value::Int(Some(run_id)),
                            Value::Int(Some(i as i64)),
                            Value::Real(Some(*v)),
                        ],
                    )
                    .map_err(|e| self.sql("adding a sample", e))?;
            }
            samples += rec.samples_us.len();
        }
        Ok(Ingested::New {
            run_id,
            series: file.cases.len(),
            samples,
        })
    }

    /// Every series with its number of runs and samples and its first and last date.
    pub fn series(&mut self) -> Result<Vec<SeriesSummary>, HistoryError> {
        let rows = self.query(
            "listing the series",
            "SELECT s.id, s.case_id, s.target, s.hardware,
                    COUNT(*), MIN(r.date), MAX(r.date),
                    (SELECT COUNT(*) FROM samples x WHERE x.series_id = s.id)
             FROM series s JOIN measurements m ON m.series_id = s.id
             JOIN runs r ON r.id = m.run_id
             GROUP BY s.id, s.case_id, s.target, s.hardware
             ORDER BY s.case_id, s.target, s.hardware",
            &[],
        )?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let mut it = r.into_iter();
                let mut next = || it.next().unwrap_or(Value::Text(None));
                let id = next().as_i64().unwrap_or(0);
                let (case, target, hardware) = (next(), next(), next());
                let runs = next().as_i64().unwrap_or(0) as usize;
                let (first, last) = (next(), next());
                let samples = next().as_i64().unwrap_or(0) as usize;
                SeriesSummary {
                    key: SeriesKey {
                        id,
                        case: case.into_text().unwrap_or_default(),
                        target: target.into_text().unwrap_or_default(),
                        hardware: hardware.into_text().unwrap_or_default(),
                    },
                    runs,
                    samples,
                    first_date: first.into_text().unwrap_or_default(),
                    last_date: last.into_text().unwrap_or_default(),
                }
            })
            .collect())
    }

    /// The series of `case`, narrowed by target and hardware when given; an error names the
    /// candidates when several remain.
    pub fn find_series(
        &mut self,
        case: &str,
        target: Option<&str>,
        hardware: Option<&str>,
    ) -> Result<SeriesKey, HistoryError> {
        let rows = self.query(
            "finding the series",
            "SELECT id, target, hardware FROM series WHERE case_id = ?1 ORDER BY target, hardware",
            &[Value::text(case)],
        )?;
        let mut found: Vec<SeriesKey> = rows
            .into_iter()
            .map(|r| {
                let mut it = r.into_iter();
                SeriesKey {
                    id: it.next().and_then(|v| v.as_i64()).unwrap_or(0),
                    case: case.to_string(),
                    target: it.next().and_then(Value::into_text).unwrap_or_default(),
                    hardware: it.next().and_then(Value::into_text).unwrap_or_default(),
                }
            })
            .filter(|k| target.is_none_or(|t| k.target == t))
            .filter(|k| hardware.is_none_or(|h| k.hardware == h))
            .collect();
        match found.len() {
            1 => Ok(found.remove(0)),
            0 => Err(HistoryError::UnknownSeries {
                location: self.location.clone(),
                case: case.to_string(),
                target: target.map(str::to_string),
                hardware: hardware.map(str::to_string),
            }),
            _ => Err(HistoryError::AmbiguousSeries {
                location: self.location.clone(),
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
        &mut self,
        case: &str,
        target: &str,
        hardware: &str,
    ) -> Result<Option<SeriesKey>, HistoryError> {
        let rows = self.query(
            "finding the series",
            "SELECT id FROM series WHERE case_id = ?1 AND target = ?2 AND hardware = ?3",
            &[
                Value::text(case),
                Value::text(target),
                Value::text(hardware),
            ],
        )?;
        Ok(rows
            .first()
            .and_then(|r| r[0].as_i64())
            .map(|id| SeriesKey {
                id,
                case: case.to_string(),
                target: target.to_string(),
                hardware: hardware.to_string(),
            }))
    }

    /// Every run, oldest first: (id, date, commit).
    pub fn runs(&mut self) -> Result<Vec<(i64, String, Option<String>)>, HistoryError> {
        let rows = self.query(
            "listing the runs",
            "SELECT id, date, commit_id FROM runs ORDER BY date, id",
            &[],
        )?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let mut it = r.into_iter();
                (
                    it.next().and_then(|v| v.as_i64()).unwrap_or(0),
                    it.next().and_then(Value::into_text).unwrap_or_default(),
                    it.next().and_then(Value::into_text),
                )
            })
            .collect())
    }

    /// Every run of a series, oldest first (by date, then by ingestion order), with its
    /// samples in the order they were measured.
    pub fn nights(&mut self, series: &SeriesKey) -> Result<Vec<Night>, HistoryError> {
        let runs = self.query(
            "reading the runs",
            "SELECT r.id, r.digest, r.date, r.commit_id, m.params_digest
             FROM measurements m JOIN runs r ON r.id = m.run_id
             WHERE m.series_id = ?1 ORDER BY r.date, r.id",
            &[Value::Int(Some(series.id))],
        )?;
        let mut nights: Vec<Night> = runs
            .into_iter()
            .map(|r| {
                let mut it = r.into_iter();
                Night {
                    run_id: it.next().and_then(|v| v.as_i64()).unwrap_or(0),
                    digest: it.next().and_then(Value::into_text).unwrap_or_default(),
                    date: it.next().and_then(Value::into_text).unwrap_or_default(),
                    commit: it.next().and_then(Value::into_text),
                    params_digest: it.next().and_then(Value::into_text),
                    samples: Vec::new(),
                }
            })
            .collect();
        let index: std::collections::HashMap<i64, usize> = nights
            .iter()
            .enumerate()
            .map(|(i, n)| (n.run_id, i))
            .collect();
        let rows = self.query(
            "reading the samples",
            "SELECT run_id, value_us FROM samples WHERE series_id = ?1 ORDER BY run_id, idx",
            &[Value::Int(Some(series.id))],
        )?;
        for row in rows {
            let (run, v) = (
                row[0].as_i64().unwrap_or(-1),
                row[1].as_f64().unwrap_or(f64::NAN),
            );
            let Some(&i) = index.get(&run) else {
                return Err(HistoryError::Damaged {
                    location: self.location.clone(),
                    what: format!(
                        "samples of run {run} for `{}` have no measurement row",
                        series.label()
                    ),
                });
            };
            if !crate::perf::perf_file::is_valid_sample(v) {
                return Err(HistoryError::Damaged {
                    location: self.location.clone(),
                    what: format!(
                        "run {run} of `{}` holds the sample {v} (not a finite time in (0, {:e}] us)",
                        series.label(),
                        crate::perf::perf_file::MAX_SAMPLE_US
                    ),
                });
            }
            nights[i].samples.push(v);
        }
        Ok(nights)
    }

    /// Writes every sample (optionally only the series whose case matches `case`) as CSV:
    /// one row per sample. Returns the number of rows.
    pub fn export_csv(
        &mut self,
        out: &mut dyn std::io::Write,
        case: Option<&regex::Regex>,
    ) -> Result<usize, HistoryError> {
        let location = self.location.clone();
        let io = |e: std::io::Error| HistoryError::Damaged {
            location: location.clone(),
            what: format!("writing the CSV: {e}"),
        };
        writeln!(
            out,
            "run_id,date,commit,hostname,device,tier,seed,case,target,hardware,params_digest,sample_index,value_us"
        )
        .map_err(io)?;
        let rows = self.query(
            "exporting",
            "SELECT r.id, r.date, r.commit_id, r.hostname, r.device, r.tier, r.seed,
                    s.case_id, s.target, s.hardware, m.params_digest, x.idx, x.value_us
             FROM samples x
             JOIN series s ON s.id = x.series_id
             JOIN runs r ON r.id = x.run_id
             JOIN measurements m ON m.series_id = x.series_id AND m.run_id = x.run_id
             ORDER BY s.case_id, s.target, s.hardware, r.date, r.id, x.idx",
            &[],
        )?;
        let mut n = 0;
        for r in rows {
            let case_id = r[7].clone().into_text().unwrap_or_default();
            if case.is_some_and(|re| !re.is_match(&case_id)) {
                continue;
            }
            let text = |i: usize| csv_field(r[i].clone().into_text().as_deref().unwrap_or(""));
            writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{}",
                r[0].as_i64().unwrap_or(0),
                text(1),
                text(2),
                text(3),
                text(4),
                text(5),
                text(6),
                csv_field(&case_id),
                text(8),
                text(9),
                text(10),
                r[11].as_i64().unwrap_or(0),
                r[12].as_f64().unwrap_or(f64::NAN)
            )
            .map_err(io)?;
            n += 1;
        }
        Ok(n)
    }
}

/// The history error for a database error: a file SQLite cannot read is named as such.
fn classify(location: &str, doing: &'static str, e: BackendError) -> HistoryError {
    if e.is_not_a_database() {
        HistoryError::NotADatabase {
            location: location.to_string(),
        }
    } else {
        HistoryError::Sql {
            location: location.to_string(),
            doing,
            source: e,
        }
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
