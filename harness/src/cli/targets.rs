//! `conform targets` and opening targets by name.

use super::paths::Paths;
use crate::exit_code;
use crate::messages;
use crate::runner::REFERENCE_TARGET;
use clap::Args;
use conform_reference::parallel::Threads;
use conform_targets::reference_target::ReferenceTarget;
use conform_targets::target::Target;

#[derive(Debug, Args)]
pub struct TargetsArgs {}

/// Every target name known here: the reference and each `targets/<name>/target.toml`.
pub fn known(paths: &Paths) -> Vec<String> {
    let mut names = vec![REFERENCE_TARGET.to_string()];
    if let Ok(rd) = std::fs::read_dir(&paths.targets) {
        let mut workers: Vec<String> = rd
            .flatten()
            .filter(|e| e.path().join("target.toml").is_file())
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        workers.sort();
        names.extend(workers);
    }
    names
}

/// Opens the named targets (the reference in-process; workers lazily, on first use).
pub fn open(
    paths: &Paths,
    names: &[String],
    threads: Threads,
) -> Result<Vec<Box<dyn Target>>, String> {
    let all = known(paths);
    let mut out: Vec<Box<dyn Target>> = Vec::new();
    for name in names {
        if !all.contains(name) {
            return Err(messages::unknown_target(name, &all));
        }
        if name == REFERENCE_TARGET {
            out.push(Box::new(ReferenceTarget::new(threads)));
        } else {
            out.push(open_worker(paths, name)?);
        }
    }
    Ok(out)
}

fn open_worker(paths: &Paths, name: &str) -> Result<Box<dyn Target>, String> {
    let _ = (paths, name);
    Err(format!("worker target `{name}`: workers are not wired yet"))
}

pub fn run(paths: &Paths, _args: TargetsArgs) -> anyhow::Result<i32> {
    let names = known(paths);
    let mut targets = open(paths, &names, Threads::available()).map_err(|e| anyhow::anyhow!(e))?;
    for t in targets.iter_mut() {
        let availability = t.availability().to_string();
        println!("{}", messages::target_line(t.name(), &availability));
    }
    Ok(exit_code::SUCCESS)
}
