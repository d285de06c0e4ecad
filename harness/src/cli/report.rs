//! `conform report`: arguments and entry point.

use crate::messages::report as msg;
use crate::report::{self, ReportError, ReportInputs};
use clap::Args;
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
pub fn run_command(args: &ReportArgs) -> Result<i32, crate::cli::error::CliError> {
    let outcome = run(args)?;
    if outcome.judged {
        Ok(crate::exit_code::SUCCESS)
    } else {
        crate::errln!("{}", msg::nothing_judged(&args.input));
        Ok(crate::exit_code::NOTHING_JUDGED)
    }
}

/// What `conform report` wrote.
pub struct ReportOutcome {
    /// `DIR/index.html`.
    pub page: PathBuf,
    /// Whether the results judged any case (passed or failed; not every one skipped).
    pub judged: bool,
}

/// Builds and writes the report; returns the path of `index.html`.
pub fn run(args: &ReportArgs) -> Result<ReportOutcome, ReportError> {
    if report::load::is_journal(&args.input)
        && crate::adequacy::journal::is_adequacy_journal(&args.input)
    {
        return recover_adequacy(args);
    }
    let mut inputs = ReportInputs::load(
        &args.input,
        &args.perf,
        args.baseline.as_deref(),
        args.mc2.as_deref(),
    )?;
    if let Some(db) = &args.history {
        let mut view = report::history_input::load(db, args.history_runs)?;
        view.runs.append(&mut inputs.perf_files);
        inputs.perf_files = view.runs;
        inputs.history_changes = view.changes;
        inputs.history_noise = view.noise;
    }
    inputs.adequacy = args
        .adequacy
        .as_deref()
        .map(report::load::adequacy)
        .transpose()?;
    // A journal (what SIGKILL leaves) also becomes a results file beside the report.
    if report::load::is_journal(&args.input) {
        let out = args.out.join("results.json");
        let text =
            serde_json::to_string_pretty(&inputs.results).map_err(|e| ReportError::Write {
                path: out.clone(),
                source: std::io::Error::other(e),
            })?;
        std::fs::create_dir_all(&args.out).map_err(|source| ReportError::Write {
            path: args.out.clone(),
            source,
        })?;
        crate::atomic_file::write(&out, text.as_bytes()).map_err(|source| ReportError::Write {
            path: out.clone(),
            source,
        })?;
        inputs.results_path = out.clone();
        crate::outln!(
            "{}",
            msg::recovered_journal(
                &args.input,
                &out,
                inputs.results.cases.len(),
                inputs.results.unfinished.len()
            )
        );
    }
    let judged = inputs
        .results
        .cases
        .iter()
        .any(|c| c.status != crate::results::Status::Skipped);
    let page = report::render(&inputs)?;
    let path = report::write(&args.out, &page)?;
    crate::outln!("{}", msg::wrote_report(&path));
    Ok(ReportOutcome { page: path, judged })
}

/// `conform report --input PATH.journal` on the journal of a killed `conform adequacy`: the
/// partial kill matrix as `DIR/adequacy.json` and its page `DIR/index.html`. Judged when at
/// least one cell was measured.
fn recover_adequacy(args: &ReportArgs) -> Result<ReportOutcome, ReportError> {
    let journal = &args.input;
    if !args.perf.is_empty()
        || args.baseline.is_some()
        || args.mc2.is_some()
        || args.adequacy.is_some()
        || args.history.is_some()
    {
        return Err(ReportError::Field {
            path: journal.clone(),
            field: "journal".to_string(),
            reason: msg::ADEQUACY_JOURNAL_ALONE.to_string(),
        });
    }
    let text = std::fs::read_to_string(journal).map_err(|source| ReportError::Read {
        path: journal.clone(),
        source,
    })?;
    let matrix = crate::adequacy::journal::recover(&text).map_err(|reason| ReportError::Field {
        path: journal.clone(),
        field: "journal".to_string(),
        reason,
    })?;
    let write_err = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| ReportError::Write { path, source }
    };
    std::fs::create_dir_all(&args.out).map_err(write_err(&args.out))?;
    let out = args.out.join("adequacy.json");
    let text = serde_json::to_string_pretty(&matrix)
        .map_err(|e| write_err(&out)(std::io::Error::other(e)))?;
    crate::atomic_file::write(&out, text.as_bytes()).map_err(write_err(&out))?;
    let measured: usize = matrix.matrix.iter().map(|c| c.outcomes.len()).sum();
    crate::outln!(
        "{}",
        msg::recovered_adequacy_journal(journal, &out, measured, matrix.unfinished.len())
    );
    crate::outln!("{}", crate::messages::adequacy::verdict(&matrix));
    let page = report::write(&args.out, &crate::adequacy::html::page(&matrix))?;
    crate::outln!("{}", msg::wrote_report(&page));
    Ok(ReportOutcome {
        page,
        judged: measured > 0,
    })
}
