//! `conform list`: the cases of the suites (after validating every suite file).

use super::error::CliError;
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
    /// selection matches; or why not: a suite that does not load, a `--filter` that is no
    /// regex, a `--suite` that names no suite (all usage errors).
    pub fn load_selected(&self, paths: &Paths) -> Result<Vec<Case>, CliError> {
        let cases = load_all(&paths.suites)?;
        let sel = self.selection()?;
        let unknown = sel.unknown_suites(&cases);
        if !unknown.is_empty() {
            return Err(CliError::Usage(messages::unknown_suites(&unknown)));
        }
        Ok(cases.into_iter().filter(|c| sel.matches(c)).collect())
    }

    /// The selection these arguments make; a usage error for a `--filter` that is no regex.
    pub fn selection(&self) -> Result<Selection, CliError> {
        let filter = match &self.filter {
            Some(f) => {
                Some(regex::Regex::new(f).map_err(|e| CliError::Usage(format!("--filter: {e}")))?)
            }
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

pub fn run(paths: &Paths, args: ListArgs) -> Result<i32, CliError> {
    let selected = args.select.load_selected(paths)?;
    let chosen: Vec<_> = selected.iter().collect();
    if args.json {
        let text = serde_json::to_string_pretty(&chosen)
            .map_err(|e| CliError::Usage(format!("--json: {e}")))?;
        crate::outln!("{text}");
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
