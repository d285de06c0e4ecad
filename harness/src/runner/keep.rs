//! `conform run --keep-outputs DIR`: the tensors of every executed input set, kept on disk so a
//! failure can be inspected (or replayed in another tool) without re-running the target.
//!
//! Layout: `DIR/<case id, '/' as subdirectories>/<target>/set<N>/` holds `inputs.safetensors`
//! (what the target was sent), `outputs.safetensors` (what it returned; absent when it errored,
//! timed out or crashed), `expected.safetensors` (the reference's outputs with the case's
//! recipe) and `oracle.safetensors` (the exact oracle, when the checks computed it). Every file
//! carries the case id, target, input set, seed and recipe in its `__metadata__`.
//! `DIR/index.json` lists the entries written by the run, rewritten after every trial so an
//! interrupted run leaves a valid index.

use super::expected::Expectation;
use crate::results::CaseResult;
use crate::suite::Case;
use conform_reference::ops::{TensorMap, ORACLE};
use conform_targets::tensor_file::{self, Metadata, TensorFileError};
use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use thiserror::Error;

/// The index file of a keep-outputs directory (also what marks a directory as one).
pub const INDEX_FILE: &str = "index.json";
/// The format version of `index.json`.
pub const INDEX_SCHEMA_VERSION: u32 = 1;

/// Why a keep-outputs directory cannot be used or a file in it cannot be written.
#[derive(Debug, Error)]
pub enum KeepError {
    #[error("{path}: exists and is not a directory (--keep-outputs needs a directory)")]
    NotADirectory { path: PathBuf },
    #[error("{path}: directory is not empty and holds no {INDEX_FILE} of an earlier --keep-outputs run; refusing to write into it (name a new or empty directory)")]
    NotEmpty { path: PathBuf },
    #[error("{path}: cannot create the --keep-outputs directory: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a --keep-outputs index: {message}")]
    BadIndex { path: PathBuf, message: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] TensorFileError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> KeepError + '_ {
    move |source| KeepError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One written input set, as `index.json` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// The case id.
    pub id: String,
    pub target: String,
    /// The input set (0 is the case's seed; worker targets run more).
    pub set: u32,
    /// The seed this input set was generated from.
    pub seed: u64,
    /// The trial's final status (`passed`, `failed`, ... as in the results file), or
    /// `unfinished` when the run was interrupted during the trial.
    pub status: String,
    /// The entry's directory, relative to the keep-outputs directory, `/`-separated.
    pub path: String,
    /// The files written there.
    pub files: Vec<String>,
    /// What could not be written, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The contents of `index.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Index {
    pub schema_version: u32,
    pub conform_version: String,
    pub entries: Vec<IndexEntry>,
}

/// The input set of one trial written to disk (its index entry before the trial's status is
/// known).
#[derive(Debug)]
pub struct KeptSet {
    pub set: u32,
    pub seed: u64,
    pub path: String,
    pub files: Vec<String>,
    pub error: Option<KeepError>,
}

/// What one input set of a trial produced, to be kept.
pub struct SetRecord<'a> {
    pub case: &'a Case,
    pub target: &'a str,
    pub set: u32,
    /// The recipe the target was asked to emulate (`None`: its own).
    pub requested_recipe: Option<&'a str>,
    pub expectation: &'a Expectation,
    /// The target's outputs; `None` when it returned none (error, timeout, crash).
    pub outputs: Option<&'a TensorMap>,
}

