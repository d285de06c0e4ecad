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

/// Builds and writes the report; returns the path of `index.html`.
pub fn run(args: &ReportArgs) -> Result<PathBuf, ReportError> {
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
    let page = report::render(&inputs)?;
    let path = report::write(&args.out, &page)?;
    println!("{}", msg::wrote_report(&path));
    Ok(path)
}
