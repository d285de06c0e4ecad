//! `conform perf ...`: the baseline comparison gate.
//!
//! Exit codes: 0 no regression, 1 at least one REGRESSION, 2 bad input (the message names
//! the file and field).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::messages::perf as messages;
use crate::perf::{compare, GateConfig, PerfError, PerfFile};

/// Exit status: no case regressed.
pub const EXIT_OK: u8 = 0;
/// Exit status: at least one case regressed.
pub const EXIT_REGRESSION: u8 = 1;
/// Exit status: unreadable or invalid input.
pub const EXIT_BAD_INPUT: u8 = 2;

#[derive(Debug, Subcommand)]
pub enum PerfCommand {
    /// Compare a candidate perf file against a baseline; exit 1 on any regression.
    Compare(CompareArgs),
    /// Run the selected cases with timing and write their raw samples as a perf file.
    Record(Box<RecordArgs>),
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Where to write the perf file (JSON, schema in docs/perf.md).
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub run: crate::cli::run::RunArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline perf file (JSON).
    #[arg(long)]
    pub baseline: PathBuf,
    /// Candidate perf file (JSON).
    #[arg(long)]
    pub candidate: PathBuf,
    /// Relative slowdown that counts as a regression (0.03 = 3%).
    #[arg(long, default_value_t = 0.03)]
    pub threshold: f64,
    /// Also write the comparison as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Run a `perf` subcommand; returns the process exit status.
pub fn run(paths: &crate::cli::paths::Paths, cmd: &PerfCommand) -> u8 {
    match cmd {
        PerfCommand::Record(args) => match record(paths, args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("{}", crate::messages::error_line(&format!("{e:#}")));
                EXIT_BAD_INPUT
            }
        },
        PerfCommand::Compare(args) => match run_compare(args) {
            Ok((table, regressed)) => {
                print!("{table}");
                if regressed {
                    EXIT_REGRESSION
                } else {
                    EXIT_OK
                }
            }
            Err(e) => {
                eprintln!("{}", messages::bad_input(&e));
                EXIT_BAD_INPUT
            }
        },
    }
}

/// The comparison as a printed table and whether anything regressed.
pub fn run_compare(args: &CompareArgs) -> Result<(String, bool), PerfError> {
    let cfg = GateConfig::with_threshold(args.threshold)?;
    let baseline = PerfFile::read(&args.baseline)?;
    let candidate = PerfFile::read(&args.candidate)?;
    let cmp = compare(&baseline, &candidate, &cfg);
    let mut table = messages::comparison_table(&cmp);
    if let Some(out) = &args.json {
        let mut text = serde_json::to_string_pretty(&cmp).map_err(PerfError::Serialise)?;
        text.push('\n');
        std::fs::write(out, text).map_err(|source| PerfError::Write {
            path: out.clone(),
            source,
        })?;
        table.push_str(&messages::wrote_json(out));
        table.push('\n');
    }
    Ok((table, cmp.has_regression()))
}

/// `conform perf record`: `conform run --perf` on the selection, then the samples of every
/// timed case as a perf file. Exits like `conform run` (1 if a case failed or broke a budget).
fn record(paths: &crate::cli::paths::Paths, args: &RecordArgs) -> anyhow::Result<u8> {
    let mut run_args = args.run.clone();
    run_args.perf = true;
    let (results, code) = crate::cli::run::execute(paths, &run_args)?;
    let Some(results) = results else {
        return Ok(code as u8);
    };
    crate::cli::run::write_outputs(&results, &run_args)?;
    let mut versions = std::collections::BTreeMap::new();
    versions.insert("conform".to_string(), env!("CARGO_PKG_VERSION").to_string());
    let mut file = PerfFile::new(crate::perf::Environment::capture(
        versions,
        None,
        git_commit(&paths.root),
    ));
    for c in &results.cases {
        if let Some(p) = &c.perf {
            let rec: crate::perf::PerfRecord = serde_json::from_value(p.clone())?;
            file.push(rec)?;
        }
    }
    file.write(&args.out)?;
    println!("{}", crate::messages::wrote("perf record", &args.out));
    Ok(code as u8)
}

fn git_commit(root: &std::path::Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
