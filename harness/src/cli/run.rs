//! `conform run`: run suites against targets, print a summary, write JSON / JUnit results.
//! With no arguments it is the main job: every quick-tier case on the reference target, with
//! the reference's outputs verified bitwise against the golden store.

use super::error::CliError;
use super::list::SelectArgs;
use super::paths::Paths;
use crate::exit_code;
use crate::messages;
use crate::results::{RunResults, Status};
use crate::runner::{self, junit, RunOptions, REFERENCE_TARGET};
use clap::Args;
use conform_reference::parallel::Threads;
use std::path::PathBuf;

/// The most warm-up runs or timed iterations `--warmup` / `--iterations` accept: a sample set
/// far beyond what the regression gate needs, and a bound on how long one case can be timed.
pub const MAX_ITERATIONS: u32 = 100_000;

#[derive(Debug, Args, Clone, Default)]
pub struct RunArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    /// Targets to run (repeatable; default: reference, unless --worker is given). `conform
    /// targets` lists them.
    #[arg(long = "target")]
    pub targets: Vec<String>,
    /// A worker outside targets/, by the path of its declaration (`path/to/target.toml` or its
    /// directory), as `conform validate` takes it (repeatable). Replay lines name such a
    /// worker this way.
    #[arg(long = "worker", value_name = "TARGET.toml")]
    pub workers: Vec<PathBuf>,
    /// Draw fresh input seeds for every case (reported per case, so any failure replays).
    #[arg(long, conflicts_with = "seed")]
    pub fresh_seeds: bool,
    /// Use this input seed for every case (replay a failure).
    #[arg(long, allow_negative_numbers = true)]
    pub seed: Option<u64>,
    /// Write the results JSON here (schema: docs/results.md).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write JUnit XML here.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Write the HTML report into this directory (DIR/index.html) and print its path.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Keep every executed input set's tensors in this directory: DIR/<case id>/<target>/set<N>/
    /// {inputs,outputs,expected,oracle}.safetensors, listed in DIR/index.json. DIR must be
    /// new, empty, or an earlier --keep-outputs directory (whose entries are replaced).
    #[arg(long, value_name = "DIR")]
    pub keep_outputs: Option<PathBuf>,
    /// Ask targets for timings (raw samples per case).
    #[arg(long)]
    pub perf: bool,
    /// Override every case's warm-up count under --perf (0 to 100000).
    #[arg(long, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(MAX_ITERATIONS)))]
    pub warmup: Option<u32>,
    /// Override every case's iteration count under --perf (1 to 100000).
    #[arg(long, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_ITERATIONS)))]
    pub iterations: Option<u32>,
    /// Threads for reference computations, from 1 to 4 per available core (results never
    /// depend on it).
    #[arg(long, allow_negative_numbers = true, value_parser = super::parse_threads)]
    pub threads: Option<usize>,
    /// Do not verify the reference target against the golden store.
    #[arg(long)]
    pub no_golden: bool,
    /// Hardware profile (ci/hardware/<NAME>.toml) for roofline figures and budgets under
    /// --perf (default: this-cpu).
    #[arg(long)]
    pub hardware: Option<String>,
    /// Memory limit per case, e.g. `4G` (K, M, G, T = powers of 1024): a case whose estimated
    /// memory exceeds it ends as `error` before anything is allocated (default: half of the
    /// available memory).
    #[arg(long, value_parser = crate::runner::memory::parse_size)]
    pub max_memory: Option<u64>,
    /// Exit 0 even when every selected case was skipped (default: exit 4, nothing judged).
    #[arg(long)]
    pub allow_skips: bool,
    /// Under --perf: also time every case each other target passed against this target, in
    /// interleaved blocks (A B, B A, ...) on the same inputs, and fail when one is slower than
    /// it beyond --ab-threshold (the results' `ab` section; the report shows the ratios).
    #[arg(long, value_name = "TARGET")]
    pub against: Option<String>,
    /// Relative slowdown that fails the A/B comparison (default 0.03 = 3%).
    #[arg(long, allow_negative_numbers = true)]
    pub ab_threshold: Option<f64>,
    /// One-sided level of the A/B ratio interval's bounds (default 0.01, the gate's); the
    /// nightly gate's control uses 0.025 (docs/perf.md, "The nightly gate").
    #[arg(long, allow_negative_numbers = true)]
    pub ab_alpha: Option<f64>,
    /// Targets that must be available (besides `CONFORM_REQUIRE_TARGETS`); set by `validate`.
    #[arg(skip)]
    pub require: Vec<String>,
    /// Journal the finished trials beside this output when there is no `--json` (set by
    /// `perf record` for its `--out`), so a SIGKILL leaves them recoverable.
    #[arg(skip)]
    pub journal_beside: Option<PathBuf>,
}

