//! Which targets exist: the built-in `reference` plus every `targets/<name>/target.toml`.
//!
//! A target that is unavailable is normally skipped with its reason. Targets named in
//! `CONFORM_REQUIRE_TARGETS` (comma-separated; CI sets it to the CPU workers) must be
//! available: [`check_required`] turns a missing or unavailable one into an error, so a
//! broken install step cannot hide behind skips.

use crate::reference_target::ReferenceTarget;
use crate::target::{Availability, Target};
use crate::worker::{ConfigError, WorkerTarget};
use conform_reference::parallel::Threads;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The environment variable naming required targets.
pub const REQUIRE_ENV: &str = "CONFORM_REQUIRE_TARGETS";

/// Discovery or requirement failures.
#[derive(Debug, Error)]
pub enum RegistryError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("unknown target `{name}` (known: {known})")]
    Unknown { name: String, known: String },
    #[error("{path}: a worker target may not be called `reference` (the built-in target)")]
    ReservedName { path: PathBuf },
    #[error("required target `{name}` ({REQUIRE_ENV}) does not exist (known: {known})")]
    RequiredMissing { name: String, known: String },
    #[error("required target `{name}` ({REQUIRE_ENV}) is unavailable: {reason}")]
    RequiredUnavailable { name: String, reason: String },
}

