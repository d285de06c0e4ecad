//! `conform perf ...`: the baseline comparison gate.
//!
//! Exit codes (`conform_harness::exit_code`): success, no regression; failure, at least one REGRESSION;
//! inconclusive, no regression but a case the gate could not judge (too few samples, other op
//! parameters); usage, bad input (the message names the file and field); nothing judged, no
//! case on both sides of a comparison or no timed case to record.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use conform_harness::messages::perf as messages;
use conform_harness::perf::{self, PerfError, PerfFileIo};
use conform_harness::session;

use super::error::CliError;
use conform_harness::exit_code;

#[derive(Debug, Subcommand)]
pub enum PerfCommand {
    /// Compare a candidate perf file against a baseline; exit 1 on any regression.
    Compare(CompareArgs),
    /// Run the selected cases with timing and write their raw samples as a perf file.
    Record(Box<RecordArgs>),
    /// Serve this build's reference over the worker protocol on stdin/stdout (the nightly
    /// gate's control: a kept conform binary timed as a worker beside tonight's build).
    ServeReference(ServeArgs),
    /// Keep tonight's build of a target as the nightly gate's same-night control: the
    /// reference as a copy of this conform binary, a worker as a copy of its directory and of
    /// the repository files it names (checked to start); refused, with the reason, when the
    /// copy could not run on a later night.
    KeepControl(KeepControlArgs),
    /// The perf history store: ingest perf files, list and show series with their change
    /// points, export CSV, and gate a run against its series' newest segment.
    #[command(subcommand)]
    History(crate::perf_history::HistoryCommand),
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Where to write the perf file (JSON, schema in docs/perf.md).
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub run: crate::run::RunArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Threads for the reference's computations (default: all available, as `conform run`).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub threads: Option<usize>,
}

#[derive(Debug, Args)]
pub struct KeepControlArgs {
    /// The target whose build is kept (`reference` or a worker of targets/).
    #[arg(long)]
    pub target: String,
    /// The new directory of the kept worker (created; its name is the kept target's name).
    #[arg(long)]
    pub into: PathBuf,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline perf file (JSON).
    #[arg(long)]
    pub baseline: PathBuf,
    /// Candidate perf file (JSON).
    #[arg(long)]
    pub candidate: PathBuf,
    /// What to compare: `wall` (the samples, as timed) or `cpu` (the process CPU time of each
    /// sample, `cpu_us`, recorded for the reference and CPU workers; other load on the machine
    /// hardly moves it). docs/perf.md, "Wall or CPU time".
    #[arg(long, value_enum, default_value_t = Metric::Wall)]
    pub metric: Metric,
    #[command(flatten)]
    pub gate: super::gate_output::GateOutputArgs,
}

/// The figure a comparison judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Metric {
    /// Wall time of each timed iteration (`samples_us`).
    Wall,
    /// Process CPU time of each timed iteration (`cpu_us`).
    Cpu,
}

/// Runs a perf command; `paths` finds the project, which only `record` needs. Returns the
/// code the command's work earned, or why it could not run or deliver it.
pub fn run(
    paths: &dyn Fn() -> Result<conform_harness::project::Paths, CliError>,
    cmd: &PerfCommand,
) -> Result<i32, CliError> {
    match cmd {
        PerfCommand::Record(args) => record(&paths()?, args),
        PerfCommand::History(c) => crate::perf_history::run(c),
        PerfCommand::ServeReference(a) => serve_reference(a),
        PerfCommand::KeepControl(a) => keep_control(&paths()?, a),
        PerfCommand::Compare(args) => compare_command(args),
    }
}

/// `conform perf compare`: the table, then the verdict; the comparison's `--json` written last
/// (lost after the comparison was made: exit 1, see [`CliError::OutputAfterWork`]).
fn compare_command(args: &CompareArgs) -> Result<i32, CliError> {
    let cfg = args.gate.check()?;
    let cmp = run_compare(args, &cfg)?;
    let table = messages::comparison_table(&cmp);
    let code = cmp.exit_code();
    let written = args.gate.write_json(&cmp);
    conform_harness::out!("{table}");
    match written {
        Ok(Some(line)) => conform_harness::outln!("{line}"),
        Ok(None) => {}
        Err(e) => return Err(CliError::after_work(e, code)),
    }
    if code == exit_code::NOTHING_JUDGED {
        conform_harness::outln!("{}", messages::nothing_compared());
    }
    Ok(code)
}

/// `conform perf keep-control`: the kept build, or why it cannot be kept (a usage error: the
/// target's declaration names what its copy would not carry, or the copy does not start).
fn keep_control(
    paths: &conform_harness::project::Paths,
    args: &KeepControlArgs,
) -> Result<i32, CliError> {
    let conform = std::env::current_exe()
        .map_err(|e| CliError::Usage(format!("keep-control: this binary's path: {e}")))?;
    let kept =
        conform_harness::perf::control::keep(&paths.root, &args.target, &args.into, &conform)
            .map_err(|e| CliError::Usage(e.to_string()))?;
    conform_harness::outln!(
        "{}",
        messages::kept_control(&args.target, &kept.dir, &kept.repo_paths)
    );
    Ok(exit_code::SUCCESS)
}