pub fn run(paths: &Paths, args: RunArgs) -> Result<i32, CliError> {
    check_output_paths(&args, &[]).map_err(CliError::OutputPath)?;
    let (results, code) = execute(paths, &args)?;
    write_outputs_or_fail(&results, &args, code)
}

/// Writes the outputs of a finished run whose work earned `code`; when one cannot be written
/// (its directory was removed during the run, the disk is full), the error of an output lost
/// after the work (exit 1 unless `code` already says something worse).
pub fn write_outputs_or_fail(
    results: &RunResults,
    args: &RunArgs,
    code: i32,
) -> Result<i32, CliError> {
    write_outputs(results, args).map_err(|e| CliError::after_work(format!("{e:#}"), code))?;
    Ok(code)
}

/// Runs and prints; returns the results and the code the run earned, or why nothing ran.
pub fn execute(paths: &Paths, args: &RunArgs) -> Result<(RunResults, i32), CliError> {
    execute_on(paths, args, None)
}

/// [`execute`] on the given targets instead of those `args` names (`conform validate`).
pub fn execute_on(
    paths: &Paths,
    args: &RunArgs,
    given: Option<Vec<Box<dyn conform_targets::Target>>>,
) -> Result<(RunResults, i32), CliError> {
    let selected = args.select.load_selected(paths)?;
    let chosen: Vec<_> = selected.iter().collect();
    if chosen.is_empty() {
        return Err(CliError::NothingJudged(messages::no_cases_selected()));
    }
    let names = if args.targets.is_empty() && args.workers.is_empty() {
        vec![REFERENCE_TARGET.to_string()]
    } else {
        args.targets.clone()
    };
    let threads = args.threads.map(Threads).unwrap_or_default();
    let ab_gate = ab_settings(args)?;
    let mut against = match &args.against {
        Some(name) => super::targets::open(paths, std::slice::from_ref(name), threads)?.pop(),
        None => None,
    };
    let mut worker_declarations = std::collections::BTreeMap::new();
    let opened = match given {
        Some(t) => Ok(t),
        None => super::targets::open(paths, &names, threads).and_then(|mut t| {
            for w in &args.workers {
                use conform_targets::Target;
                let (worker, decl) = super::validate::open_worker(paths, w)?;
                if t.iter().any(|o| o.name() == worker.name()) {
                    return Err(messages::duplicate_target(worker.name()));
                }
                worker_declarations.insert(worker.name().to_string(), decl);
                t.push(Box::new(worker));
            }
            Ok(t)
        }),
    };
    let mut targets = opened?;
    let hardware = hardware_profile(paths, args)?;
    // The golden store is opened (and its MANIFEST checked) whenever the reference target is
    // verified against it: a missing or malformed manifest stops the run before any case.
    let verifies_golden = !args.no_golden && targets.iter().any(|t| t.name() == REFERENCE_TARGET);
    let golden = if verifies_golden {
        Some(std::sync::Arc::new(crate::golden::GoldenStore::open(
            &paths.golden,
        )?))
    } else {
        None
    };
    let keep_outputs = match &args.keep_outputs {
        Some(dir) => Some(std::sync::Arc::new(
            runner::keep::KeepOutputs::open(dir)
                .map_err(|e| CliError::OutputPath(e.to_string()))?,
        )),
        None => None,
    };
    let mut opts = run_options(args, threads);
    opts.golden = golden;
    opts.hardware = hardware;
    opts.keep_outputs = keep_outputs;
    opts.worker_declarations = worker_declarations;
    crate::interrupt::install();
    conform_targets::worker::live::clean_stale_scratch(
        &conform_targets::worker::default_scratch_root(),
    );
    let mut results = runner::run_all(&chosen, &mut targets, &opts);
    if let (Some(against), Some(settings)) = (against.as_mut(), ab_gate)
        && crate::interrupt::received().is_none()
    {
        results.ab = Some(run_ab(
            &chosen,
            &results,
            &mut targets,
            against.as_mut(),
            &settings,
        ));
    }
    // Workers are shut down (and their scratch removed) before anything is reported.
    drop(targets);
    drop(against);
    print_report(&results, opts.keep_outputs.as_deref());
    let code = outcome_code(&results, args.allow_skips);
    Ok((results, code))
}

