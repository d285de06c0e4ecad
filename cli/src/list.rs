//! `conform list`: the cases of the suites (after validating every suite file).

use super::error::CliError;
use super::tier_arg::TierArg;
use clap::Args;
use conform_harness::exit_code;
use conform_harness::messages;
use conform_harness::project::{CaseQuery, Paths};
use conform_harness::suite::select::Selection;
use conform_harness::suite::{Case, TierChoice};

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
    pub tier: Option<TierArg>,
}

impl SelectArgs {
    /// The library's query for these arguments.
    pub fn query(&self) -> CaseQuery {
        CaseQuery {
            suites: self.suites.clone(),
            filter: self.filter.clone(),
            tier: self.tier.map(TierChoice::from),
        }
    }

    /// The tier these arguments select: `--tier`, else the command's `default` (quick for
    /// `list`, `run` and `adequacy`; all for the golden commands, whose store holds every tier).
    pub fn tier_or(&self, default: TierChoice) -> TierChoice {
        self.tier.map_or(default, TierChoice::from)
    }

    /// The library's query for these arguments, with the command's `default` tier.
    pub fn query_or(&self, default: TierChoice) -> CaseQuery {
        CaseQuery {
            tier: Some(self.tier_or(default)),
            ..self.query()
        }
    }

    /// The cases a command acts on ([`CaseQuery::load_selected`]): a suite that does not
    /// load, a `--filter` that is no regex, a `--suite` that names no suite are errors.
    pub fn load_selected(&self, paths: &Paths) -> Result<Vec<Case>, CliError> {
        Ok(self.query().load_selected(paths)?)
    }

    /// The selection these arguments make; a usage error for a `--filter` that is no regex.
    pub fn selection(&self) -> Result<Selection, CliError> {
        Ok(self.query().selection()?)
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
        conform_harness::outln!("{text}");
    } else {
        for c in &chosen {
            conform_harness::outln!("{}", messages::list_line(&c.id, c.tier.name(), &c.recipe));
        }
        let suites: std::collections::BTreeSet<&str> =
            chosen.iter().map(|c| c.suite.as_str()).collect();
        conform_harness::outln!("{}", messages::list_footer(chosen.len(), suites.len()));
    }
    Ok(if chosen.is_empty() {
        exit_code::NOTHING_JUDGED
    } else {
        exit_code::SUCCESS
    })
}
