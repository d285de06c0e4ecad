//! `conform golden review` (and the all-at-once `conform golden accept`): the changes
//! `conform golden bless` staged, decided case by case.
//!
//! A *pending* case is one whose entry in the staged `MANIFEST.toml.new` differs from the
//! store's `MANIFEST.toml` (new, changed, or gone from the suites), or whose data file was
//! missing and is staged again. Accepting a case moves its staged `.safetensors.new` into
//! place (after checking it against its staged digests) and then rewrites `MANIFEST.toml` with
//! that one entry changed; rejecting it deletes its staged file after restoring its store
//! entry in `MANIFEST.toml.new`. Each manifest is replaced whole (`crate::atomic_file`), and
//! the order of the steps makes an interrupted decision recoverable: opening the review
//! completes an accept whose data file was already moved and finishes a reject whose staged
//! file was left behind, so a case is never left half-accepted. Once nothing is pending, the
//! staged manifest is removed.

use super::bless::{change_details, new_path, prune_empty_dirs, staged_files, BlessChange};
use super::error::GoldenError;
use super::format::definition_digest;
use super::manifest::manifest_path;
use super::manifest::{Manifest, ManifestEntry};
use super::store::read_checked;
use super::verify::golden_files;
use crate::suite::Case;
use conform_targets::tensor_file;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a review could not be done (exit code 2); nothing is decided when one is returned
/// before the first decision.
#[derive(Debug, Error)]
pub enum ReviewError {
    #[error(transparent)]
    Golden(#[from] GoldenError),
    #[error(
        "refusing to review golden data with CI set: golden files change only through a reviewed `conform golden bless` + `conform golden review` or `accept` on a developer machine"
    )]
    OnCi,
    #[error(
        "`{arg}` matches no pending case (see `conform golden review --list`); nothing was decided"
    )]
    NoMatch { arg: String },
    #[error(
        "`{arg}` is neither a pending case id nor a valid regex: {message}; nothing was decided"
    )]
    BadPattern { arg: String, message: String },
    #[error("case `{id}` is matched by both --accept and --reject; nothing was decided")]
    Both { id: String },
    #[error("golden review: reading the answer or writing the review: {0}")]
    Terminal(#[from] std::io::Error),
}

/// One pending case and what changed, as bless described it (`Unchanged`: the entry is the
/// same but its data file is staged again because the store lacked it).
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    pub id: String,
    pub change: BlessChange,
}

/// What is done with one pending case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Accept,
    Reject,
    Skip,
}

/// The decisions of one review, case ids in the order decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub accepted: Vec<String>,
    pub rejected: Vec<String>,
    pub skipped: Vec<String>,
}

/// The staged changes of a golden store, open for decisions.
#[derive(Debug)]
pub struct Review {
    golden: PathBuf,
    current: Manifest,
    staged: Manifest,
    pending: Vec<Pending>,
    /// Data files moved into the store and files removed from it, for `accept`'s summary.
    moved: Vec<PathBuf>,
    removed: Vec<PathBuf>,
}

