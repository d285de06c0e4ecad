//! `conform list`: the cases of the suites (after validating every suite file).

use super::paths::Paths;
use crate::exit_code;
use crate::messages;
use crate::suite::select::{load_all, Selection};
use crate::suite::{Case, Tier, TierChoice};
use clap::Args;

/// Which cases a command acts on.
#[derive(Debug, Args, Clone, Default)]
pub struct SelectArgs {
    /// Only these suites (repeatable), e.g. `--suite fa_prefill`.
    #[arg(long = "suite")]
    pub suites: Vec<String>,
    /// Only cases whose id matches this regular expression.
    #[arg(long)]
    pub filter: Option<String>,
    /// Tier to select: quick, full, or all (default: quick for list and run; all for the
    /// golden commands, whose store holds every tier).
    #[arg(long, value_enum)]
    pub tier: Option<TierChoice>,
}

impl SelectArgs {
    /// The cases a command acts on: every suite loaded (and so validated), then those this
    /// selection matches. `Err` holds the exit code once the reason is printed: a suite that
    /// does not load, or a `--suite` that names no suite (both usage errors).
    pub fn load_selected(&self, paths: &Paths) -> anyhow::Result<Result<Vec<Case>, i32>> {
        let cases = match load_all(&paths.suites) {
            Ok(c) => c,
            Err(e) => {
                crate::errln!("{}", messages::error_line(&e));
                return Ok(Err(exit_code::USAGE));
            }
        };
        let sel = self.selection()?;
        let unknown = sel.unknown_suites(&cases);
        if !unknown.is_empty() {
            crate::errln!(
                "{}",
                messages::error_line(&messages::unknown_suites(&unknown))
            );
            return Ok(Err(exit_code::USAGE));
        }
        Ok(Ok(cases.into_iter().filter(|c| sel.matches(c)).collect()))
    }

    pub fn selection(&self) -> anyhow::Result<Selection> {
        let filter = match &self.filter {
            Some(f) => Some(regex::Regex::new(f).map_err(|e| anyhow::anyhow!("--filter: {e}"))?),
            None => None,
        };
        let (tier, all_tiers) = match self.tier.unwrap_or(TierChoice::Quick) {
            TierChoice::Full => (Some(Tier::Full), false),
            TierChoice::All => (None, true),
            TierChoice::Quick => (Some(Tier::Quick), false),
        };
        Ok(Selection {
            suites: self.suites.clone(),
            filter,
            tier,
            all_tiers,
        })
    }
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub select: SelectArgs,
    /// Print the cases as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(paths: &Paths, args: ListArgs) -> anyhow::Result<i32> {
    let selected = match args.select.load_selected(paths)? {
        Ok(cases) => cases,
        Err(code) => return Ok(code),
    };
    let chosen: Vec<_> = selected.iter().collect();
    if args.json {
        crate::outln!("{}", serde_json::to_string_pretty(&chosen)?);
    } else {
        for c in &chosen {
            crate::outln!("{}", messages::list_line(&c.id, c.tier.name(), &c.recipe));
        }
        let suites: std::collections::BTreeSet<&str> =
            chosen.iter().map(|c| c.suite.as_str()).collect();
        crate::outln!("{}", messages::list_footer(chosen.len(), suites.len()));
    }
    Ok(if chosen.is_empty() {
        exit_code::NOTHING_JUDGED
    } else {
        exit_code::SUCCESS
    })
}
