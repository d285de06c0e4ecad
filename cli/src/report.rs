//! `conform report`: arguments and entry point.

use clap::Args;
use conform_harness::make_report::{self, ReportNote, ReportOutcome, ReportRequest};
use conform_harness::messages::report as msg;
use conform_harness::report::ReportError;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
#[command(about = msg::ABOUT)]
pub struct ReportArgs {
    #[arg(long, value_name = "RESULTS.json", help = msg::HELP_INPUT)]
    pub input: PathBuf,
    #[arg(long, value_name = "PERF.json", help = msg::HELP_PERF)]
    pub perf: Vec<PathBuf>,
    #[arg(long, value_name = "COMPARE.json", help = msg::HELP_BASELINE)]
    pub baseline: Option<PathBuf>,
    #[arg(long, value_name = "TIMELINE.json", help = msg::HELP_MC2)]
    pub mc2: Option<PathBuf>,
    #[arg(long, value_name = "ADEQUACY.json", help = msg::HELP_ADEQUACY)]
    pub adequacy: Option<PathBuf>,
    #[arg(long, value_name = "FILE|URL", help = msg::HELP_HISTORY)]
    pub history: Option<String>,
    #[arg(long, value_name = "N", default_value_t = 30, help = msg::HELP_HISTORY_RUNS)]
    pub history_runs: usize,
    #[arg(long, value_name = "DIR", help = msg::HELP_OUT)]
    pub out: PathBuf,
}

/// Runs `conform report`; returns the exit code: 0 written, 4 written but the results judged
/// nothing (no case, or every case skipped); or the error of an input that cannot be read or
/// a report that cannot be written (2).
pub fn run_command(args: &ReportArgs) -> Result<i32, crate::error::CliError> {
    let outcome = run(args)?;
    if outcome.judged {
        Ok(conform_harness::exit_code::SUCCESS)
    } else {
        conform_harness::errln!("{}", msg::nothing_judged(&args.input));
        Ok(conform_harness::exit_code::NOTHING_JUDGED)
    }
}

/// Builds and writes the report ([`make_report::build`]), printing what it did.
pub fn run(args: &ReportArgs) -> Result<ReportOutcome, ReportError> {
    let req = ReportRequest {
        input: args.input.clone(),
        perf: args.perf.clone(),
        baseline: args.baseline.clone(),
        mc2: args.mc2.clone(),
        adequacy: args.adequacy.clone(),
        history: args.history.clone(),
        history_runs: args.history_runs,
        out: args.out.clone(),
    };
    make_report::build(&req, &mut |n| match n {
        ReportNote::RecoveredJournal {
            journal,
            results,
            finished,
            unfinished,
        } => conform_harness::outln!(
            "{}",
            msg::recovered_journal(journal, results, finished, unfinished)
        ),
        ReportNote::RecoveredAdequacyJournal {
            journal,
            out,
            measured,
            unfinished,
            matrix,
        } => {
            conform_harness::outln!(
                "{}",
                msg::recovered_adequacy_journal(journal, out, measured, unfinished)
            );
            conform_harness::outln!("{}", conform_harness::adequacy::text::verdict(matrix));
        }
        ReportNote::Wrote(page) => conform_harness::outln!("{}", msg::wrote_report(page)),
    })
}
