//! `conform targets` and opening targets by name.

use super::error::CliError;
use super::paths::Paths;
use crate::exit_code;
use clap::Args;
use conform_reference::parallel::Threads;
use conform_targets::registry;
use conform_targets::target::Target;

#[derive(Debug, Args)]
pub struct TargetsArgs {}

/// Every target name known here: the reference and each `targets/<name>/target.toml`.
pub fn known(paths: &Paths) -> Vec<String> {
    registry::known(&paths.root)
}

/// Opens the named targets (the reference in-process; workers lazily, on first use; a worker
/// directory by its path): [`registry::open`], its error as the user's message.
pub fn open(
    paths: &Paths,
    names: &[String],
    threads: Threads,
) -> Result<Vec<Box<dyn Target>>, String> {
    registry::open(&paths.root, names, threads).map_err(|e| e.to_string())
}

pub fn run(paths: &Paths, _args: TargetsArgs) -> Result<i32, CliError> {
    let names = known(paths);
    let mut targets = open(paths, &names, Threads::available()).map_err(CliError::Usage)?;
    for t in targets.iter_mut() {
        crate::outln!("{}", registry::status_line(t.as_mut()));
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
