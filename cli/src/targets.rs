//! `conform targets` and opening targets by name.

use super::error::CliError;
use clap::Args;
use conform_harness::exit_code;
use conform_harness::project::Paths;
use conform_harness::session::{known_targets as known, open_targets as open};
use conform_reference::parallel::Threads;
use conform_targets::registry;

#[derive(Debug, Args)]
pub struct TargetsArgs {}

pub fn run(paths: &Paths, _args: TargetsArgs) -> Result<i32, CliError> {
    let names = known(paths);
    let mut targets = open(paths, &names, Threads::available())?;
    for t in targets.iter_mut() {
        conform_harness::outln!("{}", registry::status_line(t.as_mut()));
    }
    let required = registry::required_targets();
    let errors = registry::check_required(&mut targets, &required);
    for e in &errors {
        super::error::print(e);
    }
    Ok(if errors.is_empty() {
        exit_code::SUCCESS
    } else {
        exit_code::FAILURE
    })
}
