//! `conform golden verify | bless | accept | review`.

use super::error::CliError;
use super::list::SelectArgs;
use clap::Subcommand;
use conform_harness::exit_code;
use conform_harness::golden::review::{Review, ReviewError};
use conform_harness::golden::text as golden_text;
use conform_harness::golden::{bless, review, verify};
use conform_harness::messages;
use conform_harness::project::Paths;
use conform_harness::suite::select::load_all;
use conform_reference::parallel::Threads;

#[derive(Debug, Subcommand)]
pub enum GoldenCommand {
    /// Recompute golden tensors with the reference and compare digests (exit 1 on drift,
    /// 2 on a damaged store). Checks every tier unless --tier says otherwise.
    Verify {
        #[command(flatten)]
        select: SelectArgs,
        /// Threads for the reference, from 1 to 4 per available core (default: every core;
        /// results never depend on it)
        #[arg(long, allow_negative_numbers = true, value_parser = super::parse_threads)]
        threads: Option<usize>,
    },
    /// Recompute and stage changes as `.new` files with a review (refused when CI is set).
    /// Every tier unless --tier says otherwise.
    Bless {
        #[command(flatten)]
        select: SelectArgs,
        /// Threads for the reference, from 1 to 4 per available core (default: every core;
        /// results never depend on it)
        #[arg(long, allow_negative_numbers = true, value_parser = super::parse_threads)]
        threads: Option<usize>,
    },
    /// Move staged `.new` files into the golden store (refused when a staged entry no longer
    /// matches its case in the suites).
    Accept,
    /// Decide the staged changes case by case: accept (a), reject (r) or skip (s) each, on a
    /// terminal; or with --accept / --reject for scripts; or --list them. Refused when CI is
    /// set, and when a staged entry no longer matches its case in the suites.
    Review {
        /// Accept the pending cases with this id, or whose ids this regex matches (repeatable)
        #[arg(long, value_name = "ID_OR_REGEX")]
        accept: Vec<String>,
        /// Reject (delete the staged files of) the pending cases with this id, or whose ids
        /// this regex matches (repeatable)
        #[arg(long, value_name = "ID_OR_REGEX")]
        reject: Vec<String>,
        /// List the pending cases, one a line, with what changed; decide nothing
        #[arg(long, conflicts_with_all = ["accept", "reject"])]
        list: bool,
    },
}

pub fn run(paths: &Paths, cmd: GoldenCommand) -> Result<i32, CliError> {
    match cmd {
        GoldenCommand::Verify { select, threads } => {
            with_cases(paths, &select, |cases, all_ids| {
                let mut progress = |i: usize, n: usize, id: &str| {
                    conform_harness::errln!("{}", golden_text::verify_progress(i, n, id))
                };
                let report = verify::verify(
                    &paths.golden,
                    cases,
                    all_ids,
                    threads_of(threads),
                    &mut progress,
                )?;
                conform_harness::outln!("{report}");
                Ok(report.exit_code())
            })
        }
        GoldenCommand::Bless { select, threads } => with_cases(paths, &select, |cases, all_ids| {
            let review = bless::bless(&paths.golden, cases, all_ids, threads_of(threads))?;
            conform_harness::outln!("{review}");
            Ok(exit_code::SUCCESS)
        }),
        GoldenCommand::Accept => match accept(paths)? {
            None => {
                conform_harness::outln!("{}", golden_text::nothing_to_accept());
                Ok(exit_code::SUCCESS)
            }
            Some(done) => {
                conform_harness::outln!(
                    "{}",
                    golden_text::accept_done(done.moved.len(), done.removed.len())
                );
                Ok(exit_code::SUCCESS)
            }
        },
        GoldenCommand::Review {
            accept,
            reject,
            list,
        } => review(paths, &accept, &reject, list),
    }
}

/// `--threads`, or every core.
fn threads_of(threads: Option<usize>) -> Threads {
    threads.map_or_else(Threads::available, Threads)
}

fn with_cases(
    paths: &Paths,
    select: &SelectArgs,
    f: impl FnOnce(
        &[&conform_harness::suite::Case],
        &std::collections::BTreeSet<&str>,
    ) -> Result<i32, conform_harness::golden::GoldenError>,
) -> Result<i32, CliError> {
    let cases = load_all(&paths.suites)?;
    // golden commands default to every tier: full-tier digests are part of the store.
    let sel = select
        .query_or(conform_harness::suite::TierChoice::All)
        .selection()?;
    let all_ids: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    let chosen: Vec<&conform_harness::suite::Case> =
        cases.iter().filter(|c| sel.matches(c)).collect();
    if chosen.is_empty() {
        return Err(CliError::NothingJudged(messages::no_cases_selected()));
    }
    Ok(f(&chosen, &all_ids)?)
}

/// `golden accept` against the suites as they are now: staged entries blessed for another
/// definition of a case (the suite changed back, or again, after bless) are refused.
fn accept(paths: &Paths) -> Result<Option<review::Accepted>, CliError> {
    let cases = load_all(&paths.suites)?;
    Ok(review::accept(&paths.golden, &cases)?)
}

/// `golden review`: the exit code of the decisions taken, or why none could be.
fn review(
    paths: &Paths,
    accept: &[String],
    reject: &[String],
    list: bool,
) -> Result<i32, CliError> {
    use std::io::IsTerminal;
    if std::env::var_os("CI").is_some() {
        return Err(ReviewError::OnCi.into());
    }
    let cases = load_all(&paths.suites)?;
    let Some(mut review) = Review::open(&paths.golden, &cases)? else {
        conform_harness::outln!("{}", golden_text::nothing_to_review());
        return Ok(exit_code::SUCCESS);
    };
    if review.pending().is_empty() {
        conform_harness::outln!("{}", golden_text::nothing_to_review());
        return Ok(exit_code::SUCCESS);
    }
    if list {
        conform_harness::outln!("{}", golden_text::pending_list(review.pending()));
        return Ok(exit_code::SUCCESS);
    }
    let tally = if !accept.is_empty() || !reject.is_empty() {
        review.decide_by_patterns(accept, reject)?
    } else if std::io::stdin().is_terminal() {
        let pending = review.pending().to_vec();
        super::review_prompt::interactive(
            &pending,
            &mut std::io::stdin().lock(),
            &mut std::io::stdout().lock(),
            |id, decision| review.decide(id, decision),
        )?
    } else {
        conform_harness::outln!("{}", golden_text::pending_list(review.pending()));
        return Err(CliError::Usage(
            golden_text::needs_terminal_or_flags().to_string(),
        ));
    };
    conform_harness::outln!("{}", golden_text::summary(&tally, review.pending().len()));
    Ok(exit_code::SUCCESS)
}