/// `entry` with its file name pointing at the staged `.new` file.
fn staged_entry(entry: &ManifestEntry) -> ManifestEntry {
    let mut e = entry.clone();
    e.file = e.file.map(|f| format!("{f}.new"));
    e
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> GoldenError + '_ {
    move |source| GoldenError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn remove_if_present(path: &Path) -> Result<bool, GoldenError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(GoldenError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

impl Review {
    /// Opens the staged changes under `golden`; `Ok(None)` when nothing is staged. Refused
    /// (`StagedStale`) when a staged change no longer matches its case in `cases` (the suites
    /// now), or when a staged file does not belong to the staged manifest.
    pub fn open(golden: &Path, cases: &[Case]) -> Result<Option<Review>, GoldenError> {
        let staged_manifest = new_path(&manifest_path(golden));
        if !staged_manifest.exists() {
            return Ok(None);
        }
        let staged = Manifest::read(&staged_manifest, false)?;
        let current = Manifest::read(&manifest_path(golden), true)?;
        let mut review = Review {
            golden: golden.to_path_buf(),
            current,
            staged,
            pending: Vec::new(),
            moved: Vec::new(),
            removed: Vec::new(),
        };
        review.check(cases, &staged_manifest)?;
        review.recover()?;
        review.pending = review.compute_pending();
        review.finish_if_done()?;
        Ok(Some(review))
    }

    /// The cases still pending, by id.
    pub fn pending(&self) -> &[Pending] {
        &self.pending
    }

    /// The staged manifest holds a change for `e` (it differs from the store, or its data
    /// file is staged again).
    fn is_change(&self, e: &ManifestEntry) -> bool {
        self.current.get(&e.id) != Some(e) || self.staged_file_of(e).is_some_and(|p| p.exists())
    }

    fn staged_file_of(&self, e: &ManifestEntry) -> Option<PathBuf> {
        e.file.as_ref().map(|f| new_path(&self.golden.join(f)))
    }

    fn check(&self, cases: &[Case], staged_manifest: &Path) -> Result<(), GoldenError> {
        let stale: Vec<String> = self
            .staged
            .cases
            .iter()
            .filter(|e| self.is_change(e))
            .filter(|e| {
                !cases.iter().any(|c| {
                    c.id == e.id && c.tier == e.tier && definition_digest(c) == e.definition
                })
            })
            .map(|e| e.id.clone())
            .collect();
        if !stale.is_empty() {
            return Err(GoldenError::StagedStale { ids: stale });
        }
        let listed: BTreeSet<PathBuf> = self
            .staged
            .cases
            .iter()
            .filter_map(|e| e.file.as_ref().map(|f| self.golden.join(f)))
            .collect();
        // Every staged data file must belong to the staged manifest; otherwise decide nothing.
        for s in staged_files(&self.golden)? {
            if !listed.contains(&s.with_extension("")) {
                return Err(GoldenError::Manifest {
                    path: staged_manifest.to_path_buf(),
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
                    path: staged_manifest.to_path_buf(),
                    message: format!(
                        "lists {} but neither it nor a staged .new exists",
                        path.display()
                    ),
                });
            }
        }
        Ok(())
    }

    /// Completes decisions a crash interrupted: an accept whose data file is already in place
    /// (no `.new` left, the store file holds the staged digests) gets its manifest entry; a
    /// reject whose staged entry was already restored loses its leftover `.new` file.
    fn recover(&mut self) -> Result<(), GoldenError> {
        let mut finish_accept = Vec::new();
        for e in &self.staged.cases {
            let Some(staged_file) = self.staged_file_of(e) else {
                continue;
            };
            let changed = self.current.get(&e.id) != Some(e);
            if changed
                && !staged_file.exists()
                && read_checked(&self.golden, e).is_ok()
                && self
                    .current
                    .get(&e.id)
                    .is_none_or(|prev| read_checked(&self.golden, prev).is_err())
            {
                finish_accept.push(e.clone());
            } else if !changed
                && staged_file.exists()
                && read_checked(&self.golden, &staged_entry(e)).is_err()
            {
                remove_if_present(&staged_file)?;
            }
        }
        for e in finish_accept {
            self.set_current(e)?;
        }
        Ok(())
    }

    fn compute_pending(&self) -> Vec<Pending> {
        let mut out = Vec::new();
        for e in &self.staged.cases {
            let change = match self.current.get(&e.id) {
                None => BlessChange::New,
                Some(prev) if prev != e => {
                    let fresh = self
                        .staged_file_of(e)
                        .and_then(|p| {
                            tensor_file::read(&p, crate::input_file::Limit::GOLDEN_TENSORS).ok()
                        })
                        .map(|f| f.tensors);
                    BlessChange::Changed(change_details(&self.golden, prev, e, fresh.as_ref()))
                }
                Some(_) if self.staged_file_of(e).is_some_and(|p| p.exists()) => {
                    BlessChange::Unchanged
                }
                Some(_) => continue,
            };
            out.push(Pending {
                id: e.id.clone(),
                change,
            });
        }
        for e in &self.current.cases {
            if self.staged.get(&e.id).is_none() {
                out.push(Pending {
                    id: e.id.clone(),
                    change: BlessChange::Removed,
                });
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// Decides one pending case (`Skip` leaves it pending).
    pub fn decide(&mut self, id: &str, decision: Decision) -> Result<(), GoldenError> {
        let Some(at) = self.pending.iter().position(|p| p.id == id) else {
            return Ok(());
        };
        match decision {
            Decision::Skip => return Ok(()),
            Decision::Accept => self.accept_case(id)?,
            Decision::Reject => self.reject_case(id)?,
        }
        self.pending.remove(at);
        self.finish_if_done()
    }

    /// Accepts one case: the staged data file (checked against its staged digests) is renamed
    /// into place, then `MANIFEST.toml` is rewritten with the case's staged entry. A removed
    /// case loses its file first, then its entry. `golden accept` runs this for every case.
    fn accept_case(&mut self, id: &str) -> Result<(), GoldenError> {
        let Some(entry) = self.staged.get(id).cloned() else {
            // Gone from the suites: the file first, so a crash leaves the case pending.
            if let Some(f) = self.current.get(id).and_then(|e| e.file.clone()) {
                let path = self.golden.join(f);
                if remove_if_present(&path)? {
                    self.removed.push(path);
                }
            }
            self.current.cases.retain(|e| e.id != id);
            return self.write_current();
        };
        if let Some(f) = &entry.file {
            let target = self.golden.join(f);
            let staged = new_path(&target);
            if staged.exists() {
                read_checked(&self.golden, &staged_entry(&entry))?;
                std::fs::rename(&staged, &target).map_err(io_err(&staged))?;
                self.moved.push(target);
            } else {
                // Moved by an interrupted accept: the store file must hold the staged data.
                read_checked(&self.golden, &entry)?;
            }
        }
        self.set_current(entry)
    }

    /// Rejects one case: `MANIFEST.toml.new` gets the store's entry back (or loses a new
    /// case's entry), then the staged data file is deleted.
    fn reject_case(&mut self, id: &str) -> Result<(), GoldenError> {
        let staged_file = self.staged.get(id).and_then(|e| self.staged_file_of(e));
        self.staged.cases.retain(|e| e.id != id);
        if let Some(prev) = self.current.get(id) {
            self.staged.cases.push(prev.clone());
        }
        self.write_staged()?;
        if let Some(p) = staged_file {
            remove_if_present(&p)?;
        }
        Ok(())
    }

    fn set_current(&mut self, entry: ManifestEntry) -> Result<(), GoldenError> {
        match self.current.cases.iter_mut().find(|e| e.id == entry.id) {
            Some(slot) => *slot = entry,
            None => self.current.cases.push(entry),
        }
        self.write_current()
    }

    fn write_current(&self) -> Result<(), GoldenError> {
        let path = manifest_path(&self.golden);
        crate::atomic_file::write(&path, self.current.to_toml().as_bytes()).map_err(io_err(&path))
    }

    fn write_staged(&self) -> Result<(), GoldenError> {
        let path = new_path(&manifest_path(&self.golden));
        crate::atomic_file::write(&path, self.staged.to_toml().as_bytes()).map_err(io_err(&path))
    }

    /// With nothing pending, the staged manifest says nothing the store does not: remove it.
    fn finish_if_done(&mut self) -> Result<(), GoldenError> {
        if self.pending.is_empty() {
            let staged = new_path(&manifest_path(&self.golden));
            remove_if_present(&staged)?;
            prune_empty_dirs(&self.golden);
        }
        Ok(())
    }

    /// Accepts every pending case (`conform golden accept`), then removes store files that
    /// no manifest entry names (left by cases that no longer exist). Returns the data files
    /// moved in (and `MANIFEST.toml`, last) and the files removed.
    pub fn accept_all(mut self) -> Result<(Vec<PathBuf>, Vec<PathBuf>), GoldenError> {
        let ids: Vec<String> = self.pending.iter().map(|p| p.id.clone()).collect();
        for id in &ids {
            self.decide(id, Decision::Accept)?;
        }
        let listed: BTreeSet<PathBuf> = self
            .current
            .cases
            .iter()
            .filter_map(|e| e.file.as_ref().map(|f| self.golden.join(f)))
            .collect();
        for f in golden_files(&self.golden)? {
            if !listed.contains(&f) {
                std::fs::remove_file(&f).map_err(io_err(&f))?;
                self.removed.push(f);
            }
        }
        self.finish_if_done()?;
        self.moved.push(manifest_path(&self.golden));
        Ok((self.moved, self.removed))
    }

    /// Decides the pending cases matched by `accept` and `reject` (each a case id or a regex
    /// searched in the ids, as `--filter` does); the others stay pending. Every argument must
    /// match a pending case and no case may be matched by both, or nothing is decided.
    pub fn decide_by_patterns(
        &mut self,
        accept: &[String],
        reject: &[String],
    ) -> Result<Tally, ReviewError> {
        let ids: Vec<String> = self.pending.iter().map(|p| p.id.clone()).collect();
        let matched = |args: &[String]| -> Result<BTreeSet<String>, ReviewError> {
            let mut out = BTreeSet::new();
            for arg in args {
                let hits: Vec<&String> = if ids.contains(arg) {
                    ids.iter().filter(|id| *id == arg).collect()
                } else {
                    let re = regex::Regex::new(arg).map_err(|e| ReviewError::BadPattern {
                        arg: arg.clone(),
                        message: e.to_string().replace('\n', " "),
                    })?;
                    ids.iter().filter(|id| re.is_match(id)).collect()
                };
                if hits.is_empty() {
                    return Err(ReviewError::NoMatch { arg: arg.clone() });
                }
                out.extend(hits.into_iter().cloned());
            }
            Ok(out)
        };
        let (acc, rej) = (matched(accept)?, matched(reject)?);
        if let Some(id) = acc.intersection(&rej).next() {
            return Err(ReviewError::Both { id: id.clone() });
        }
        let mut tally = Tally::default();
        for id in ids {
            if acc.contains(&id) {
                self.decide(&id, Decision::Accept)?;
                tally.accepted.push(id);
            } else if rej.contains(&id) {
                self.decide(&id, Decision::Reject)?;
                tally.rejected.push(id);
            } else {
                tally.skipped.push(id);
            }
        }
        Ok(tally)
    }
}

/// What accept did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Accepted {
    /// Files moved into the store (the manifest last).
    pub moved: Vec<PathBuf>,
    /// Files of cases that no longer exist, removed.
    pub removed: Vec<PathBuf>,
}

/// Moves every staged change into place (see [`Review`]: one case at a time, the same
/// steps `conform golden review` takes when a case is accepted); `Ok(None)` when nothing is
/// staged. Every staged change must still describe its case in `cases` (the suites now): a
/// bless followed by a change to the suite would otherwise put data into the store that no
/// case produces.
pub fn accept(golden: &Path, cases: &[Case]) -> Result<Option<Accepted>, GoldenError> {
    let Some(review) = Review::open(golden, cases)? else {
        return Ok(None);
    };
    let (moved, removed) = review.accept_all()?;
    Ok(Some(Accepted { moved, removed }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::golden::manifest::MANIFEST_FORMAT;
    use crate::suite::Tier;

    fn entry(id: &str, digest: &str) -> ManifestEntry {
        ManifestEntry {
            id: id.into(),
            tier: Tier::Full,
            file: None,
            definition: "def".into(),
            tensors: [("out.y".to_string(), digest.to_string())].into(),
        }
    }

    fn manifest(digest: &str) -> Manifest {
        Manifest {
            format: MANIFEST_FORMAT,
            cases: ["s/x1", "s/x2", "s/x3"]
                .iter()
                .map(|id| entry(id, digest))
                .collect(),
        }
    }

    /// A store of three full-tier (digest-only) cases, each with a staged change.
    fn staged_store() -> (tempfile::TempDir, Review) {
        let dir = tempfile::tempdir().unwrap();
        let golden = dir.path().to_path_buf();
        let mut review = Review {
            golden: golden.clone(),
            current: manifest("old"),
            staged: manifest("new"),
            pending: Vec::new(),
            moved: Vec::new(),
            removed: Vec::new(),
        };
        review.write_current().unwrap();
        review.write_staged().unwrap();
        review.pending = review.compute_pending();
        (dir, review)
    }

    fn on_disk(golden: &Path, staged: bool) -> Option<Manifest> {
        let mut p = manifest_path(golden);
        if staged {
            p = new_path(&p);
        }
        p.exists().then(|| Manifest::read(&p, false).unwrap())
    }

    fn digest(m: &Manifest, id: &str) -> String {
        m.get(id).unwrap().tensors["out.y"].clone()
    }

    /// Carries out `decisions` on the pending cases in order (what the CLI's prompt does with
    /// the answers it reads).
    fn run(review: &mut Review, decisions: &[Decision]) {
        let ids: Vec<String> = review.pending().iter().map(|p| p.id.clone()).collect();
        for (id, d) in ids.iter().zip(decisions) {
            review.decide(id, *d).unwrap();
        }
    }

    #[test]
    fn accept_reject_and_skip_each_act_on_their_case_only() {
        let (dir, mut review) = staged_store();
        assert_eq!(review.pending().len(), 3);
        run(
            &mut review,
            &[Decision::Accept, Decision::Reject, Decision::Skip],
        );
        let current = on_disk(dir.path(), false).unwrap();
        let staged = on_disk(dir.path(), true).unwrap();
        assert_eq!(digest(&current, "s/x1"), "new");
        assert_eq!(digest(&current, "s/x2"), "old");
        assert_eq!(digest(&staged, "s/x2"), "old");
        assert_eq!(digest(&current, "s/x3"), "old");
        assert_eq!(digest(&staged, "s/x3"), "new");
        let pending: Vec<&str> = review.pending().iter().map(|p| p.id.as_str()).collect();
        assert_eq!(pending, ["s/x3"]);
    }

    #[test]
    fn accepting_the_last_pending_case_ends_the_staging() {
        let (dir, mut review) = staged_store();
        run(
            &mut review,
            &[Decision::Skip, Decision::Accept, Decision::Accept],
        );
        assert_eq!(review.pending().len(), 1);
        let current = on_disk(dir.path(), false).unwrap();
        assert_eq!(digest(&current, "s/x3"), "new");
        // Accepting the last one removes the staged manifest.
        run(&mut review, &[Decision::Accept]);
        assert!(review.pending().is_empty());
        assert!(on_disk(dir.path(), true).is_none());
    }

    #[test]
    fn rejecting_every_case_leaves_the_store_as_it_was() {
        let (dir, mut review) = staged_store();
        run(&mut review, &[Decision::Reject; 3]);
        assert!(review.pending().is_empty());
        assert!(on_disk(dir.path(), true).is_none());
        assert_eq!(on_disk(dir.path(), false).unwrap(), manifest("old"));
    }

    #[test]
    fn an_undecided_case_stays_pending_and_staged() {
        let (dir, mut review) = staged_store();
        run(&mut review, &[]);
        assert_eq!(review.pending().len(), 3);
        assert_eq!(on_disk(dir.path(), true).unwrap(), manifest("new"));
        run(&mut review, &[Decision::Accept]);
        assert_eq!(review.pending().len(), 2);
        assert_eq!(on_disk(dir.path(), true).unwrap().cases.len(), 3);
    }

    #[test]
    fn patterns_must_each_match_and_not_overlap() {
        let (_dir, mut review) = staged_store();
        let e = review
            .decide_by_patterns(&["s/nope".into()], &[])
            .unwrap_err();
        assert!(
            e.to_string().contains("`s/nope` matches no pending case"),
            "{e}"
        );
        let e = review
            .decide_by_patterns(&["x[12]".into()], &["s/x2".into()])
            .unwrap_err();
        assert!(
            matches!(e, ReviewError::Both { ref id } if id == "s/x2"),
            "{e}"
        );
        assert_eq!(review.pending().len(), 3, "nothing decided");
        let t = review
            .decide_by_patterns(&["x1$".into()], &["s/x2".into()])
            .unwrap();
        assert_eq!(
            (t.accepted, t.rejected, t.skipped),
            (
                vec!["s/x1".to_string()],
                vec!["s/x2".to_string()],
                vec!["s/x3".to_string()]
            )
        );
    }

    /// One quick-tier case `s/q` with data `old` in the store and `new` staged.
    fn quick_store() -> (tempfile::TempDir, Review, [u16; 2]) {
        use conform_reference::ops::{ElemType, Tensor};
        let dir = tempfile::tempdir().unwrap();
        let golden = dir.path().to_path_buf();
        let (old, new) = ([0x3F80u16, 0x4000], [0x3F80u16, 0x4040]);
        let mk = |bits: &[u16], file: &str| {
            let t = Tensor::from_bits16(ElemType::Bf16, vec![2], bits);
            let e = ManifestEntry {
                id: "s/q".into(),
                tier: Tier::Quick,
                file: Some("s/q.safetensors".into()),
                definition: "def".into(),
                tensors: [(
                    "out.y".to_string(),
                    super::super::manifest::tensor_digest(&t),
                )]
                .into(),
            };
            let path = golden.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let map = [("out.y".to_string(), t)].into();
            tensor_file::write(&path, &map, &Default::default()).unwrap();
            e
        };
        let current = Manifest {
            format: MANIFEST_FORMAT,
            cases: vec![mk(&old, "s/q.safetensors")],
        };
        let staged = Manifest {
            format: MANIFEST_FORMAT,
            cases: vec![mk(&new, "s/q.safetensors.new")],
        };
        let review = Review {
            golden,
            current,
            staged,
            pending: Vec::new(),
            moved: Vec::new(),
            removed: Vec::new(),
        };
        review.write_current().unwrap();
        review.write_staged().unwrap();
        (dir, review, new)
    }

    #[test]
    fn an_accept_interrupted_after_moving_the_data_is_completed_on_the_next_open() {
        let (dir, mut review, _) = quick_store();
        review.pending = review.compute_pending();
        assert!(
            matches!(&review.pending[0].change, BlessChange::Changed(w) if w[0].starts_with("out.y: max")),
            "{:?}",
            review.pending
        );
        // The crash: the data file was renamed, MANIFEST.toml not rewritten yet.
        let file = dir.path().join("s/q.safetensors");
        std::fs::rename(new_path(&file), &file).unwrap();
        review.recover().unwrap();
        review.pending = review.compute_pending();
        assert!(review.pending.is_empty(), "{:?}", review.pending);
        let current = on_disk(dir.path(), false).unwrap();
        assert_eq!(current.get("s/q"), review.staged.get("s/q"));
        assert!(read_checked(dir.path(), current.get("s/q").unwrap()).is_ok());
    }

    #[test]
    fn a_reject_interrupted_before_deleting_the_staged_file_is_completed_on_the_next_open() {
        let (dir, mut review, _) = quick_store();
        let file = dir.path().join("s/q.safetensors");
        let kept = std::fs::read(new_path(&file)).unwrap();
        review.pending = review.compute_pending();
        review.decide("s/q", Decision::Reject).unwrap();
        assert!(!new_path(&file).exists());
        // The crash: the staged entry was restored but the staged file is still there.
        std::fs::write(new_path(&file), kept).unwrap();
        review.recover().unwrap();
        assert!(
            !new_path(&file).exists(),
            "the leftover staged file is removed"
        );
        assert!(review.compute_pending().is_empty());
        assert!(read_checked(dir.path(), review.current.get("s/q").unwrap()).is_ok());
    }

    #[test]
    fn accepting_a_quick_case_moves_its_checked_data_and_refuses_altered_staged_data() {
        let (dir, mut review, _) = quick_store();
        let file = dir.path().join("s/q.safetensors");
        let staged_bytes = std::fs::read(new_path(&file)).unwrap();
        // Altered staged bytes do not match the staged digests: nothing moves.
        let mut bad = staged_bytes.clone();
        *bad.last_mut().unwrap() ^= 1;
        std::fs::write(new_path(&file), &bad).unwrap();
        review.pending = review.compute_pending();
        assert!(review.decide("s/q", Decision::Accept).is_err());
        assert!(new_path(&file).exists());
        assert_eq!(on_disk(dir.path(), false).unwrap(), review.current);
        std::fs::write(new_path(&file), &staged_bytes).unwrap();
        review.decide("s/q", Decision::Accept).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), staged_bytes);
        assert!(on_disk(dir.path(), true).is_none(), "nothing left pending");
    }
}