/// The options `args` give a run (golden store, hardware profile and kept outputs are the
/// caller's).
fn run_options(args: &RunArgs, threads: Threads) -> RunOptions {
    RunOptions {
        golden: None,
        seed: args.seed,
        fresh_seeds: args.fresh_seeds,
        perf: args.perf,
        warmup: args.warmup,
        iterations: args.iterations,
        threads,
        required_targets: RunOptions::required_from_env()
            .into_iter()
            .chain(args.require.iter().cloned())
            .collect(),
        worker_input_sets: 2,
        hardware: None,
        journal: args
            .json
            .as_deref()
            .or(args.journal_beside.as_deref())
            .and_then(runner::journal::path_for_output),
        max_memory: args
            .max_memory
            .unwrap_or_else(runner::memory::default_limit),
        expectations: None,
        keep_outputs: None,
        worker_declarations: Default::default(),
    }
}

/// The profile `--hardware` names (`this-cpu` under `--perf` without it), when timing.
fn hardware_profile(
    paths: &Paths,
    args: &RunArgs,
) -> Result<Option<crate::perf::HardwareProfile>, crate::perf::PerfError> {
    if !(args.perf || args.hardware.is_some()) {
        return Ok(None);
    }
    let name = args
        .hardware
        .clone()
        .unwrap_or_else(|| "this-cpu".to_string());
    let path = paths
        .root
        .join("ci")
        .join("hardware")
        .join(format!("{name}.toml"));
    crate::perf::HardwareProfile::load(&path).map(Some)
}

/// Prints the run's summary, failures, skips, kept outputs and A/B comparison.
fn print_report(results: &RunResults, keep: Option<&runner::keep::KeepOutputs>) {
    crate::outln!("{}", messages::summary_table(results));
    for c in results.cases.iter().filter(|c| c.status.is_failure()) {
        crate::outln!("{}", messages::failure_block(c, results));
    }
    if let Some(skips) = messages::skip_summary(results) {
        crate::outln!("{skips}");
    }
    if let Some(keep) = keep {
        crate::outln!("{}", messages::keep::kept(&keep.dir, keep.len()));
    }
    if let Some(ab) = &results.ab {
        crate::outln!(
            "{}",
            messages::perf::ab_heading(&ab.against, ab.comparison.cases.len())
        );
        crate::out!("{}", messages::perf::comparison_table(&ab.comparison));
        for n in &ab.not_timed {
            crate::outln!(
                "{}",
                messages::perf::ab_not_timed(&n.id, &n.target, &n.reason)
            );
        }
        if ab.comparison.has_regression() {
            crate::outln!("{}", messages::perf::ab_slower(&ab.against));
        }
    }
}

/// The run's exit code: interrupted, failed (or slower under A/B), nothing judged, or success.
fn outcome_code(results: &RunResults, allow_skips: bool) -> i32 {
    let ab_slower = results
        .ab
        .as_ref()
        .is_some_and(|ab| ab.comparison.has_regression());
    let all_skipped = results.cases.iter().all(|c| c.status == Status::Skipped);
    if let Some(sig) = crate::interrupt::received() {
        crate::outln!("{}", messages::interrupted(results));
        crate::interrupt::exit_code(sig)
    } else if results.cases.iter().any(|c| c.status.is_failure()) || ab_slower {
        exit_code::FAILURE
    } else if all_skipped && !allow_skips {
        crate::outln!("{}", messages::nothing_judged_run());
        exit_code::NOTHING_JUDGED
    } else {
        exit_code::SUCCESS
    }
}

