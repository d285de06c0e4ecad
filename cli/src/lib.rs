//! The `conform` command line: argument types, dispatch and presentation; the work is the
//! library's (`conform_harness`). Each command lives in its own file; every message it prints
//! comes from `conform_harness::messages`. Commands return the code their work earned or a [`error::CliError`], which carries its own exit code; `main` prints it with
//! [`error::report`].

pub mod adequacy;
pub mod error;
pub mod explain;
pub mod fingerprint;
pub mod gate_output;
pub mod golden;
pub mod list;
pub mod mc2;
pub mod perf;
pub mod perf_history;
pub mod progress;
pub mod report;
pub mod review_prompt;
pub mod run;
pub mod targets;
pub mod tier_arg;
pub mod validate;

use clap::{Parser, Subcommand};
use conform_harness::project::Paths;

/// conform: conformance and regression testing for LLM-inference kernels on Ascend NPUs.
#[derive(Debug, Parser)]
// The about line is the one `conform --help` has always printed (it was the description of
// the crate that held the binary), kept word for word: the CLI's contract (tests/cmd/help.stdout).
#[command(
    name = "conform",
    version,
    about = "The conform runner: suites, golden data, numerics verdicts, performance gates, reports and the `conform` CLI",
    long_about = None
)]
pub struct Cli {
    /// The project root holding suites/, golden/ and targets/ (default: the nearest ancestor of
    /// the current directory that has suites/ and golden/).
    #[arg(long, global = true, env = "CONFORM_ROOT")]
    pub root: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the cases of the suites.
    List(list::ListArgs),
    /// Show everything about one case: parameters, shapes, recipe, checks, golden file.
    Explain(explain::ExplainArgs),
    /// Verify, bless, accept or review (case by case) the golden store.
    #[command(subcommand)]
    Golden(golden::GoldenCommand),
    /// Run suites against targets (no arguments: the main job — every quick case on the
    /// reference, verified against the golden store).
    Run(Box<run::RunArgs>),
    /// List the targets and whether each is available here.
    Targets(targets::TargetsArgs),
    /// Write the self-contained HTML report of a results file (plus perf files, a baseline
    /// comparison and an MC2 timeline).
    Report(report::ReportArgs),
    /// MC2 (matmul + all-reduce) tools: the M-axis split planner.
    Mc2(mc2::Mc2Args),
    /// Performance records and the regression gate.
    #[command(subcommand)]
    Perf(perf::PerfCommand),
    /// Validate a third-party kernel: fresh seeds, every applicable suite, correctness and
    /// budgets, and a report to attach to the pull request.
    Validate(validate::ValidateArgs),
    /// Measure how sharp the suites are: the kill matrix of the built-in fault catalogue.
    Adequacy(adequacy::AdequacyArgs),
    /// Find which value of each knob of the model a target's bits match, with evidence.
    Fingerprint(fingerprint::FingerprintArgs),
}

/// The value parser of every `--threads`: at least 1 and at most
/// [`conform_reference::parallel::MAX_THREADS_PER_CORE`] times the available cores (more
/// never speeds a computation up, and tens of thousands of threads can hold a machine for
/// minutes). Results never depend on the count.
pub fn parse_threads(s: &str) -> Result<usize, conform_harness::messages::ThreadsError> {
    conform_harness::messages::parse_threads(s, conform_reference::parallel::Threads::max_allowed())
}

impl Command {
    /// Whether the command's output is what it prints (a listing, an explanation, a plan), as
    /// opposed to the long commands whose results go to files: the former exit 141 when their
    /// reader closes stdout early, the latter finish, write their files and keep their code.
    pub fn output_is_stdout(&self) -> bool {
        match self {
            Command::List(_) | Command::Explain(_) | Command::Targets(_) | Command::Mc2(_) => true,
            // The perf commands that write a file or a store, or give a verdict (the nightly
            // script reads their codes), keep their own code when stdout goes away.
            Command::Perf(c) => !matches!(
                c,
                perf::PerfCommand::Record(_)
                    | perf::PerfCommand::Compare(_)
                    | perf::PerfCommand::History(
                        perf_history::HistoryCommand::Ingest(_)
                            | perf_history::HistoryCommand::Gate(_)
                    )
            ),
            Command::Golden(_)
            | Command::Run(_)
            | Command::Report(_)
            | Command::Validate(_)
            | Command::Adequacy(_)
            | Command::Fingerprint(_) => false,
        }
    }
}

/// Runs a parsed command; returns the exit code its work earned, or why it could not run or
/// deliver it (the error knows its own exit code).
pub fn run(cli: Cli) -> Result<i32, error::CliError> {
    // Only the commands that read suites, golden data or target declarations need a project:
    // report, mc2 plan and perf compare read the files they are given, from any directory.
    let paths = || Ok::<_, error::CliError>(Paths::discover(cli.root.as_deref())?);
    match cli.command {
        Command::List(a) => list::run(&paths()?, a),
        Command::Explain(a) => explain::run(&paths()?, a),
        Command::Golden(c) => golden::run(&paths()?, c),
        Command::Run(a) => run::run(&paths()?, *a),
        Command::Targets(a) => targets::run(&paths()?, a),
        Command::Mc2(a) => mc2::run(&a, &mut std::io::stdout().lock())
            .map(|()| conform_harness::exit_code::SUCCESS)
            .map_err(error::CliError::from),
        Command::Validate(a) => validate::run(&paths()?, a),
        Command::Adequacy(a) => adequacy::run(&paths()?, a),
        Command::Fingerprint(a) => fingerprint::run(&paths()?, a),
        Command::Perf(c) => perf::run(&paths, &c),
        Command::Report(a) => report::run_command(&a),
    }
}
