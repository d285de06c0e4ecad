//! `conform run`: run suites against targets, print a summary, write JSON / JUnit results.
//! With no arguments it is the main job: every quick-tier case on the reference target, with
//! the reference's outputs verified bitwise against the golden store.

use super::error::CliError;
use super::list::SelectArgs;
use super::progress::ConsoleProgress;
use clap::Args;
use conform_harness::messages;
use conform_harness::project::Paths;
use conform_harness::results::RunResults;
use conform_harness::seed::SeedPolicy;
use conform_harness::session::{self, OutputKind, RunOutcome, RunRequest, RunVerdict};
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
    /// Threads for reference computations and, with one target, for drawing the coming cases'
    /// inputs ahead; from 1 to 4 per available core (results never depend on it).
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
    #[arg(long, value_parser = conform_harness::runner::memory::parse_size)]
    pub max_memory: Option<u64>,
    /// Exit 0 even when every selected case was skipped (default: exit 4, nothing judged).
    #[arg(long)]
    pub allow_skips: bool,
    /// Under --perf: also time every case each other target passed against this target, in
    /// rounds of fresh processes (each an A B B A block on the same inputs, judged on the
    /// rounds' paired ratios), and fail when one is slower than it beyond --ab-threshold (the
    /// results' `ab` section; the report shows the ratios). Exit 3 when a case could not be
    /// judged and nothing failed.
    #[arg(long, value_name = "TARGET")]
    pub against: Option<String>,
    /// Rounds of the A/B comparison (default 16, docs/perf.md; at least 7 are needed for a
    /// verdict at the default level).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub ab_rounds: Option<u32>,
    /// Relative slowdown that fails the A/B comparison (default 0.03 = 3%).
    #[arg(long, allow_negative_numbers = true)]
    pub ab_threshold: Option<f64>,
    /// One-sided level of the A/B ratio interval's bounds (default 0.01, the gate's; the
    /// nightly gate's control uses it too: docs/perf.md, "Calibration of the nightly gate").
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

impl RunArgs {
    /// The library's request for this run.
    pub fn request(&self) -> RunRequest {
        RunRequest {
            query: self.select.query(),
            targets: self.targets.clone(),
            workers: self.workers.clone(),
            seeds: match (self.seed, self.fresh_seeds) {
                (Some(s), _) => SeedPolicy::Fixed(s),
                (None, true) => SeedPolicy::Fresh,
                (None, false) => SeedPolicy::Suite,
            },
            json: self.json.clone(),
            junit: self.junit.clone(),
            report: self.report.clone(),
            keep_outputs: self.keep_outputs.clone(),
            perf: self.perf,
            warmup: self.warmup,
            iterations: self.iterations,
            threads: self.threads,
            no_golden: self.no_golden,
            hardware: self.hardware.clone(),
            max_memory: self.max_memory,
            allow_skips: self.allow_skips,
            against: self.against.clone(),
            ab_threshold: self.ab_threshold,
            ab_alpha: self.ab_alpha,
            ab_rounds: self.ab_rounds,
            require: self.require.clone(),
            journal_beside: self.journal_beside.clone(),
        }
    }
}

pub fn run(paths: &Paths, args: RunArgs) -> Result<i32, CliError> {
    let req = args.request();
    session::check_output_paths(&req, &[])?;
    write_on_second_signal(&req);
    let (results, code) = execute(paths, &req)?;
    conform_harness::interrupt::writing_outputs(|| write_outputs_or_fail(&results, &req, code))
}

/// What a second SIGINT / SIGTERM writes before conform stops (the run's own writing cut
/// short): the outputs of the trials its journal holds.
pub fn write_on_second_signal(req: &RunRequest) {
    let req = req.clone();
    conform_harness::interrupt::set_last_resort(move |sig| {
        if let Some(results) = session::recover_from_journal(&req, sig) {
            for written in session::write_outputs(&results, &req) {
                match written {
                    Ok((_, p)) => conform_harness::errln!("{}", messages::wrote("results", &p)),
                    Err(e) => super::error::print(&e),
                }
            }
        }
    });
}

/// Writes the outputs of a finished run whose work earned `code`; when one cannot be written
/// (its directory was removed during the run, the disk is full), the error of an output lost
/// after the work (exit 1 unless `code` already says something worse).
pub fn write_outputs_or_fail(
    results: &RunResults,
    req: &RunRequest,
    code: i32,
) -> Result<i32, CliError> {
    // Each output is attempted even when another could not be written; the first error is the
    // command's, the others are printed.
    let mut first: Option<String> = None;
    for written in session::write_outputs(results, req) {
        match written {
            Ok((OutputKind::Results, p)) => {
                conform_harness::outln!("{}", messages::wrote("results", &p))
            }
            Ok((OutputKind::Junit, p)) => {
                conform_harness::outln!("{}", messages::wrote("JUnit", &p))
            }
            Ok((OutputKind::Report, p)) => {
                conform_harness::outln!("{}", messages::report::wrote_report(&p))
            }
            Err(e) => {
                let e = format!("{:#}", anyhow::Error::new(e));
                if first.is_some() {
                    super::error::print(&e);
                } else {
                    first = Some(e);
                }
            }
        }
    }
    match first {
        Some(e) => Err(CliError::after_work(e, code)),
        None => Ok(code),
    }
}

/// Runs and prints; returns the results and the code the run earned, or why nothing ran.
pub fn execute(paths: &Paths, req: &RunRequest) -> Result<(RunResults, i32), CliError> {
    let outcome = session::execute(paths, req, &mut ConsoleProgress::new())?;
    print_report(&outcome);
    let code = outcome.verdict.exit_code();
    match outcome.verdict {
        RunVerdict::Interrupted(_) => {
            conform_harness::outln!("{}", messages::interrupted(&outcome.results))
        }
        RunVerdict::NothingJudged => conform_harness::outln!("{}", messages::nothing_judged_run()),
        RunVerdict::Inconclusive => {
            if let Some(ab) = &outcome.results.ab {
                conform_harness::outln!("{}", messages::perf::ab_undecided(&ab.against))
            }
        }
        RunVerdict::Passed | RunVerdict::Failed => {}
    }
    Ok((outcome.results, code))
}

/// Prints the run's summary, failures, skips, kept outputs and A/B comparison.
fn print_report(outcome: &RunOutcome) {
    let results = &outcome.results;
    conform_harness::outln!("{}", messages::summary_table(results));
    if let Some(golden) = messages::golden_verified(results) {
        conform_harness::outln!("{golden}");
    }
    for c in results.cases.iter().filter(|c| c.status.is_failure()) {
        conform_harness::outln!("{}", messages::failure_block(c, results));
    }
    if let Some(skips) = messages::skip_summary(results) {
        conform_harness::outln!("{skips}");
    }
    if let Some((dir, n)) = &outcome.kept {
        conform_harness::outln!("{}", conform_harness::runner::keep_text::kept(dir, *n));
    }
    if let Some(ab) = &results.ab {
        conform_harness::outln!(
            "{}",
            messages::perf::ab_heading(&ab.against, ab.comparison.cases.len())
        );
        conform_harness::out!("{}", messages::perf::comparison_table(&ab.comparison));
        for n in &ab.not_timed {
            conform_harness::outln!(
                "{}",
                messages::perf::ab_not_timed(&n.id, &n.target, &n.reason)
            );
        }
        if ab.comparison.has_regression() {
            conform_harness::outln!("{}", messages::perf::ab_slower(&ab.against));
        }
    }
}
