//! `conform validate --worker path/to/target.toml`: the one command a third-party contributor
//! runs (ci/contribution.md). Fresh seeds, every suite the worker's ops cover (both tiers by
//! default), correctness and performance budgets, and a report directory to attach to the
//! pull request: `index.html`, `results.json`, `junit.xml`.

use super::error::CliError;
use super::list::SelectArgs;
use super::paths::Paths;
use super::run::{check_output_paths, execute_on, write_outputs_or_fail, RunArgs};
use crate::messages;
use clap::Args;
use conform_targets::{Target, WorkerTarget};
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The worker's declaration: `path/to/target.toml` (or its directory).
    #[arg(long)]
    pub worker: PathBuf,
    /// Where the report goes.
    #[arg(long, default_value = "validate-report")]
    pub out: PathBuf,
    /// Hardware profile (ci/hardware/<NAME>.toml) for budgets and roofline (default: this-cpu).
    #[arg(long)]
    pub hardware: Option<String>,
    /// Only these suites (repeatable; default: every suite).
    #[arg(long = "suite")]
    pub suites: Vec<String>,
    /// Only cases whose id matches this regular expression.
    #[arg(long)]
    pub filter: Option<String>,
    /// Also time the worker against this target (the kernel it replaces) on the cases it
    /// passed, interleaved on the same inputs, and fail when it is slower beyond 3%.
    #[arg(long, value_name = "TARGET")]
    pub against: Option<String>,
    /// Tier: all (default), quick or full.
    #[arg(long, value_enum, default_value = "all")]
    pub tier: crate::suite::TierChoice,
}

/// Opens the worker a `--worker path/to/target.toml` (or its directory) names; returns it
/// with the absolute path of its declaration (what replay lines name).
pub fn open_worker(paths: &Paths, worker: &Path) -> Result<(WorkerTarget, PathBuf), String> {
    let dir = if worker.is_dir() {
        worker.to_path_buf()
    } else {
        worker
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_else(|| PathBuf::from("."))
    };
    let dir = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    };
    // Absolute, so ${TARGET_DIR} in the declaration means the same from any working directory.
    let dir = std::fs::canonicalize(&dir).map_err(|e| format!("{}: {e}", worker.display()))?;
    let w = WorkerTarget::from_dir(&paths.root, &dir).map_err(|e| e.to_string())?;
    Ok((w, dir.join("target.toml")))
}

pub fn run(paths: &Paths, args: ValidateArgs) -> Result<i32, CliError> {
    let (worker, _) = open_worker(paths, &args.worker)?;
    crate::outln!("{}", messages::validate_start(worker.name(), &args.out));
    std::fs::create_dir_all(&args.out)
        .map_err(|e| CliError::OutputPath(format!("{}: {e}", args.out.display())))?;
    let run_args = RunArgs {
        select: SelectArgs {
            suites: args.suites.clone(),
            filter: args.filter.clone(),
            tier: Some(args.tier),
        },
        fresh_seeds: true,
        perf: true,
        hardware: args.hardware.clone(),
        json: Some(args.out.join("results.json")),
        junit: Some(args.out.join("junit.xml")),
        report: Some(args.out.clone()),
        workers: vec![args.worker.clone()],
        require: vec![worker.name().to_string()],
        against: args.against.clone(),
        ..RunArgs::default()
    };
    // The report directory's files are checked before any case runs, as `run` checks its own.
    check_output_paths(&run_args, &[]).map_err(CliError::OutputPath)?;
    drop(worker);
    let (results, code) = execute_on(paths, &run_args, None)?;
    write_outputs_or_fail(&results, &run_args, code)
}
