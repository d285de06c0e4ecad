//! `conform fingerprint (--target T | --worker W) [--suite S... | --op X]`: which value of each
//! knob of the model the target's bits match, with evidence (docs/fingerprint.md). Prints the
//! knob table; `--json` writes the fingerprint, `--ledger-diff` the proposed ledger rows,
//! `--since` compares with an earlier fingerprint. Writes neither golden data nor the ledger.

use super::error::CliError;
use clap::Args;
use conform_harness::exit_code;
use conform_harness::fingerprint::{self, change, text, FingerprintOptions};
use conform_harness::project::{CaseQuery, Paths};
use conform_harness::suite::TierChoice;
use conform_reference::parallel::Threads;
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("selection").multiple(false).args(["suite", "op"])))]
#[command(group(clap::ArgGroup::new("subject").required(true).args(["target", "worker"])))]
pub struct FingerprintArgs {
    /// The target to fingerprint (as `conform targets` lists it).
    #[arg(long)]
    pub target: Option<String>,
    /// A worker outside targets/ to fingerprint, by the path of its declaration
    /// (`path/to/target.toml` or its directory), as `conform run --worker` takes it.
    #[arg(long, value_name = "TARGET.toml")]
    pub worker: Option<PathBuf>,
    /// The quick cases of this suite (repeatable; without --suite or --op: every suite).
    #[arg(long = "suite")]
    pub suites: Vec<String>,
    /// The quick cases of every suite with this op.
    #[arg(long)]
    pub op: Option<String>,
    /// Only cases whose id matches this regular expression.
    #[arg(long)]
    pub filter: Option<String>,
    /// Compare with an earlier fingerprint (a `--json` file, e.g. last night's): prints the
    /// knobs whose matched value changed. The exit status stays that of this fingerprint.
    #[arg(long, value_name = "FILE")]
    pub since: Option<PathBuf>,
    /// Input seed of the knob-by-knob pass (default: a fresh one); the re-check uses the next.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write the fingerprint as JSON (docs/schemas/fingerprint.schema.json).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the proposed ledger rows (docs/ascend.md) to attach to an issue or pull request.
    #[arg(long, value_name = "FILE")]
    pub ledger_diff: Option<PathBuf>,
    /// Threads for the reference computations, from 1 to 4 per available core (results never
    /// depend on it).
    #[arg(long, allow_negative_numbers = true, value_parser = super::parse_threads)]
    pub threads: Option<usize>,
}

pub fn run(paths: &Paths, args: FingerprintArgs) -> Result<i32, CliError> {
    for p in [&args.json, &args.ledger_diff].into_iter().flatten() {
        conform_harness::atomic_file::check_writable(p)?;
    }
    // The earlier fingerprint is read before any case runs: a bad file costs nothing.
    let earlier = match &args.since {
        Some(p) => Some(change::read(p).map_err(|e| CliError::Usage(e.to_string()))?),
        None => None,
    };
    let query = CaseQuery {
        suites: args.suites.clone(),
        filter: args.filter.clone(),
        tier: Some(TierChoice::Quick),
    };
    let mut cases = query.load_selected(paths)?;
    let mut selection = match (args.suites.as_slice(), &args.op) {
        ([], Some(op)) => {
            conform_reference::ops::find(op).map_err(|e| CliError::Usage(e.to_string()))?;
            cases.retain(|c| &c.op == op);
            format!("--op {op}")
        }
        ([], None) => "every suite".to_string(),
        (suites, _) => suites
            .iter()
            .map(|s| format!("--suite {s}"))
            .collect::<Vec<_>>()
            .join(" "),
    };
    if let Some(f) = &args.filter {
        selection.push_str(&format!(" --filter {f}"));
    }
    if cases.is_empty() {
        return Err(CliError::NothingJudged(
            conform_harness::messages::no_cases_selected(),
        ));
    }
    let threads = args.threads.map(Threads).unwrap_or_default();
    let mut target: Box<dyn conform_targets::Target> = match (&args.target, &args.worker) {
        (Some(name), _) => {
            conform_harness::session::open_targets(paths, std::slice::from_ref(name), threads)?
                .pop()
                .ok_or_else(|| CliError::Usage(format!("no target `{name}`")))?
        }
        (None, Some(worker)) => Box::new(conform_harness::session::open_worker(paths, worker)?.0),
        (None, None) => {
            return Err(CliError::Usage(
                "fingerprint needs --target or --worker".to_string(),
            ))
        }
    };
    let subject = target.name().to_string();
    let seed = args.seed.unwrap_or_else(conform_harness::seed::fresh_seed);
    let opts = FingerprintOptions {
        seed,
        recheck_seed: seed.wrapping_add(1),
        threads,
        selection,
    };
    let fp = fingerprint::fingerprint(target.as_mut(), &cases, &opts);
    conform_harness::out!("{}", text::table(&fp));
    if let (Some(before), Some(since)) = (&earlier, &args.since) {
        conform_harness::outln!("{}", change::compare(before, &fp, since));
    }
    let verdict = if !fingerprint::judged_any(&fp) {
        exit_code::NOTHING_JUDGED
    } else if fingerprint::agrees_with_claim(&fp) {
        exit_code::SUCCESS
    } else {
        exit_code::FAILURE
    };
    let write = |path: &Option<PathBuf>, bytes: Vec<u8>| -> Result<(), CliError> {
        match path {
            Some(p) => conform_harness::atomic_file::write(p, &bytes)
                .map_err(|e| CliError::after_work(format!("{}: {e}", p.display()), verdict)),
            None => Ok(()),
        }
    };
    let json = serde_json::to_vec_pretty(&fp).expect("a fingerprint is plain JSON");
    write(&args.json, json)?;
    write(&args.ledger_diff, text::ledger_diff(&fp).into_bytes())?;
    if verdict == exit_code::NOTHING_JUDGED {
        return Err(CliError::NothingJudged(format!(
            "no selected case was fingerprinted on `{subject}` (each case's reason is above)"
        )));
    }
    Ok(verdict)
}