/// The directories under `<repo>/targets` holding a `target.toml`, sorted by name.
pub fn worker_dirs(repo: &Path) -> Result<Vec<PathBuf>, RegistryError> {
    let root = repo.join("targets");
    let entries = std::fs::read_dir(&root).map_err(|source| RegistryError::Io {
        path: root.clone(),
        source,
    })?;
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| RegistryError::Io {
            path: root.clone(),
            source,
        })?;
        let dir = entry.path();
        if dir.join("target.toml").is_file() {
            dirs.push(dir);
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// Every target name known in `repo`: `reference` first, then each worker directory's name
/// in order (an unreadable `targets/` lists the reference alone).
pub fn known(repo: &Path) -> Vec<String> {
    let mut names = vec![crate::REFERENCE_TARGET.to_string()];
    if let Ok(dirs) = worker_dirs(repo) {
        names.extend(
            dirs.iter()
                .filter_map(|d| d.file_name().and_then(|n| n.to_str()).map(str::to_string)),
        );
    }
    names
}

/// Opens the named targets of `repo`, in the order given: `reference` in-process, a worker
/// of `targets/<name>/` by its name, or a worker directory given by its path (a name with a
/// `/` whose directory holds a `target.toml`: a contributed worker outside `targets/`, the
/// nightly gate's control). A broken `target.toml` is an error naming the file and field;
/// workers are not started here ([`Target::availability`] does that).
pub fn open(
    repo: &Path,
    names: &[String],
    threads: Threads,
) -> Result<Vec<Box<dyn Target>>, RegistryError> {
    let all = known(repo);
    let mut out: Vec<Box<dyn Target>> = Vec::new();
    for name in names {
        let by_path = Path::new(name);
        if !all.contains(name) && name.contains('/') && by_path.join("target.toml").is_file() {
            out.push(Box::new(WorkerTarget::from_dir(repo, by_path)?));
        } else if !all.contains(name) {
            return Err(RegistryError::Unknown {
                name: name.clone(),
                known: all.join(", "),
            });
        } else if name == crate::REFERENCE_TARGET {
            out.push(Box::new(ReferenceTarget::new(threads)));
        } else {
            let dir = repo.join("targets").join(name);
            out.push(Box::new(WorkerTarget::from_dir(repo, &dir)?));
        }
    }
    Ok(out)
}

/// Every target: `reference` first, then the workers in name order ([`open`] of [`known`]). A
/// broken `target.toml` is an error (naming the file and field), never a silently missing
/// target; a worker directory named `reference` is refused.
pub fn discover(repo: &Path, threads: Threads) -> Result<Vec<Box<dyn Target>>, RegistryError> {
    if let Some(dir) = worker_dirs(repo)?
        .into_iter()
        .find(|d| d.file_name().is_some_and(|n| n == crate::REFERENCE_TARGET))
    {
        return Err(RegistryError::ReservedName {
            path: dir.join("target.toml"),
        });
    }
    open(repo, &known(repo), threads)
}

/// One line for `conform targets`: `name: available: description (versions)` or
/// `name: unavailable: reason` (this starts a worker's handshake).
pub fn status_line(target: &mut dyn Target) -> String {
    let a = target.availability();
    format!("{}: {a}", target.name())
}

/// The required target names: `$CONFORM_REQUIRE_TARGETS`, comma- or space-separated.
pub fn required_targets() -> BTreeSet<String> {
    parse_required(&std::env::var(REQUIRE_ENV).unwrap_or_default())
}

/// Parses a required-target list.
pub fn parse_required(s: &str) -> BTreeSet<String> {
    s.split([',', ' '])
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(String::from)
        .collect()
}

/// Checks that every required target exists and is available (this starts the workers'
/// handshakes). Returns every failure, so one run reports all of them.
pub fn check_required(
    targets: &mut [Box<dyn Target>],
    required: &BTreeSet<String>,
) -> Vec<RegistryError> {
    let known: Vec<String> = targets.iter().map(|t| t.name().to_string()).collect();
    let mut errors = Vec::new();
    for name in required {
        match targets.iter_mut().find(|t| t.name() == name) {
            None => errors.push(RegistryError::RequiredMissing {
                name: name.clone(),
                known: known.join(", "),
            }),
            Some(t) => {
                if let Availability::Unavailable { reason } = t.availability() {
                    errors.push(RegistryError::RequiredUnavailable {
                        name: name.clone(),
                        reason,
                    });
                }
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_by_name_or_by_path_and_names_the_known_ones_otherwise() {
        let repo = tempfile::tempdir().unwrap();
        for name in ["b_worker", "a_worker"] {
            let d = repo.path().join("targets").join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("target.toml"), "command = \"false\"\n").unwrap();
        }
        let outside = repo.path().join("contrib/mine");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("target.toml"), "command = \"false\"\n").unwrap();
        let names = [
            "b_worker".to_string(),
            outside.display().to_string(),
            "reference".to_string(),
        ];
        let t = open(repo.path(), &names, Threads::ONE).unwrap();
        let got: Vec<&str> = t.iter().map(|t| t.name()).collect();
        assert_eq!(got, ["b_worker", "mine", "reference"]);
        let e = open(repo.path(), &["nope".to_string()], Threads::ONE)
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            "unknown target `nope` (known: reference, a_worker, b_worker)"
        );
    }

    #[test]
    fn discovers_reference_and_workers_in_order() {
        let repo = tempfile::tempdir().unwrap();
        for name in ["zeta", "alpha"] {
            let d = repo.path().join("targets").join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("target.toml"), "command = \"false\"\n").unwrap();
        }
        std::fs::create_dir_all(repo.path().join("targets/python")).unwrap();
        let mut t = discover(repo.path(), Threads::ONE).unwrap();
        let names: Vec<&str> = t.iter().map(|t| t.name()).collect();
        assert_eq!(names, vec!["reference", "alpha", "zeta"]);
        assert!(status_line(t[0].as_mut()).starts_with("reference: available: "));
        let line = status_line(t[1].as_mut());
        assert!(line.starts_with("alpha: unavailable: "), "{line}");
        let req = parse_required("alpha, reference,missing");
        let errs = check_required(&mut t, &req);
        let msgs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(msgs
            .iter()
            .any(|m| m.contains("`alpha`") && m.contains("unavailable")));
        assert!(msgs
            .iter()
            .any(|m| m.contains("`missing`") && m.contains("does not exist")));
    }

    #[test]
    fn broken_config_and_reserved_name_are_errors() {
        let repo = tempfile::tempdir().unwrap();
        let d = repo.path().join("targets/bad");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("target.toml"), "command = 1\n").unwrap();
        let e = discover(repo.path(), Threads::ONE).err().unwrap();
        assert!(e.to_string().contains("bad/target.toml"), "{e}");
        std::fs::write(d.join("target.toml"), "command = \"x\"\n").unwrap();
        let r = repo.path().join("targets/reference");
        std::fs::create_dir_all(&r).unwrap();
        std::fs::write(r.join("target.toml"), "command = \"x\"\n").unwrap();
        let e = discover(repo.path(), Threads::ONE).err().unwrap();
        assert!(matches!(e, RegistryError::ReservedName { .. }), "{e}");
    }
}
