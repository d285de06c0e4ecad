//! `conform targets` and opening targets by name.

use super::paths::Paths;
use crate::exit_code;
use crate::messages;
use crate::runner::REFERENCE_TARGET;
use clap::Args;
use conform_reference::parallel::Threads;
use conform_targets::reference_target::ReferenceTarget;
use conform_targets::target::Target;
use conform_targets::{registry, WorkerTarget};

#[derive(Debug, Args)]
pub struct TargetsArgs {}

/// Every target name known here: the reference and each `targets/<name>/target.toml`.
pub fn known(paths: &Paths) -> Vec<String> {
    let mut names = vec![REFERENCE_TARGET.to_string()];
    if let Ok(dirs) = registry::worker_dirs(&paths.root) {
        names.extend(
            dirs.iter()
                .filter_map(|d| d.file_name().and_then(|n| n.to_str()).map(str::to_string)),
        );
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
        // A worker directory given by its path (a `target.toml` in it), named after the
        // directory: the nightly gate's control, a kept copy of an earlier build.
        let dir = std::path::Path::new(name);
        if !all.contains(name) && name.contains('/') && dir.join("target.toml").is_file() {
            out.push(
                WorkerTarget::from_dir(&paths.root, dir)
                    .map(|w| Box::new(w) as Box<dyn Target>)
                    .map_err(|e| e.to_string())?,
            );
            continue;
        }
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
    let dir = paths.targets.join(name);
    WorkerTarget::from_dir(&paths.root, &dir)
        .map(|w| Box::new(w) as Box<dyn Target>)
        .map_err(|e| e.to_string())
}

pub fn run(paths: &Paths, _args: TargetsArgs) -> anyhow::Result<i32> {
    let names = known(paths);
    let mut targets = open(paths, &names, Threads::available()).map_err(|e| anyhow::anyhow!(e))?;
    for t in targets.iter_mut() {
        crate::outln!("{}", registry::status_line(t.as_mut()));
    }
    let required = registry::required_targets();
    let errors = registry::check_required(&mut targets, &required);
    for e in &errors {
        crate::errln!("{}", messages::error_line(e));
    }
    Ok(if errors.is_empty() {
        exit_code::SUCCESS
    } else {
        exit_code::FAILURE
    })
}
