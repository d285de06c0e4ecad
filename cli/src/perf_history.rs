//! `conform perf history ...`: the perf history store (ingest, list, show, export) and the
//! gate against it.
//!
//! Exit codes (`conform_harness::exit_code`): success; failure, `gate` found a REGRESSION;
//! inconclusive, `gate` found no regression but a case it could not judge; usage, a bad
//! argument or a file that is not a usable history (named, left untouched); nothing judged,
//! `gate` found no case with an earlier run.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::error::CliError;
use conform_harness::exit_code;
use conform_harness::messages::perf as perf_messages;
use conform_harness::messages::perf_history as messages;
use conform_harness::perf::changepoint::ChangePointConfig;
use conform_harness::perf::history::{self, History, RunMeta};
use conform_harness::perf::{PerfError, PerfFile, PerfFileIo};

/// The default history file: the one `ci/nightly-perf.sh` writes by default (its history
/// directory `perf-history`), so `conform perf history show` run where the script ran finds it.
pub const DEFAULT_DB: &str = "perf-history/perf-history.sqlite";

#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Add perf files (from `conform perf record`) to the history, one run each.
    Ingest(IngestArgs),
    /// List the series (case, target, hardware) with their runs and samples.
    List(DbArg),
    /// One case's runs, per-run locations, change points, the nights judged as drift and the
    /// learned night-to-night noise band.
    Show(ShowArgs),
    /// Every sample as CSV, one row per sample.
    Export(ExportArgs),
    /// Compare a perf file with the newest segment of each of its series; exit 1 on a
    /// regression.
    Gate(GateArgs),
}

#[derive(Debug, Args)]
pub struct DbArg {
    /// The history: a SQLite file, or a PostgreSQL URL (`postgres://user@host/db`) that many
    /// runners share (default: the nightly script's).
    #[arg(long, value_name = "FILE|URL", default_value = DEFAULT_DB)]
    pub db: String,
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Perf files to add (in this order).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Record this tier (quick, full, all) instead of the file's.
    #[arg(long, value_enum)]
    pub tier: Option<super::tier_arg::TierArg>,
    /// Record this input seed (`cases`, `fresh` or a number) instead of the file's.
    #[arg(long)]
    pub seed: Option<String>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The case id (`conform perf history list` lists them).
    pub case: String,
    /// The target of the series, when the case was timed on several.
    #[arg(long)]
    pub target: Option<String>,
    /// The hardware profile of the series, when the case was timed on several.
    #[arg(long)]
    pub hardware: Option<String>,
    /// The gate's threshold for flagging a run against the runs before it (0.03 = 3%).
    #[arg(long, default_value_t = 0.03, allow_negative_numbers = true)]
    pub threshold: f64,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Where to write the CSV, one row per sample (`-` or left out: standard output).
    #[arg(long, value_name = "FILE", default_value = "-")]
    pub csv: PathBuf,
    /// Only cases whose id matches this regular expression.
    #[arg(long)]
    pub case: Option<String>,
}

#[derive(Debug, Args)]
pub struct GateArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The perf file to judge (it may already be ingested: its own run is left out).
    #[arg(long)]
    pub candidate: PathBuf,
    /// The threshold, and the JSON (the comparison plus what each case was compared against).
    #[command(flatten)]
    pub gate: super::gate_output::GateOutputArgs,
}

