//! `conform validate --worker path/to/target.toml`: the one command a third-party contributor
//! runs (ci/contribution.md). Fresh seeds, every suite the worker's ops cover (both tiers by
//! default), correctness and performance budgets, and a report directory to attach to the
//! pull request: `index.html`, `results.json`, `junit.xml`.

use super::error::CliError;
use super::list::SelectArgs;
use super::run::{execute, write_outputs_or_fail, RunArgs};
use clap::Args;
use conform_harness::messages;
use conform_harness::project::Paths;
use conform_harness::session::{self, open_worker, DEFAULT_HARDWARE};
use conform_targets::Target;
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
    #[arg(long, value_enum, default_value = "all")]
    pub tier: super::tier_arg::TierArg,
}

pub fn run(paths: &Paths, args: ValidateArgs) -> Result<i32, CliError> {
    let (mut worker, _) = open_worker(paths, &args.worker)?;
    let declared_ops: std::collections::BTreeSet<String> =
        worker.capabilities().ops.into_keys().collect();
    conform_harness::outln!("{}", messages::validate_start(worker.name(), &args.out));
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
    let req = run_args.request();
    session::check_output_paths(&req, &[])?;
    drop(worker);
    super::run::write_on_second_signal(&req);
    let (results, code) = execute(paths, &req)?;
    let hardware = results.hardware.as_deref().unwrap_or(DEFAULT_HARDWARE);
    for line in messages::validate_coverage(&results, &declared_ops, hardware) {
        conform_harness::outln!("{line}");
    }
    conform_harness::interrupt::writing_outputs(|| write_outputs_or_fail(&results, &req, code))
}
