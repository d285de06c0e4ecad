//! `golden/MANIFEST.toml`: one entry per blessed case with the BLAKE3 digest of every tensor.
//! Quick-tier entries also name their safetensors file; full-tier entries are digests only.

use super::error::GoldenError;
use crate::suite::Tier;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the manifest of a golden directory lives.
pub fn manifest_path(golden: &Path) -> PathBuf {
    golden.join("MANIFEST.toml")
}

/// The manifest's format version.
pub const MANIFEST_FORMAT: u32 = 1;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: u32,
    #[serde(default, rename = "case")]
    pub cases: Vec<ManifestEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEntry {
    pub id: String,
    pub tier: Tier,
    /// Path of the safetensors file relative to `golden/` (quick tier only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Digest of the case definition (op, params, recipe, generator, seed): a change means the
    /// suite changed and the case must be re-blessed.
    pub definition: String,
    /// BLAKE3 of each tensor (`in.<name>`, `out.<name>`): dtype, shape and bytes.
    pub tensors: BTreeMap<String, String>,
}

impl Manifest {
    /// Reads a manifest; a missing file is an empty manifest only if `allow_missing`.
    pub fn read(path: &Path, allow_missing: bool) -> Result<Manifest, GoldenError> {
        let text =
            match crate::input_file::read_text(path, crate::input_file::Limit::GOLDEN_MANIFEST) {
                Ok(t) => t,
                Err(e) if allow_missing && e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(Manifest {
                        format: MANIFEST_FORMAT,
                        cases: Vec::new(),
                    })
                }
                Err(source) => {
                    return Err(GoldenError::Io {
                        path: path.to_path_buf(),
                        source,
                    })
                }
            };
        let m: Manifest = toml::from_str(&text).map_err(|e| GoldenError::Manifest {
            path: path.to_path_buf(),
            message: e.to_string().replace('\n', " "),
        })?;
        if m.format != MANIFEST_FORMAT {
            return Err(GoldenError::Manifest {
                path: path.to_path_buf(),
                message: format!("format {} is not the supported {MANIFEST_FORMAT}", m.format),
            });
        }
        Ok(m)
    }

    /// Serialises with a header comment, entries sorted by id.
    pub fn to_toml(&self) -> String {
        let mut sorted = self.clone();
        sorted.cases.sort_by(|a, b| a.id.cmp(&b.id));
        let body = toml::to_string(&sorted).expect("manifest serialises");
        format!(
            "# conform golden manifest: written by `conform golden bless`, moved in by `conform golden accept`.\n\
             # Do not edit by hand; `conform golden verify` checks every entry.\n{body}"
        )
    }

    pub fn get(&self, id: &str) -> Option<&ManifestEntry> {
        self.cases.iter().find(|e| e.id == id)
    }
}

/// The digest of one tensor: BLAKE3 over its dtype name, shape and bytes.
pub fn tensor_digest(t: &conform_reference::ops::Tensor) -> String {
    let mut h = blake3::Hasher::new();
    h.update(t.dtype.name().as_bytes());
    h.update(b"\0");
    for d in &t.shape {
        h.update(&(*d as u64).to_le_bytes());
    }
    h.update(b"\0");
    h.update(&t.data);
    h.finalize().to_hex().to_string()
}