/// `conform perf serve-reference`: this build's reference as a worker (its timings slowed as
/// `CONFORM_REFERENCE_SLOWDOWN` says, like the in-process reference's; the nightly script's
/// kept build clears the variable in its target.toml, since it stands for another build).
fn serve_reference(args: &ServeArgs) -> Result<i32, CliError> {
    let threads = args.threads.map(conform_reference::parallel::Threads);
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    match session::serve_reference(threads, &mut stdin.lock(), &mut stdout.lock()) {
        Ok(()) => Ok(exit_code::SUCCESS),
        Err(e) => Err(CliError::Usage(format!("serve-reference: {e}"))),
    }
}

/// The comparison of the two files `args` names under the gate `cfg` (checked, with its
/// `--json` path, by [`super::gate_output::GateOutputArgs::check`]).
pub fn run_compare(
    args: &CompareArgs,
    cfg: &conform_harness::perf::GateConfig,
) -> Result<conform_harness::perf::Comparison, PerfError> {
    let metric = match args.metric {
        Metric::Wall => perf::metric::Metric::Wall,
        Metric::Cpu => perf::metric::Metric::Cpu,
    };
    perf::metric::compare_files(&args.baseline, &args.candidate, metric, cfg)
}

/// `conform perf record`: `conform run --perf` on the selection, then the samples of every
/// timed case as a perf file. Exits like `conform run` (1 if a case failed or broke a budget).
fn record(paths: &conform_harness::project::Paths, args: &RecordArgs) -> Result<i32, CliError> {
    let mut run_args = args.run.clone();
    run_args.perf = true;
    if run_args.json.is_none() {
        run_args.journal_beside = Some(args.out.clone());
    }
    let req = run_args.request();
    session::check_output_paths(&req, &[&args.out])?;
    {
        // A second signal writes the perf file of what the journal holds (and the run's other
        // outputs).
        let (req, paths, out) = (req.clone(), paths.clone(), args.out.clone());
        conform_harness::interrupt::set_last_resort(move |sig| {
            let Some(results) = session::recover_from_journal(&req, sig) else {
                return;
            };
            let _ = session::write_outputs(&results, &req);
            match session::perf_file(&paths, &req, &results).and_then(|f| f.write(&out)) {
                Ok(()) => {
                    if let Some(j) = conform_harness::runner::journal::path_for_output(&out) {
                        let _ = std::fs::remove_file(j);
                    }
                    conform_harness::errln!(
                        "{}",
                        conform_harness::messages::wrote("perf record", &out)
                    );
                }
                Err(e) => super::error::print(&e),
            }
        });
    }
    let (results, code) = crate::run::execute(paths, &req)?;
    conform_harness::interrupt::writing_outputs(|| {
        record_outputs(paths, args, &req, &results, code)
    })
}

/// `perf record`'s outputs: the run's files, then the perf file.
fn record_outputs(
    paths: &conform_harness::project::Paths,
    args: &RecordArgs,
    req: &session::RunRequest,
    results: &conform_harness::results::RunResults,
    code: i32,
) -> Result<i32, CliError> {
    // The results files are written first; one that cannot be is the command's error, after
    // the perf file was still written (one lost file must not cost the other).
    let lost = crate::run::write_outputs_or_fail(results, req, code).err();
    // The cases ran: a perf file that cannot be made or written now is an output lost after
    // the work (exit 1), not a usage error.
    let written = session::perf_file(paths, req, results).and_then(|file| {
        file.write(&args.out)?;
        Ok(file)
    });
    let file = match written {
        Ok(file) => file,
        Err(e) => {
            if let Some(lost) = &lost {
                super::error::print(lost);
            }
            return Err(CliError::after_work(e, code));
        }
    };
    if req.journal_beside.is_some()
        && let Some(j) = conform_harness::runner::journal::path_for_output(&args.out)
    {
        let _ = std::fs::remove_file(j);
    }
    conform_harness::outln!(
        "{}",
        conform_harness::messages::wrote("perf record", &args.out)
    );
    if let Some(lost) = lost {
        return Err(lost);
    }
    // An interrupt (130/143) or a failure outranks "nothing recorded": the exit code says why
    // the file is short.
    if file.cases.is_empty() && matches!(code, exit_code::SUCCESS | exit_code::NOTHING_JUDGED) {
        conform_harness::outln!("{}", messages::nothing_recorded());
        return Ok(exit_code::NOTHING_JUDGED);
    }
    Ok(code)
}