/// Runs a history subcommand; returns the code its work earned, or why it could not run or
/// deliver it.
pub fn run(cmd: &HistoryCommand) -> Result<i32, CliError> {
    match cmd {
        HistoryCommand::Ingest(a) => {
            // Every file is read and validated before the store is touched.
            let files = a
                .files
                .iter()
                .map(|p| PerfFile::read(p).map(|f| (p, f)))
                .collect::<Result<Vec<_>, PerfError>>()?;
            // A run without a case would be a night with nothing in it: refused, nothing added.
            if let Some((p, _)) = files.iter().find(|(_, f)| f.cases.is_empty()) {
                return Err(CliError::NothingJudged(messages::no_case(p)));
            }
            let mut h = History::open_or_create_with_dir(&a.db.db)?;
            for (p, f) in files {
                let meta = RunMeta {
                    tier: a.tier.map(|t| {
                        conform_harness::suite::TierChoice::from(t)
                            .name()
                            .to_string()
                    }),
                    seed: a.seed.clone(),
                    source: p.file_name().map(|n| n.to_string_lossy().into_owned()),
                };
                let what = h.ingest(&f, &meta)?;
                conform_harness::outln!("{}", messages::ingested(p, h.location(), &what));
            }
            Ok(exit_code::SUCCESS)
        }
        HistoryCommand::List(a) => {
            let mut h = History::open(&a.db)?;
            let series = h.series()?;
            conform_harness::out!("{}", messages::series_table(h.location(), &series));
            Ok(exit_code::SUCCESS)
        }
        HistoryCommand::Show(a) => {
            let mut h = History::open(&a.db.db)?;
            let key = h.find_series(&a.case, a.target.as_deref(), a.hardware.as_deref())?;
            let (nights, other_params) = history::gate::with_newest_params(h.nights(&key)?);
            if other_params > 0 {
                conform_harness::outln!("{}", messages::other_params_left_out(other_params));
            }
            let analysis = history::analyse(&key, &nights, &ChangePointConfig::default());
            let flagged = history::flagged_runs(
                &nights,
                &analysis,
                &conform_harness::perf::GateConfig::with_threshold(a.threshold)
                    .map_err(PerfError::from)?,
            );
            let noise = history::gate::series_noise(&nights, &analysis);
            conform_harness::out!(
                "{}",
                messages::series_detail(&key, &nights, &analysis, &flagged, noise.as_ref())
            );
            Ok(exit_code::SUCCESS)
        }
        HistoryCommand::Export(a) => {
            let to_stdout = a.csv.as_os_str() == "-";
            // The CSV path is checked before the store is read, as every output is.
            if !to_stdout {
                conform_harness::atomic_file::check_writable(&a.csv).map_err(|problem| {
                    PerfError::InvalidArgument {
                        field: "--csv",
                        problem: problem.to_string(),
                    }
                })?;
            }
            let re = a
                .case
                .as_deref()
                .map(regex::Regex::new)
                .transpose()
                .map_err(|e| PerfError::InvalidArgument {
                    field: "--case",
                    problem: e.to_string(),
                })?;
            let mut h = History::open(&a.db.db)?;
            let mut buf = Vec::new();
            let rows = h.export_csv(&mut buf, re.as_ref())?;
            if to_stdout {
                use std::io::Write as _;
                let _ = std::io::stdout().write_all(&buf);
            } else {
                conform_harness::atomic_file::write(&a.csv, &buf).map_err(|source| {
                    let e = PerfError::Write {
                        path: a.csv.clone(),
                        source,
                    };
                    CliError::after_work(e, exit_code::SUCCESS)
                })?;
                conform_harness::outln!(
                    "{}",
                    messages::exported(rows, &a.csv.display().to_string())
                );
            }
            Ok(exit_code::SUCCESS)
        }
        HistoryCommand::Gate(a) => gate(a),
    }
}

fn gate(a: &GateArgs) -> Result<i32, CliError> {
    let cfg = a.gate.check()?;
    let candidate = PerfFile::read(&a.candidate)?;
    let mut h = History::open(&a.db.db)?;
    let result = history::gate(&mut h, &candidate, &cfg, &ChangePointConfig::default())?;
    conform_harness::out!("{}", perf_messages::comparison_table(&result.comparison));
    conform_harness::out!("{}", messages::references(&result.references));
    for c in &result.comparison.cases {
        if c.result.verdict == conform_harness::perf::Verdict::Regression {
            conform_harness::outln!(
                "{}",
                messages::regression(&c.id, &c.target, &c.result.reason)
            );
        }
    }
    let code = result.comparison.exit_code();
    // The comparison is made: a JSON that cannot be written now is an output lost after the
    // work (exit 1).
    match a.gate.write_json(&result) {
        Ok(Some(line)) => conform_harness::outln!("{line}"),
        Ok(None) => {}
        Err(e) => return Err(CliError::after_work(e, code)),
    }
    if code == exit_code::NOTHING_JUDGED {
        conform_harness::outln!("{}", messages::first_run(h.location()));
    }
    Ok(code)
}
