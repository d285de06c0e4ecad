//! `conform adequacy`: the kill matrix of the fault catalogue against the selected suites.
//!
//! Each finished cell is journaled beside `--json` (else in the `--report` directory; with
//! neither, no journal: nothing is written where the user did not ask). SIGINT / SIGTERM stop
//! the matrix at the next case: the partial matrix is printed and written, marked
//! interrupted, and the command exits 130 / 143 like `run`. After SIGKILL, `conform report
//! --input PATH.journal --out DIR` recovers it.

use super::error::CliError;
use super::list::SelectArgs;
use clap::Args;
use conform_harness::adequacy::text as msg;
use conform_harness::adequacy::{self, AdequacyOptions};
use conform_harness::exit_code;
use conform_harness::messages;
use conform_harness::project::Paths;
use conform_harness::runner::RunOptions;
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
        conform_harness::outln!(
            "{}",
            msg::fault_line(f.name, f.family, f.requirement.name(), &ops, f.description)
        );
    }
    let gated = all
        .iter()
        .filter(|f| f.requirement == Requirement::Quick)
        .count();
    conform_harness::outln!("{}", msg::catalogue_footer(all.len(), gated));
    exit_code::SUCCESS
}

pub fn run(paths: &Paths, args: AdequacyArgs) -> Result<i32, CliError> {
    if args.list_faults {
        return Ok(list_faults());
    }
    args.json
        .as_deref()
        .map_or(Ok(()), conform_harness::atomic_file::check_writable)
        .and_then(|_| {
            args.report
                .as_deref()
                .map_or(Ok(()), conform_harness::atomic_file::check_dir_target)
        })?;
    let selected = args.select.load_selected(paths)?;
    let chosen: Vec<_> = selected.iter().collect();
    if chosen.is_empty() {
        return Err(CliError::NothingJudged(messages::no_cases_selected()));
    }
    let chosen_faults = adequacy::outputs::choose_faults(&args.faults)
        .map_err(|unknown| CliError::Usage(unknown.to_string()))?;
    let base = args.seed.unwrap_or_else(conform_harness::seed::fresh_seed);
    let tier = args
        .select
        .tier_or(conform_harness::suite::TierChoice::Quick);
    let journal = adequacy::outputs::journal_path(args.json.as_deref(), args.report.as_deref())
        .map_err(|e| CliError::OutputPath(e.to_string()))?;
    let opts = AdequacyOptions {
        journal: journal.clone(),
        seed_sets: args.seed_sets,
        base_seed: Some(base),
        gates_quick: tier.includes(conform_harness::suite::Tier::Quick),
        run: RunOptions {
            threads: args.threads.map(Threads).unwrap_or_default(),
            ..RunOptions::default()
        },
    };
    conform_harness::errln!(
        "{}",
        msg::starting(
            chosen.len(),
            chosen_faults.len(),
            args.seed_sets as usize + 1,
            base
        )
    );
    let sets = args.seed_sets as usize + 1;
    {
        // A second signal writes the matrix of the cells the journal holds.
        let (journal, json, dir) = (journal.clone(), args.json.clone(), args.report.clone());
        conform_harness::interrupt::set_last_resort(move |sig| {
            let Some(journal) = journal else {
                return;
            };
            let text = conform_harness::input_file::read_text(
                &journal,
                conform_harness::input_file::Limit::RESULTS,
            );
            let Some(mut report) = text.ok().and_then(|t| adequacy::journal::recover(&t).ok())
            else {
                return;
            };
            report.interrupted = Some(conform_harness::interrupt::signal_name(sig));
            if adequacy::outputs::write_outputs(&report, json.as_deref(), dir.as_deref()).is_ok() {
                let _ = std::fs::remove_file(&journal);
            }
        });
    }
    conform_harness::interrupt::install();
    let report = adequacy::measure(&chosen, &chosen_faults, &opts, |fault, set, i| {
        if !args.quiet && i + 1 == chosen_faults.len() {
            conform_harness::errln!("{}", msg::progress(fault, set, sets));
        }
    });
    conform_harness::outln!("{}", msg::matrix(&report));
    let survivors = msg::survivors(&report);
    if !survivors.is_empty() {
        conform_harness::out!("{survivors}");
    }
    let thin = msg::thin_kills(&report);
    if !thin.is_empty() {
        conform_harness::out!("{thin}");
    }
    let regime_map = adequacy::regimes::text(&report);
    if !regime_map.is_empty() {
        conform_harness::out!("{regime_map}");
    }
    conform_harness::outln!("{}", msg::verdict(&report));
    let verdict = if let Some(sig) = conform_harness::interrupt::received() {
        conform_harness::interrupt::exit_code(sig)
    } else if report.passes() {
        exit_code::SUCCESS
    } else {
        exit_code::FAILURE
    };
    // The matrix is computed: an output that cannot be written now is exit 1, not a usage error
    // (an interrupt keeps its own code), and the journal stays: it is the only record left.
    let written = conform_harness::interrupt::writing_outputs(|| {
        adequacy::outputs::write_outputs(&report, args.json.as_deref(), args.report.as_deref())
    });
    if let Ok(Some(page)) = &written {
        conform_harness::outln!("{}", conform_harness::messages::report::wrote_report(page));
    }
    if let Err(e) = written {
        let message = match &journal {
            Some(j) => format!("{e}\n{}", msg::journal_kept(j)),
            None => e.to_string(),
        };
        return Err(CliError::after_work(message, verdict));
    }
    if let Some(j) = &journal {
        let _ = std::fs::remove_file(j);
    }
    Ok(verdict)
}
