//! `conform golden verify`: recompute every golden tensor with the reference and compare.
//!
//! Store problems (a corrupt, truncated, unlisted or missing file; a file that disagrees with
//! its manifest digests) are errors: exit code 2, naming the file. A recomputed tensor that
//! differs from the blessed one is drift: exit code 1, naming the case and the size of the
//! change. This is what proves the reference gives the same bits on a new machine.

use super::diff::describe_change;
use super::error::GoldenError;
use super::format::{definition_digest, golden_tensors};
use super::manifest::{manifest_path, tensor_digest, Manifest};
use crate::case_data::{generate_inputs, reference_outputs};
use crate::suite::{Case, Tier};
use conform_reference::parallel::Threads;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// One problem found by verification.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// The case id (or file, for unlisted files).
    pub subject: String,
    pub message: String,
}

/// The outcome of a verification.
#[derive(Clone, Debug, Default)]
pub struct VerifyReport {
    pub checked: usize,
    /// Recomputed output or input differs from the blessed one (exit 1).
    pub drift: Vec<Finding>,
    /// The store is damaged or incomplete (exit 2).
    pub errors: Vec<Finding>,
}

impl VerifyReport {
    pub fn exit_code(&self) -> i32 {
        if !self.errors.is_empty() {
            crate::exit_code::USAGE
        } else if !self.drift.is_empty() {
            crate::exit_code::FAILURE
        } else {
            crate::exit_code::SUCCESS
        }
    }
}

/// Verifies `cases` against the store at `golden`, and the store as a whole: entries naming no
/// case of the suites (`all_ids`) and files the manifest does not list are errors.
pub fn verify(
    golden: &Path,
    cases: &[&Case],
    all_ids: &BTreeSet<&str>,
    threads: Threads,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<VerifyReport, GoldenError> {
    let manifest = Manifest::read(&manifest_path(golden), false)?;
    let mut report = VerifyReport::default();
    for case in cases {
        report.checked += 1;
        progress(report.checked, cases.len(), &case.id);
        let err = |message: String| Finding {
            subject: case.id.clone(),
            message,
        };
        let Some(entry) = manifest.get(&case.id) else {
            report.errors.push(err(
                "no golden entry in MANIFEST.toml; run `conform golden bless` and review".into(),
            ));
            continue;
        };
        if entry.tier != case.tier {
            report.drift.push(err(format!(
                "tier changed ({} -> {}); re-bless",
                entry.tier.name(),
                case.tier.name()
            )));
            continue;
        }
        if entry.definition != definition_digest(case) {
            report.drift.push(err("the case definition (params, recipe, generator or seed) changed since it was blessed; re-bless".into()));
            continue;
        }
        // Stored tensors (quick tier): the file must parse and agree with the manifest.
        let stored = if case.tier == Tier::Quick {
            match super::store::read_checked(golden, entry) {
                Ok(t) => Some(t),
                Err(e) => {
                    report.errors.push(err(e.to_string()));
                    continue;
                }
            }
        } else {
            None
        };
        // Recompute.
        let fresh = match generate_inputs(case, case.seed).and_then(|inputs| {
            reference_outputs(case, &case.recipe, &inputs, threads)
                .map(|o| golden_tensors(&inputs, &o))
        }) {
            Ok(t) => t,
            Err(e) => {
                report.drift.push(err(format!("recomputing failed: {e}")));
                continue;
            }
        };
        let mut changes = Vec::new();
        for (name, digest) in &entry.tensors {
            match fresh.get(name) {
                None => changes.push(format!("{name}: no longer produced")),
                Some(t) if &tensor_digest(t) != digest => {
                    let what = stored
                        .as_ref()
                        .and_then(|s| s.get(name))
                        .map(|old| describe_change(old, t));
                    changes.push(format!(
                        "{name}: {}",
                        what.unwrap_or_else(|| "digest differs".into())
                    ));
                }
                Some(_) => {}
            }
        }
        for name in fresh.keys().filter(|k| !entry.tensors.contains_key(*k)) {
            changes.push(format!("{name}: newly produced"));
        }
        if !changes.is_empty() {
            report.drift.push(err(format!(
                "recomputed tensors differ from golden: {}",
                changes.join("; ")
            )));
        }
    }
    {
        for e in &manifest.cases {
            if !all_ids.contains(e.id.as_str()) {
                report.errors.push(Finding {
                    subject: e.id.clone(),
                    message: "stale manifest entry: no such case in the suites; run `conform golden bless` to drop it".into(),
                });
            }
        }
        let listed: BTreeSet<PathBuf> = manifest
            .cases
            .iter()
            .filter_map(|e| e.file.as_ref().map(|f| golden.join(f)))
            .collect();
        for path in golden_files(golden)? {
            if !listed.contains(&path) {
                report.errors.push(Finding {
                    subject: path.display().to_string(),
                    message: "unlisted file in the golden store (not in MANIFEST.toml)".into(),
                });
            }
        }
    }
    Ok(report)
}

/// Every `*.safetensors` file under `golden`.
pub fn golden_files(golden: &Path) -> Result<Vec<PathBuf>, GoldenError> {
    let mut out = Vec::new();
    let mut stack = vec![golden.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let rd = std::fs::read_dir(&dir).map_err(|source| GoldenError::Io {
            path: dir.clone(),
            source,
        })?;
        for e in rd {
            let p = e
                .map_err(|source| GoldenError::Io {
                    path: dir.clone(),
                    source,
                })?
                .path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "safetensors") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}
