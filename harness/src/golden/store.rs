//! The golden store as a run reads it: `MANIFEST.toml` opened once (missing or malformed is an
//! error before anything runs), and each quick-tier file checked against its manifest digests
//! as it is read. A file whose bytes disagree with the manifest is *store corruption*, named by
//! file and tensor — never mistaken for drift of the reference.

use super::error::GoldenError;
use super::format::definition_digest;
use super::manifest::{tensor_digest, Manifest, ManifestEntry};
use crate::suite::Case;
use conform_reference::ops::TensorMap;
use conform_targets::tensor_file;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// An opened golden store.
#[derive(Clone, Debug)]
pub struct GoldenStore {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

impl GoldenStore {
    /// Opens `dir`: its `MANIFEST.toml` must exist and parse.
    pub fn open(dir: &Path) -> Result<GoldenStore, GoldenError> {
        let manifest = Manifest::read(&super::manifest::manifest_path(dir), false)?;
        Ok(GoldenStore {
            dir: dir.to_path_buf(),
            manifest,
        })
    }

    /// The manifest entry of `case`, which must describe the case as the suites define it now.
    pub fn entry(&self, case: &Case) -> Result<&ManifestEntry, GoldenError> {
        let entry = self
            .manifest
            .get(&case.id)
            .ok_or_else(|| GoldenError::NotInManifest {
                id: case.id.clone(),
            })?;
        if entry.tier != case.tier || entry.definition != definition_digest(case) {
            return Err(GoldenError::Stale {
                id: case.id.clone(),
            });
        }
        Ok(entry)
    }

    /// The stored tensors of a quick-tier case, each checked against its manifest digest.
    pub fn read_case(&self, case: &Case) -> Result<TensorMap, GoldenError> {
        let entry = self.entry(case)?;
        read_checked(&self.dir, entry)
    }
}

/// Reads the file `entry` names under `dir` and checks its tensor names and digests.
pub fn read_checked(dir: &Path, entry: &ManifestEntry) -> Result<TensorMap, GoldenError> {
    let file = entry.file.as_ref().ok_or_else(|| GoldenError::Compute {
        id: entry.id.clone(),
        message: "quick-tier entry names no file".into(),
    })?;
    let path = dir.join(file);
    let tf = tensor_file::read(&path, crate::input_file::Limit::GOLDEN_TENSORS)?;
    let names: BTreeSet<&String> = tf.tensors.keys().collect();
    let listed: BTreeSet<&String> = entry.tensors.keys().collect();
    if names != listed {
        return Err(GoldenError::Corrupt {
            path,
            problem: format!("holds tensors {names:?}, the manifest lists {listed:?}"),
        });
    }
    let bad: Vec<&str> = tf
        .tensors
        .iter()
        .filter(|(k, t)| entry.tensors.get(*k) != Some(&tensor_digest(t)))
        .map(|(k, _)| k.as_str())
        .collect();
    if !bad.is_empty() {
        return Err(GoldenError::Corrupt {
            path,
            problem: format!(
                "tensor(s) {} do not match their MANIFEST.toml digests",
                bad.join(", ")
            ),
        });
    }
    Ok(tf.tensors)
}
