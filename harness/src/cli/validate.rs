//! `conform validate --worker path/to/target.toml`: the one command a third-party contributor
//! runs (ci/contribution.md). Fresh seeds, every suite the worker's ops cover (both tiers by
//! default), correctness and performance budgets, and a report directory to attach to the
//! pull request: `index.html`, `results.json`, `junit.xml`.

use super::list::SelectArgs;
use super::paths::Paths;
use super::run::{check_output_paths, execute_on, write_outputs, RunArgs};
use crate::exit_code;
use crate::messages;
use clap::Args;
use conform_targets::{Target, WorkerTarget};
use std::path::PathBuf;

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
    #[arg(long, value_parser = ["quick", "full", "all"], default_value = "all")]
    pub tier: String,
}

pub fn run(paths: &Paths, args: ValidateArgs) -> anyhow::Result<i32> {
    let dir = if args.worker.is_dir() {
        args.worker.clone()
    } else {
        args.worker
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
    let dir = match std::fs::canonicalize(&dir) {
        Ok(d) => d,
        Err(e) => {
            eprintln!(
                "{}",
                messages::error_line(&format!("{}: {e}", args.worker.display()))
            );
            return Ok(exit_code::USAGE);
        }
    };
    let worker = match WorkerTarget::from_dir(&paths.root, &dir) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("{}", messages::error_line(&e));
            return Ok(exit_code::USAGE);
        }
    };
    println!("{}", messages::validate_start(worker.name(), &args.out));
    std::fs::create_dir_all(&args.out)
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.out.display()))?;
    let run_args = RunArgs {
        select: SelectArgs {
            suites: args.suites.clone(),
            filter: args.filter.clone(),
            tier: Some(args.tier.clone()),
        },
        fresh_seeds: true,
        perf: true,
        hardware: args.hardware.clone(),
        json: Some(args.out.join("results.json")),
        junit: Some(args.out.join("junit.xml")),
        report: Some(args.out.clone()),
        require: vec![worker.name().to_string()],
        against: args.against.clone(),
        ..RunArgs::default()
    };
    // The report directory's files are checked before any case runs, as `run` checks its own.
    if let Err(e) = check_output_paths(&run_args, &[]) {
        eprintln!("{}", messages::error_line(&e));
        return Ok(exit_code::USAGE);
    }
    let targets: Vec<Box<dyn Target>> = vec![Box::new(worker)];
    let (results, code) = execute_on(paths, &run_args, Some(targets))?;
    if let Some(r) = &results {
        write_outputs(r, &run_args)?;
    }
    Ok(code)
}
