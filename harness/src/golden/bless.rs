//! `conform golden bless` and `conform golden accept`: the only way golden data changes.
//!
//! Bless recomputes the selected cases and writes what changed NEXT TO the old data
//! (`<file>.safetensors.new`, `MANIFEST.toml.new`), printing a review; it refuses to run when
//! `CI` is set. Accept moves the `.new` files into place (data files first, each by an atomic
//! rename, the manifest last), removing files of cases that no longer exist.

use super::compute::{
    definition_digest, generate_inputs, golden_metadata, golden_tensors, reference_outputs,
};
use super::diff::describe_change;
use super::error::GoldenError;
use super::manifest::{tensor_digest, Manifest, ManifestEntry, MANIFEST_FORMAT};
use super::verify::{golden_files, manifest_path};
use crate::suite::{Case, Tier};
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

fn new_path(p: &Path) -> PathBuf {
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
                let stored = prev
                    .file
                    .as_ref()
                    .and_then(|f| tensor_file::read(&golden.join(f)).ok());
                let mut what = Vec::new();
                if prev.definition != entry.definition {
                    what.push("definition changed".to_string());
                }
                for (name, t) in &tensors {
                    if prev.tensors.get(name) != entry.tensors.get(name) {
                        let detail = stored
                            .as_ref()
                            .and_then(|s| s.tensors.get(name))
                            .map(|o| describe_change(o, t))
                            .unwrap_or_else(|| "new or changed digest".into());
                        what.push(format!("{name}: {detail}"));
                    }
                }
                BlessChange::Changed(what)
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

/// What accept did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Accepted {
    /// Files moved into the store (the manifest last).
    pub moved: Vec<PathBuf>,
    /// Files of cases that no longer exist, removed.
    pub removed: Vec<PathBuf>,
}

/// Moves staged `.new` files into place; `Ok(None)` when nothing is staged. Every staged
/// entry must still describe its case in `cases` (the suites now): a bless followed by a
/// change to the suite would otherwise put data into the store that no case produces.
pub fn accept(golden: &Path, cases: &[Case]) -> Result<Option<Accepted>, GoldenError> {
    let manifest = manifest_path(golden);
    let staged_manifest = new_path(&manifest);
    if !staged_manifest.exists() {
        return Ok(None);
    }
    let new = Manifest::read(&staged_manifest, false)?;
    let stale: Vec<String> = new
        .cases
        .iter()
        .filter(|e| {
            !cases
                .iter()
                .any(|c| c.id == e.id && c.tier == e.tier && definition_digest(c) == e.definition)
        })
        .map(|e| e.id.clone())
        .collect();
    if !stale.is_empty() {
        return Err(GoldenError::StagedStale { ids: stale });
    }
    let listed: BTreeSet<PathBuf> = new
        .cases
        .iter()
        .filter_map(|e| e.file.as_ref().map(|f| golden.join(f)))
        .collect();
    // Every staged data file must belong to the staged manifest; otherwise accept nothing.
    let staged = staged_files(golden)?;
    for s in &staged {
        let target = s.with_extension("");
        if !listed.contains(&target) {
            return Err(GoldenError::Manifest {
                path: staged_manifest.clone(),
                message: format!(
                    "staged file {} is not listed in it; run `conform golden bless` again",
                    s.display()
                ),
            });
        }
    }
    for path in &listed {
        if !path.exists() && !new_path(path).exists() {
            return Err(GoldenError::Manifest {
                path: staged_manifest.clone(),
                message: format!(
                    "lists {} but neither it nor a staged .new exists",
                    path.display()
                ),
            });
        }
    }
    let mut moved = Vec::new();
    for s in staged {
        let target = s.with_extension("");
        std::fs::rename(&s, &target).map_err(|source| GoldenError::Io {
            path: s.clone(),
            source,
        })?;
        moved.push(target);
    }
    let mut removed = Vec::new();
    for f in golden_files(golden)? {
        if !listed.contains(&f) {
            std::fs::remove_file(&f).map_err(|source| GoldenError::Io {
                path: f.clone(),
                source,
            })?;
            removed.push(f);
        }
    }
    std::fs::rename(&staged_manifest, &manifest).map_err(|source| GoldenError::Io {
        path: staged_manifest.clone(),
        source,
    })?;
    moved.push(manifest);
    prune_empty_dirs(golden);
    Ok(Some(Accepted { moved, removed }))
}

fn staged_files(golden: &Path) -> Result<Vec<PathBuf>, GoldenError> {
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

fn prune_empty_dirs(dir: &Path) {
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
