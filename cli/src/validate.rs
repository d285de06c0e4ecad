//! `conform validate --worker path/to/target.toml`: the one command a third-party contributor
//! runs (ci/contribution.md). Fresh seeds, every suite the worker's ops cover (both tiers by
//! default), correctness and performance budgets, and a report directory to attach to the
//! pull request: `index.html`, `results.json`, `junit.xml`.

use super::error::CliError;
use super::list::SelectArgs;
use super::run::{execute, write_outputs_or_fail, RunArgs};
use clap::Args;
use conform_harness::fingerprint::{self, hint, FingerprintOptions};
use conform_harness::messages;
use conform_harness::project::{CaseQuery, Paths};
use conform_harness::session::{self, open_worker, DEFAULT_HARDWARE};
use conform_harness::suite::TierChoice;
use conform_reference::parallel::Threads;
use conform_targets::Target;
use std::collections::BTreeSet;
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
    /// Do not fingerprint the ops whose bit-exact checks failed (by default each such op is
    /// fingerprinted on its quick cases: which recipe the kernel matches, except which knobs;
    /// written to `fingerprint.json` in the report directory).
    #[arg(long)]
    pub no_fingerprint: bool,
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
    let code = conform_harness::interrupt::writing_outputs(|| {
        write_outputs_or_fail(&results, &req, code)
    })?;
    let failing = hint::ops_failing_bit_exact(&results);
    if !args.no_fingerprint && !failing.is_empty() && results.interrupted.is_none() {
        fingerprint_failing_ops(paths, &args, &failing)?;
    }
    Ok(code)
}

/// Fingerprints the worker on the quick cases of `ops` (those with a failed bit-exact check),
/// prints one line per op (the recipe it matches, except which knobs) and writes
/// `fingerprint.json` to the report directory. A fingerprint that cannot run is said, and the
/// validate verdict stands.
fn fingerprint_failing_ops(
    paths: &Paths,
    args: &ValidateArgs,
    ops: &BTreeSet<String>,
) -> Result<(), CliError> {
    let query = CaseQuery {
        suites: args.suites.clone(),
        filter: None,
        tier: Some(TierChoice::Quick),
    };
    let mut cases = query.load_selected(paths)?;
    cases.retain(|c| ops.contains(&c.op));
    let (mut worker, _) = open_worker(paths, &args.worker)?;
    let seed = conform_harness::seed::fresh_seed();
    let opts = FingerprintOptions {
        seed,
        recheck_seed: seed.wrapping_add(1),
        threads: Threads::default(),
        selection: ops
            .iter()
            .map(|op| format!("--op {op}"))
            .collect::<Vec<_>>()
            .join(" "),
    };
    conform_harness::outln!(
        "bit-exact checks failed on {} op(s): fingerprinting the worker on their quick cases \
         (which recipe its bits match, knob by knob; --no-fingerprint to skip)",
        ops.len()
    );
    let fp = fingerprint::fingerprint(&mut worker, &cases, &opts);
    for h in hint::hints(&fp, ops) {
        conform_harness::outln!("{h}");
    }
    let path = args.out.join("fingerprint.json");
    let json = serde_json::to_vec_pretty(&fp).expect("a fingerprint is plain JSON");
    conform_harness::atomic_file::write(&path, &json)
        .map_err(|e| CliError::OutputPath(format!("{}: {e}", path.display())))?;
    conform_harness::outln!(
        "fingerprint written to {} (the knob table with evidence: conform fingerprint --worker {} \
         --op OP)",
        path.display(),
        args.worker.display()
    );
    Ok(())
}