/// Checks, before any case runs, that `dir` can be a keep-outputs directory: a new directory
/// under a path that can be created, an empty directory, or the directory of an earlier
/// `--keep-outputs` run (it holds a readable `index.json`). Creates it when missing.
pub fn check_dir(dir: &Path) -> Result<(), KeepError> {
    if dir.exists() {
        if !dir.is_dir() {
            return Err(KeepError::NotADirectory {
                path: dir.to_path_buf(),
            });
        }
        let index = dir.join(INDEX_FILE);
        if index.exists() {
            read_index(&index)?;
        } else if std::fs::read_dir(dir).map_err(io(dir))?.next().is_some() {
            return Err(KeepError::NotEmpty {
                path: dir.to_path_buf(),
            });
        }
    } else {
        std::fs::create_dir_all(dir).map_err(|source| KeepError::Create {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    tempfile::Builder::new()
        .prefix(".conform-probe-")
        .tempfile_in(dir)
        .map(drop)
        .map_err(io(dir))
}

fn read_index(path: &Path) -> Result<Index, KeepError> {
    let text =
        crate::input_file::read_text(path, crate::input_file::Limit::RESULTS).map_err(io(path))?;
    serde_json::from_str(&text).map_err(|e| KeepError::BadIndex {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// A path component made of `s` that stays one component inside the directory.
fn component(s: &str) -> String {
    let mut c: String = s
        .chars()
        .map(|ch| {
            if ch == '\\' || ch == ':' || ch.is_control() {
                '_'
            } else {
                ch
            }
        })
        .collect();
    if c.is_empty() || c == "." || c == ".." {
        c.insert(0, '_');
    }
    c
}

/// The relative directory of (case id, target, input set): `<id parts>/<target>/set<N>`.
pub fn entry_path(case_id: &str, target: &str, set: u32) -> String {
    let mut parts: Vec<String> = case_id.split('/').map(component).collect();
    parts.push(component(target));
    parts.push(format!("set{set}"));
    parts.join("/")
}

/// Whether `rel` (from an old index) is a plain relative path inside the directory.
fn is_inside(rel: &Path) -> bool {
    rel.components().all(|c| matches!(c, Component::Normal(_))) && rel.components().count() > 0
}

/// The keep-outputs directory of a run: writes the files of each input set and keeps
/// `index.json` current.
#[derive(Debug)]
pub struct KeepOutputs {
    pub dir: PathBuf,
    entries: Mutex<Vec<IndexEntry>>,
}

impl KeepOutputs {
    /// Opens `dir` (see [`check_dir`]) for a new run: the entries an earlier run listed in its
    /// `index.json` are removed, and an empty index is written.
    pub fn open(dir: &Path) -> Result<KeepOutputs, KeepError> {
        check_dir(dir)?;
        let index = dir.join(INDEX_FILE);
        if index.exists() {
            for e in read_index(&index)?.entries {
                let rel = Path::new(&e.path);
                if is_inside(rel) {
                    remove_entry(dir, rel)?;
                }
            }
        }
        let keep = KeepOutputs {
            dir: dir.to_path_buf(),
            entries: Mutex::new(Vec::new()),
        };
        keep.write_index(&[])?;
        Ok(keep)
    }

    /// Writes the files of one input set into its (emptied) entry directory.
    pub fn write_set(&self, r: &SetRecord<'_>) -> KeptSet {
        let rel = entry_path(&r.case.id, r.target, r.set);
        let mut kept = KeptSet {
            set: r.set,
            seed: r.expectation.seed,
            path: rel.clone(),
            files: Vec::new(),
            error: None,
        };
        if let Err(e) = self.write_files(r, &rel, &mut kept.files) {
            kept.error = Some(e);
        }
        kept
    }

    fn write_files(
        &self,
        r: &SetRecord<'_>,
        rel: &str,
        written: &mut Vec<String>,
    ) -> Result<(), KeepError> {
        let dir = self.dir.join(rel);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
        }
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let exp = r.expectation;
        let mut meta = Metadata::new();
        meta.insert("conform_version".into(), env!("CARGO_PKG_VERSION").into());
        meta.insert("case_id".into(), r.case.id.clone());
        meta.insert("op".into(), r.case.op.clone());
        meta.insert("target".into(), r.target.to_string());
        meta.insert("input_set".into(), r.set.to_string());
        meta.insert("seed".into(), exp.seed.to_string());
        meta.insert("recipe".into(), r.case.recipe.clone());
        meta.insert(
            "requested_recipe".into(),
            r.requested_recipe
                .unwrap_or("(the target's own)")
                .to_string(),
        );
        let mut files: Vec<(&str, &TensorMap, &str)> = vec![("inputs", &exp.inputs, "")];
        if let Some(o) = r.outputs {
            files.push(("outputs", o, ""));
        }
        let source = if exp.from_golden {
            "golden"
        } else {
            "computed"
        };
        files.push(("expected", &exp.expected, source));
        if let Some(o) = &exp.oracle {
            files.push(("oracle", o, "computed"));
        }
        for (role, tensors, source) in files {
            let mut m = meta.clone();
            m.insert("role".into(), role.to_string());
            if role == "oracle" {
                m.insert("recipe".into(), ORACLE.to_string());
            }
            if !source.is_empty() {
                m.insert("source".into(), source.to_string());
            }
            let name = format!("{role}.safetensors");
            tensor_file::write(&dir.join(&name), tensors, &m)?;
            written.push(name);
        }
        Ok(())
    }

    /// Lists a finished trial's input sets in `index.json` with the trial's status. Returns
    /// the error of rewriting the index, if any.
    pub fn record(
        &self,
        result: &CaseResult,
        sets: Vec<KeptSet>,
        unfinished: bool,
    ) -> Option<KeepError> {
        let status = if unfinished {
            "unfinished".to_string()
        } else {
            result.status.name().to_string()
        };
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        for s in sets.into_iter().filter(|s| !s.files.is_empty()) {
            entries.push(IndexEntry {
                id: result.id.clone(),
                target: result.target.clone(),
                set: s.set,
                seed: s.seed,
                status: status.clone(),
                path: s.path,
                files: s.files,
                error: s.error.map(|e| e.to_string()),
            });
        }
        self.write_index(&entries).err()
    }

    /// How many entries this run listed so far.
    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    /// Whether this run listed no entry yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn write_index(&self, entries: &[IndexEntry]) -> Result<(), KeepError> {
        let index = Index {
            schema_version: INDEX_SCHEMA_VERSION,
            conform_version: env!("CARGO_PKG_VERSION").to_string(),
            entries: entries.to_vec(),
        };
        let path = self.dir.join(INDEX_FILE);
        let json = serde_json::to_vec_pretty(&index).map_err(|e| KeepError::Io {
            path: path.clone(),
            source: e.into(),
        })?;
        crate::atomic_file::write(&path, &json).map_err(io(&path))
    }
}

/// Removes an earlier run's entry directory and the parents it leaves empty.
fn remove_entry(dir: &Path, rel: &Path) -> Result<(), KeepError> {
    let full = dir.join(rel);
    if full.is_dir() {
        std::fs::remove_dir_all(&full).map_err(io(&full))?;
    }
    let mut p = full.parent();
    while let Some(parent) = p {
        if parent == dir || !parent.starts_with(dir) {
            break;
        }
        // Only an empty directory is removed; a non-empty one ends the walk.
        if std::fs::remove_dir(parent).is_err() {
            break;
        }
        p = parent.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use conform_reference::ops::Tensor;

    #[test]
    fn entry_paths_keep_the_id_hierarchy_and_stay_inside() {
        assert_eq!(
            entry_path("fp4_dequant/mxfp4/bf16/x", "reference", 1),
            "fp4_dequant/mxfp4/bf16/x/reference/set1"
        );
        let p = entry_path("../a//./b\\c", "..", 0);
        assert!(is_inside(Path::new(&p)), "{p}");
        assert_eq!(p, "_../a/_/_./b_c/_../set0");
    }

    #[test]
    fn bad_directories_are_refused_naming_the_path() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let e = check_dir(&file).unwrap_err();
        assert!(matches!(e, KeepError::NotADirectory { .. }), "{e}");
        assert!(e.to_string().contains(&*file.to_string_lossy()), "{e}");
        let e = check_dir(&file.join("sub")).unwrap_err();
        assert!(matches!(e, KeepError::Create { .. }), "{e}");
        let e = check_dir(d.path()).unwrap_err();
        assert!(matches!(e, KeepError::NotEmpty { .. }), "{e}");
        std::fs::write(d.path().join(INDEX_FILE), b"{not json").unwrap();
        let e = check_dir(d.path()).unwrap_err();
        assert!(matches!(e, KeepError::BadIndex { .. }), "{e}");
        // New (created), empty, and earlier keep-outputs directories are fine.
        let new = d.path().join("a/b");
        check_dir(&new).unwrap();
        assert!(new.is_dir());
        check_dir(&new).unwrap();
        KeepOutputs::open(&new).unwrap();
        check_dir(&new).unwrap();
    }

    fn case() -> Case {
        let cases = crate::suite::select::load_all(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites"),
        )
        .unwrap();
        cases
            .into_iter()
            .find(|c| c.id.ends_with("special-scales"))
            .unwrap()
    }

    #[test]
    fn sets_are_written_with_metadata_and_an_earlier_run_is_replaced() {
        let d = tempfile::tempdir().unwrap();
        let case = case();
        let mut t = TensorMap::new();
        t.insert("x".into(), Tensor::from_f32(vec![2], &[1.0, 2.0]));
        let exp = Expectation {
            seed: 7,
            inputs: t.clone(),
            expected: t.clone(),
            from_golden: false,
            oracle: Some(t.clone()),
        };
        let keep = KeepOutputs::open(d.path()).unwrap();
        // A target that returned nothing: inputs, expected and oracle only.
        let kept = keep.write_set(&SetRecord {
            case: &case,
            target: "w",
            set: 1,
            requested_recipe: None,
            expectation: &exp,
            outputs: None,
        });
        assert!(kept.error.is_none(), "{:?}", kept.error);
        assert_eq!(
            kept.files,
            ["inputs", "expected", "oracle"].map(|f| format!("{f}.safetensors"))
        );
        let dir = d.path().join(&kept.path);
        let o = tensor_file::read(
            &dir.join("oracle.safetensors"),
            crate::input_file::Limit::GOLDEN_TENSORS,
        )
        .unwrap();
        assert_eq!(o.tensors, t);
        assert_eq!(o.metadata["recipe"], ORACLE);
        assert_eq!(o.metadata["case_id"], case.id);
        assert_eq!(o.metadata["input_set"], "1");
        assert_eq!(o.metadata["seed"], "7");
        let mut r = crate::results::CaseResult {
            id: case.id.clone(),
            suite: case.suite.clone(),
            op: case.op.clone(),
            recipe: case.recipe.clone(),
            target: "w".into(),
            status: crate::results::Status::Crashed,
            message: String::new(),
            seed: 7,
            metrics: Default::default(),
            duration_ms: 0.0,
            perf: None,
            notes: Vec::new(),
            nondeterministic: None,
            golden_tensors: None,
            variant: None,
            recipe_set_aside: None,
        };
        assert!(keep.record(&r, vec![kept], false).is_none());
        let index = read_index(&d.path().join(INDEX_FILE)).unwrap();
        assert_eq!(index.entries.len(), 1);
        assert_eq!(index.entries[0].status, "crashed");
        // A new run into the same directory removes the entries the earlier one listed.
        r.status = crate::results::Status::Passed;
        let keep = KeepOutputs::open(d.path()).unwrap();
        assert!(keep.is_empty());
        assert!(!dir.exists());
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only index.json is left");
    }

    #[test]
    fn a_write_failure_is_reported_not_a_panic() {
        let d = tempfile::tempdir().unwrap();
        let case = case();
        let keep = KeepOutputs::open(d.path()).unwrap();
        // A file where the entry's first directory should go.
        let first = case.id.split('/').next().unwrap();
        std::fs::write(d.path().join(first), b"x").unwrap();
        let exp = Expectation {
            seed: 1,
            inputs: TensorMap::new(),
            expected: TensorMap::new(),
            from_golden: true,
            oracle: None,
        };
        let kept = keep.write_set(&SetRecord {
            case: &case,
            target: "reference",
            set: 0,
            requested_recipe: Some("x"),
            expectation: &exp,
            outputs: Some(&TensorMap::new()),
        });
        assert!(kept.files.is_empty());
        let e = kept.error.expect("an error");
        assert!(e.to_string().contains(first), "{e}");
    }
}