/// The A/B settings of `--against` (None without it); an error when they cannot apply.
fn ab_settings(args: &RunArgs) -> Result<Option<runner::ab::AbSettings>, String> {
    if args.against.is_none() {
        return Ok(None);
    }
    if !args.perf {
        return Err(messages::perf::AGAINST_NEEDS_PERF.to_string());
    }
    let mut gate = crate::perf::GateConfig::with_threshold(args.ab_threshold.unwrap_or(0.03))
        .map_err(|e| format!("--ab-threshold: {e}"))?;
    if let Some(alpha) = args.ab_alpha {
        gate.ci_alpha = alpha;
        gate.validate().map_err(|e| format!("--ab-alpha: {e}"))?;
    }
    Ok(Some(runner::ab::AbSettings {
        gate,
        warmup: args.warmup,
        iterations: args.iterations,
        ..Default::default()
    }))
}

/// Every target but the one compared against, timed against it.
fn run_ab(
    cases: &[&crate::suite::Case],
    results: &RunResults,
    targets: &mut [Box<dyn conform_targets::Target>],
    against: &mut dyn conform_targets::Target,
    settings: &runner::ab::AbSettings,
) -> crate::results::AbResults {
    let mut ab = crate::results::AbResults {
        against: against.name().to_string(),
        comparison: crate::perf::Comparison {
            config: settings.gate,
            cases: Vec::new(),
        },
        not_timed: Vec::new(),
    };
    for t in targets.iter_mut() {
        if t.name() == against.name() {
            continue;
        }
        let name = t.name().to_string();
        let o = runner::ab::ab_compare(cases, results, t.as_mut(), against, settings);
        ab.comparison.cases.extend(o.comparison.cases);
        ab.not_timed.extend(
            o.not_timed
                .into_iter()
                .map(|(id, reason)| crate::results::NotTimed {
                    id,
                    target: name.clone(),
                    reason,
                }),
        );
    }
    ab
}

/// Checks, before any case runs, that every output the run will write can be written:
/// `--json`, `--junit`, `--report`, `--keep-outputs` (created here when missing) and the
/// `extra` files of the calling command.
pub fn check_output_paths(args: &RunArgs, extra: &[&std::path::Path]) -> Result<(), String> {
    let files = args.json.iter().chain(&args.junit).map(PathBuf::as_path);
    for p in files.chain(extra.iter().copied()) {
        crate::atomic_file::check_writable(p)?;
    }
    if let Some(dir) = &args.keep_outputs {
        runner::keep::check_dir(dir).map_err(|e| e.to_string())?;
    }
    match &args.report {
        Some(dir) => crate::atomic_file::check_dir_target(dir),
        None => Ok(()),
    }
}

/// Writes the JSON and JUnit files a run asked for.
pub fn write_outputs(results: &RunResults, args: &RunArgs) -> anyhow::Result<()> {
    // Each output is attempted even when another could not be written (one lost file must not
    // cost the others); the first error is returned.
    let mut first: Option<anyhow::Error> = None;
    let mut keep = |r: anyhow::Result<()>| {
        if let Err(e) = r {
            if first.is_some() {
                super::error::print(&format!("{e:#}"));
            } else {
                first = Some(e);
            }
        }
    };
    if let Some(p) = &args.json {
        keep((|| {
            crate::atomic_file::write(p, serde_json::to_string_pretty(results)?.as_bytes())
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            // The results file is whole: the journal has served its purpose.
            if let Some(j) = runner::journal::path_for_output(p) {
                let _ = std::fs::remove_file(j);
            }
            crate::outln!("{}", messages::wrote("results", p));
            Ok(())
        })());
    }
    if let Some(p) = &args.junit {
        keep((|| {
            let mut xml = Vec::new();
            junit::write_junit(results, &mut xml)
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            crate::atomic_file::write(p, &xml)
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            crate::outln!("{}", messages::wrote("JUnit", p));
            Ok(())
        })());
    }
    if let Some(dir) = &args.report {
        keep((|| {
            let source = args
                .json
                .clone()
                .unwrap_or_else(|| dir.join("results.json"));
            let inputs = crate::report::ReportInputs::from_results(results.clone(), source);
            let page = crate::report::render(&inputs)?;
            let path = crate::report::write(dir, &page)?;
            crate::outln!("{}", messages::report::wrote_report(&path));
            Ok(())
        })());
    }
    first.map_or(Ok(()), Err)
}
