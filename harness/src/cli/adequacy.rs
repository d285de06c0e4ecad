//! `conform adequacy`: the kill matrix of the fault catalogue against the selected suites.
//!
//! Each finished cell is journaled beside `--json` (else in the `--report` directory; with
//! neither, no journal: nothing is written where the user did not ask). SIGINT / SIGTERM stop
//! the matrix at the next case: the partial matrix is printed and written, marked
//! interrupted, and the command exits 130 / 143 like `run`. After SIGKILL, `conform report
//! --input PATH.journal --out DIR` recovers it.

use super::error::CliError;
use super::list::SelectArgs;
use super::paths::Paths;
use crate::adequacy::{self, AdequacyOptions};
use crate::exit_code;
use crate::messages::{self, adequacy as msg};
use crate::runner::RunOptions;
use clap::Args;
use conform_reference::faults::{self, Requirement};
use conform_reference::parallel::Threads;
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(about = msg::ABOUT)]
pub struct AdequacyArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    #[arg(long = "fault", help = msg::HELP_FAULT)]
    pub faults: Vec<String>,
    #[arg(long, default_value_t = 0, help = msg::HELP_SEED_SETS, allow_negative_numbers = true,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(msg::MAX_SEED_SETS)))]
    pub seed_sets: u32,
    #[arg(long, help = msg::HELP_SEED)]
    pub seed: Option<u64>,
    #[arg(long, value_name = "FILE", help = msg::HELP_JSON)]
    pub json: Option<PathBuf>,
    #[arg(long, value_name = "DIR", help = msg::HELP_REPORT)]
    pub report: Option<PathBuf>,
    /// Threads for the reference computations, from 1 to 4 per available core (results never
    /// depend on it).
    #[arg(long, allow_negative_numbers = true, value_parser = super::parse_threads)]
    pub threads: Option<usize>,
    /// Do not print progress lines.
    #[arg(long)]
    pub quiet: bool,
    #[arg(long, help = msg::HELP_LIST)]
    pub list_faults: bool,
}

fn list_faults() -> i32 {
    let all = faults::catalogue();
    for f in &all {
        let ops = if f.ops.is_empty() {
            "every op".to_string()
        } else {
            f.ops.join(", ")
        };
        crate::outln!(
            "{}",
            msg::fault_line(f.name, f.family, f.requirement.name(), &ops, f.description)
        );
    }
    let gated = all
        .iter()
        .filter(|f| f.requirement == Requirement::Quick)
        .count();
    crate::outln!("{}", msg::catalogue_footer(all.len(), gated));
    exit_code::SUCCESS
}

pub fn run(paths: &Paths, args: AdequacyArgs) -> Result<i32, CliError> {
    if args.list_faults {
        return Ok(list_faults());
    }
    args.json
        .as_deref()
        .map_or(Ok(()), crate::atomic_file::check_writable)
        .and_then(|_| {
            args.report
                .as_deref()
                .map_or(Ok(()), crate::atomic_file::check_dir_target)
        })
        .map_err(CliError::OutputPath)?;
    let selected = args.select.load_selected(paths)?;
    let chosen: Vec<_> = selected.iter().collect();
    if chosen.is_empty() {
        return Err(CliError::NothingJudged(messages::no_cases_selected()));
    }
    let all = faults::catalogue();
    let chosen_faults: Vec<_> = if args.faults.is_empty() {
        all.clone()
    } else {
        let unknown: Vec<String> = args
            .faults
            .iter()
            .filter(|n| faults::find(n).is_none())
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(CliError::Usage(msg::unknown_faults(&unknown)));
        }
        all.into_iter()
            .filter(|f| args.faults.iter().any(|n| n == f.name))
            .collect()
    };
    let base = args.seed.unwrap_or_else(crate::seed::fresh_seed);
    let tier = args.select.tier.unwrap_or(crate::suite::TierChoice::Quick);
    let journal = journal_path(&args).map_err(CliError::OutputPath)?;
    let opts = AdequacyOptions {
        journal: journal.clone(),
        seed_sets: args.seed_sets,
        base_seed: Some(base),
        gates_quick: tier.includes(crate::suite::Tier::Quick),
        run: RunOptions {
            threads: args.threads.map(Threads).unwrap_or_default(),
            ..RunOptions::default()
        },
    };
    crate::errln!(
        "{}",
        msg::starting(
            chosen.len(),
            chosen_faults.len(),
            args.seed_sets as usize + 1,
            base
        )
    );
    let sets = args.seed_sets as usize + 1;
    crate::interrupt::install();
    let report = adequacy::measure(&chosen, &chosen_faults, &opts, |fault, set, i| {
        if !args.quiet && i + 1 == chosen_faults.len() {
            crate::errln!("{}", msg::progress(fault, set, sets));
        }
    });
    crate::outln!("{}", msg::matrix(&report));
    let survivors = msg::survivors(&report);
    if !survivors.is_empty() {
        crate::out!("{survivors}");
    }
    let thin = msg::thin_kills(&report);
    if !thin.is_empty() {
        crate::out!("{thin}");
    }
    let regime_map = adequacy::regimes::text(&report);
    if !regime_map.is_empty() {
        crate::out!("{regime_map}");
    }
    crate::outln!("{}", msg::verdict(&report));
    let verdict = if let Some(sig) = crate::interrupt::received() {
        crate::interrupt::exit_code(sig)
    } else if report.passes() {
        exit_code::SUCCESS
    } else {
        exit_code::FAILURE
    };
    // The matrix is computed: an output that cannot be written now is exit 1, not a usage error
    // (an interrupt keeps its own code), and the journal stays: it is the only record left.
    if let Err(e) = write_adequacy_outputs(&report, &args) {
        let message = match &journal {
            Some(j) => format!("{e}\n{}", msg::journal_kept(j)),
            None => e,
        };
        return Err(CliError::after_work(message, verdict));
    }
    if let Some(j) = &journal {
        let _ = std::fs::remove_file(j);
    }
    Ok(verdict)
}

/// Where the finished cells are journaled: beside `--json`, else in the `--report` directory
/// (created now), else nowhere.
fn journal_path(args: &AdequacyArgs) -> Result<Option<PathBuf>, String> {
    // Nothing is created beside a device or FIFO given as --json.
    if let Some(j) = args
        .json
        .as_deref()
        .and_then(adequacy::journal::path_beside)
    {
        return Ok(Some(j));
    }
    match &args.report {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            Ok(Some(adequacy::journal::path_in_report_dir(dir)))
        }
        None => Ok(None),
    }
}

/// Writes `--json` and `--report` of a measured kill matrix.
fn write_adequacy_outputs(
    report: &adequacy::AdequacyReport,
    args: &AdequacyArgs,
) -> Result<(), String> {
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
        crate::atomic_file::write(path, text.as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(dir) = &args.report {
        let path =
            crate::report::write(dir, &adequacy::html::page(report)).map_err(|e| e.to_string())?;
        crate::outln!("{}", crate::messages::report::wrote_report(&path));
    }
    Ok(())
}
