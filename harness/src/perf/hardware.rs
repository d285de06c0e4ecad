//! Hardware profiles (`ci/hardware/*.toml`): peak compute per dtype and memory bandwidth, with
//! where each figure comes from (a datasheet, or a measurement on the machine itself), and for
//! an NPU its SoC's core counts (`[soc]`, [`super::soc`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::PerfError;
use conform_reference::ops::ElemType;

/// How the figures of a profile were obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProvenanceKind {
    /// Vendor datasheet or product page figures.
    Datasheet,
    /// Computed from vendor configuration parameters (core counts, clocks, unit widths); the
    /// formula is in `method`.
    Derived,
    /// Figures reported by third parties where no vendor datasheet is public.
    Reported,
    /// Measured on the machine (the method is recorded).
    Measured,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    pub kind: ProvenanceKind,
    /// URLs or document names the figures were read from.
    #[serde(default)]
    pub sources: Vec<String>,
    /// How a measured profile was measured (command line), or caveats.
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub notes: Option<String>,
}

/// One machine's ceilings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardwareProfile {
    /// Must equal the file stem; the name suites and perf files use.
    pub id: String,
    /// Human-readable product name.
    pub name: String,
    /// "npu", "gpu" or "cpu".
    pub kind: DeviceKind,
    /// Dense peak throughput per dtype, TFLOP/s (TOPS for integer dtypes), for the unit the
    /// kernels run on (one card, one chip or one socket: see `scope`).
    pub peak_tflops: BTreeMap<String, f64>,
    /// Peak memory bandwidth, GB/s (10^9 bytes per second). Absent when no trustworthy
    /// figure exists: roofline floors then use the compute ceiling only.
    #[serde(default)]
    pub memory_bandwidth_gbps: Option<f64>,
    /// Device memory, GiB, if relevant.
    #[serde(default)]
    pub memory_gib: Option<f64>,
    /// What the figures cover, e.g. "one card (two 310P3 chips)".
    pub scope: String,
    pub provenance: Provenance,
    /// The SoC and its core counts, for an NPU whose kernels tile by them
    /// ([`super::soc::SocFacts`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soc: Option<super::soc::SocFacts>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    Npu,
    Gpu,
    Cpu,
}

impl HardwareProfile {
    /// Parse and validate a profile; `path` names the source in errors and its stem must equal
    /// the profile's `id`.
    pub fn from_toml(text: &str, path: &Path) -> Result<HardwareProfile, PerfError> {
        let p: HardwareProfile = toml::from_str(text).map_err(|e| PerfError::HardwareToml {
            path: path.to_path_buf(),
            source: Box::new(e),
        })?;
        let bad = |field: &str, problem: String| {
            Err(PerfError::InvalidHardware {
                path: path.to_path_buf(),
                field: field.to_string(),
                problem,
            })
        };
        if let Some(stem) = path.file_stem().and_then(|s| s.to_str())
            && path.extension().is_some()
            && stem != p.id
        {
            return bad(
                "id",
                format!("`{}` differs from the file name `{stem}`", p.id),
            );
        }
        if p.peak_tflops.is_empty() {
            return bad("peak_tflops", "lists no dtype".into());
        }
        for (dtype, v) in &p.peak_tflops {
            if !(v.is_finite() && *v > 0.0) {
                return bad(&format!("peak_tflops.{dtype}"), format!("{v} is not > 0"));
            }
        }
        if let Some(bw) = p.memory_bandwidth_gbps
            && !(bw.is_finite() && bw > 0.0)
        {
            return bad("memory_bandwidth_gbps", format!("{bw} is not > 0"));
        }
        if let Some(key) = p.soc.as_ref().and_then(|s| s.invalid()) {
            return bad(key, "must be a positive core count".into());
        }
        if p.provenance.kind != ProvenanceKind::Measured && p.provenance.sources.is_empty() {
            return bad(
                "provenance.sources",
                "a profile that is not measured must cite its sources".into(),
            );
        }
        if matches!(
            p.provenance.kind,
            ProvenanceKind::Measured | ProvenanceKind::Derived
        ) && p.provenance.method.is_none()
        {
            return bad(
                "provenance.method",
                "a measured or derived profile must say how".into(),
            );
        }
        Ok(p)
    }

