//! `conform golden bless` and `conform golden accept`: the only way golden data changes.
//!
//! Bless recomputes the selected cases and writes what changed NEXT TO the old data
//! (`<file>.safetensors.new`, `MANIFEST.toml.new`), printing a review; it refuses to run when
//! `CI` is set. Accept moves the `.new` files into place case by case (`super::review`), removing
//! files of cases that no longer exist.

use super::diff::describe_change;
use super::error::GoldenError;
use super::format::{definition_digest, golden_metadata, golden_tensors};
use super::manifest::manifest_path;
use super::manifest::{tensor_digest, Manifest, ManifestEntry, MANIFEST_FORMAT};
use crate::case_data::{generate_inputs, reference_outputs};
use crate::suite::{Case, Tier};
use conform_reference::ops::TensorMap;
use conform_reference::parallel::Threads;
use conform_targets::tensor_file;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What bless found for one case.
#[derive(Clone, Debug, PartialEq)]
pub enum BlessChange {
    New,
    Changed(Vec<String>),
    Unchanged,
    Removed,
}

/// The review bless prints.
#[derive(Clone, Debug, Default)]
pub struct BlessReview {
    pub changes: Vec<(String, BlessChange)>,
    /// Files written (`.new`).
    pub written: Vec<PathBuf>,
}

impl BlessReview {
    pub fn changed_count(&self) -> usize {
        self.changes
            .iter()
            .filter(|(_, c)| *c != BlessChange::Unchanged)
            .count()
    }
}

pub(crate) fn new_path(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".new");
    PathBuf::from(s)
}

/// Recomputes `cases` and stages every change as `.new` files. Manifest entries of cases that
/// no longer exist in the suites (`all_ids`) are dropped; entries of existing but unselected
/// cases are kept as they are.
pub fn bless(
    golden: &Path,
    cases: &[&Case],
    all_ids: &BTreeSet<&str>,
    threads: Threads,
) -> Result<BlessReview, GoldenError> {
    if std::env::var_os("CI").is_some() {
        return Err(GoldenError::BlessOnCi);
    }
    std::fs::create_dir_all(golden).map_err(|source| GoldenError::Io {
        path: golden.to_path_buf(),
        source,
    })?;
    let old = Manifest::read(&manifest_path(golden), true)?;
    // What an earlier bless staged and nobody accepted yet: its entries of the cases this bless
    // does not recompute are carried into the new staged manifest, so a second bless of other
    // cases never drops them (their `.new` tensor files stay where they are).
    let earlier = Manifest::read(&new_path(&manifest_path(golden)), true)?;
    let mut new = Manifest {
        format: MANIFEST_FORMAT,
        cases: Vec::new(),
    };
    let mut review = BlessReview::default();
    let selected: BTreeSet<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    for e in &old.cases {
        if !all_ids.contains(e.id.as_str()) {
            review.changes.push((e.id.clone(), BlessChange::Removed));
        } else if !selected.contains(e.id.as_str()) {
            new.cases.push(earlier.get(&e.id).unwrap_or(e).clone());
        }
    }
    for e in &earlier.cases {
        let id = e.id.as_str();
        if old.get(id).is_none() && all_ids.contains(id) && !selected.contains(id) {
            new.cases.push(e.clone());
        }
    }
    for case in cases {
        let inputs = generate_inputs(case, case.seed)?;
        let outputs = reference_outputs(case, &case.recipe, &inputs, threads)?;
        let tensors = golden_tensors(&inputs, &outputs);
        let digests = tensors
            .iter()
            .map(|(k, t)| (k.clone(), tensor_digest(t)))
            .collect();
        let file = (case.tier == Tier::Quick)
            .then(|| case.golden_relpath().to_string_lossy().replace('\\', "/"));
        let entry = ManifestEntry {
            id: case.id.clone(),
            tier: case.tier,
            file: file.clone(),
            definition: definition_digest(case),
            tensors: digests,
        };
        let change = match old.get(&case.id) {
            None => BlessChange::New,
            Some(prev) if prev == &entry => BlessChange::Unchanged,
            Some(prev) => {
                BlessChange::Changed(change_details(golden, prev, &entry, Some(&tensors)))
            }
        };
        if (change != BlessChange::Unchanged
            || (file.is_some() && !golden.join(file.as_deref().unwrap_or_default()).exists()))
            && let Some(f) = &file
        {
            let path = golden.join(f);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|source| GoldenError::Io {
                    path: dir.to_path_buf(),
                    source,
                })?;
            }
            let staged = new_path(&path);
            tensor_file::write(&staged, &tensors, &golden_metadata(case))?;
            review.written.push(staged);
        }
        review.changes.push((case.id.clone(), change));
        new.cases.push(entry);
    }
    if review.changed_count() > 0 || !review.written.is_empty() {
        let staged = new_path(&manifest_path(golden));
        std::fs::write(&staged, new.to_toml()).map_err(|source| GoldenError::Io {
            path: staged.clone(),
            source,
        })?;
        review.written.push(staged);
    }
    Ok(review)
}

/// What changed between the stored entry `prev` and the new `entry` of one case: the
/// definition, and each tensor whose digest changed with the size of the change (when both
/// versions' tensors are at hand: the stored file under `golden`, and `fresh`). Bless prints
/// it; `golden review` shows it again for a staged case (`fresh` read from its `.new` file).
pub fn change_details(
    golden: &Path,
    prev: &ManifestEntry,
    entry: &ManifestEntry,
    fresh: Option<&TensorMap>,
) -> Vec<String> {
    let stored = prev.file.as_ref().and_then(|f| {
        tensor_file::read(&golden.join(f), crate::input_file::Limit::GOLDEN_TENSORS).ok()
    });
    let mut what = Vec::new();
    if prev.definition != entry.definition {
        what.push("definition changed".to_string());
    }
    for name in entry.tensors.keys() {
        if prev.tensors.get(name) != entry.tensors.get(name) {
            let old = stored.as_ref().and_then(|s| s.tensors.get(name));
            let new = fresh.and_then(|f| f.get(name));
            let detail = match (old, new) {
                (Some(o), Some(t)) => describe_change(o, t),
                _ => "new or changed digest".into(),
            };
            what.push(format!("{name}: {detail}"));
        }
    }
    what
}

pub(crate) fn staged_files(golden: &Path) -> Result<Vec<PathBuf>, GoldenError> {
    let mut out = Vec::new();
    let mut stack = vec![golden.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let rd = std::fs::read_dir(&dir).map_err(|source| GoldenError::Io {
            path: dir.clone(),
            source,
        })?;
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(".safetensors.new") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

pub(crate) fn prune_empty_dirs(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                prune_empty_dirs(&p);
                let _ = std::fs::remove_dir(&p); // fails (harmlessly) unless empty
            }
        }
    }
}