    /// Read one profile file.
    pub fn load(path: &Path) -> Result<HardwareProfile, PerfError> {
        let text = crate::input_file::read_text(path, crate::input_file::Limit::CONFIG).map_err(
            |source| PerfError::Read {
                path: path.to_path_buf(),
                source,
            },
        )?;
        HardwareProfile::from_toml(&text, path)
    }

    /// Peak FLOP/s for `dtype`: its entry, or the entry under another name of the same type
    /// (the profiles write `int8` for the ops' `i8`).
    pub fn peak_flops(&self, dtype: &str) -> Result<f64, PerfError> {
        let same = |k: &str| -> bool {
            match (k.parse::<ElemType>(), dtype.parse::<ElemType>()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            }
        };
        self.peak_tflops
            .get(dtype)
            .or_else(|| {
                self.peak_tflops
                    .iter()
                    .find(|(k, _)| same(k))
                    .map(|(_, v)| v)
            })
            .map(|t| t * 1e12)
            .ok_or_else(|| PerfError::UnknownDtype {
                profile: self.id.clone(),
                dtype: dtype.to_string(),
                known: self
                    .peak_tflops
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// Every `*.toml` profile in a directory (e.g. `ci/hardware`), keyed by id.
pub fn load_profiles(dir: &Path) -> Result<BTreeMap<String, HardwareProfile>, PerfError> {
    let read_dir = std::fs::read_dir(dir).map_err(|source| PerfError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in read_dir {
        let entry = entry.map_err(|source| PerfError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let p = entry.path();
        if p.extension().and_then(|e| e.to_str()) == Some("toml") {
            paths.push(p);
        }
    }
    paths.sort();
    let mut out = BTreeMap::new();
    for p in paths {
        let profile = HardwareProfile::load(&p)?;
        if out.contains_key(&profile.id) {
            return Err(PerfError::DuplicateHardware(profile.id));
        }
        out.insert(profile.id.clone(), profile);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
id = "x"
name = "X"
kind = "gpu"
scope = "one card"
memory_bandwidth_gbps = 1000.0
[peak_tflops]
f16 = 100.0
[provenance]
kind = "datasheet"
sources = ["https://example.invalid/x"]
"#;

    #[test]
    fn a_profile_parses_and_answers_peaks() {
        let p = HardwareProfile::from_toml(GOOD, Path::new("ci/hardware/x.toml")).unwrap();
        assert_eq!(p.peak_flops("f16").unwrap(), 1e14);
        // Another name of the same type finds the entry (int8 profiles, i8 ops).
        assert_eq!(p.peak_flops("float16").unwrap(), 1e14);
        let e = p.peak_flops("bf16").unwrap_err().to_string();
        assert!(e.contains("bf16") && e.contains("f16"), "{e}");
    }

    #[test]
    fn errors_name_the_file_and_field() {
        let e = HardwareProfile::from_toml(GOOD, Path::new("y.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("y.toml") && e.contains("id"), "{e}");
        let typo = GOOD.replace("memory_bandwidth_gbps", "memory_bandwith_gbps");
        let e = HardwareProfile::from_toml(&typo, Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("x.toml") && e.contains("memory_bandwith_gbps"),
            "{e}"
        );
        let neg = GOOD.replace("f16 = 100.0", "f16 = -1.0");
        let e = HardwareProfile::from_toml(&neg, Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("peak_tflops.f16"), "{e}");
        let unsourced = GOOD.replace("sources = [\"https://example.invalid/x\"]", "");
        let e = HardwareProfile::from_toml(&unsourced, Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("provenance.sources"), "{e}");
    }

    #[test]
    fn the_shipped_profiles_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/hardware");
        let all = load_profiles(&dir).unwrap();
        for id in [
            "this-cpu",
            "nvidia-h100-sxm",
            "nvidia-h100-pcie",
            "nvidia-h200-sxm",
            "atlas-300i-duo",
            "atlas-800i-a2",
            "ascend-910b2",
        ] {
            assert!(all.contains_key(id), "{id} missing: {:?}", all.keys());
        }
        // datasheet H100 SXM: dense FP16 tensor is half the sparse 1979 TFLOP/s
        assert_eq!(all["nvidia-h100-sxm"].peak_tflops["f16"], 989.5);
    }
}
