//! The perf file: raw timing samples per (case, target, hardware) plus the environment they
//! were taken in. JSON, documented in docs/perf.md. The minimal accepted input is
//! `{"cases": [{"id": "...", "target": "...", "samples_us": [...]}]}`; every other field is
//! optional. Unknown fields are rejected so that a misspelt field is reported, not ignored.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::PerfError;
use super::hardware::HardwareProfile;
use super::roofline::{roofline, Roofline, Work};
use super::stats::median;

/// Identifier written into files this version produces.
pub const SCHEMA: &str = "conform-perf/1";

/// A whole perf file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    pub cases: Vec<PerfRecord>,
}

/// Where and with what the samples were taken.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// e.g. "conform" -> "0.1.0", "cann" -> "8.0.RC3", "driver" -> "...".
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub versions: BTreeMap<String, String>,
    /// Free text naming the device, e.g. "Atlas 300I Duo (310P3)".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Source revision the candidate was built from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// UTC, RFC 3339 (`2026-11-22T04:05:06Z`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// The tier the cases were selected from (`quick`, `full`, `all`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// The input seeds: `cases` (each case's own), `fresh`, or the one seed given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
}

impl Environment {
    /// The environment of this process: hostname and the current UTC date filled in, plus the
    /// given versions, device and commit.
    pub fn capture(
        versions: BTreeMap<String, String>,
        device: Option<String>,
        commit: Option<String>,
    ) -> Environment {
        Environment {
            versions,
            device,
            commit,
            hostname: local_hostname(),
            date: Some(utc_now_rfc3339()),
            tier: None,
            seed: None,
        }
    }
}

fn local_hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
}

/// Current UTC time as RFC 3339 with second precision.
pub fn utc_now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339_from_unix(secs)
}

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
pub fn rfc3339_from_unix(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// The timings of one (case, target, hardware).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfRecord {
    pub id: String,
    pub target: String,
    /// Hardware profile name (a `ci/hardware/<name>.toml`), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    /// Per-iteration kernel times in microseconds, in the order measured. Never a summary.
    pub samples_us: Vec<f64>,
    /// Untimed warm-up iterations run before the samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<u32>,
    /// Timed iterations requested (normally `samples_us.len()`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// One-time setup times (weight repacking, planning), microseconds, kept apart from the
    /// kernel samples.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup_us: Vec<f64>,
    /// Floating-point operations of one iteration (from the op description).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<f64>,
    /// Minimum bytes moved by one iteration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<f64>,
    /// Roofline figures of the median sample against the hardware profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roofline: Option<Roofline>,
    /// Digest of the case's op parameters (the first 16 hex digits of blake3 over their
    /// JSON): a case whose parameters changed under the same id starts a new series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_digest: Option<String>,
}

impl PerfRecord {
    /// A record from raw samples; validates them (non-empty, finite, > 0).
    pub fn from_samples(
        id: impl Into<String>,
        target: impl Into<String>,
        samples_us: Vec<f64>,
    ) -> Result<PerfRecord, PerfError> {
        let r = PerfRecord {
            id: id.into(),
            target: target.into(),
            hardware: None,
            samples_us,
            warmup: None,
            iterations: None,
            setup_us: Vec::new(),
            flops: None,
            bytes: None,
            roofline: None,
            params_digest: None,
        };
        r.validate(Path::new("<in memory>"))?;
        Ok(r)
    }

    /// Record the warm-up and iteration counts used.
    pub fn with_protocol(mut self, warmup: u32, iterations: u32) -> PerfRecord {
        self.warmup = Some(warmup);
        self.iterations = Some(iterations);
        self
    }

    /// Record one-time setup times (microseconds).
    pub fn with_setup(mut self, setup_us: Vec<f64>) -> Result<PerfRecord, PerfError> {
        self.setup_us = setup_us;
        self.validate(Path::new("<in memory>"))?;
        Ok(self)
    }

    /// Record the work of one iteration and, when a hardware profile is given, the roofline
    /// figures of the median sample for `dtype` (the profile's peak table key).
    pub fn with_work(
        mut self,
        work: Work,
        profile: Option<(&HardwareProfile, &str)>,
    ) -> Result<PerfRecord, PerfError> {
        self.flops = Some(work.flops);
        self.bytes = Some(work.bytes);
        if let Some((profile, dtype)) = profile {
            let t = median(&self.samples_us).expect("validated non-empty");
            self.roofline = Some(roofline(work, t, profile, dtype)?);
            self.hardware = Some(profile.id.clone());
        }
        self.validate(Path::new("<in memory>"))?;
        Ok(self)
    }

    /// Name the hardware profile without computing a roofline.
    pub fn on_hardware(mut self, hardware: impl Into<String>) -> PerfRecord {
        self.hardware = Some(hardware.into());
        self
    }

    /// Matching key: (id, target, hardware).
    pub fn key(&self) -> (&str, &str, Option<&str>) {
        (&self.id, &self.target, self.hardware.as_deref())
    }

    fn validate(&self, path: &Path) -> Result<(), PerfError> {
        let bad = |field: &'static str, problem: String| PerfError::InvalidCase {
            path: path.to_path_buf(),
            case: self.id.clone(),
            target: self.target.clone(),
            field,
            problem,
        };
        if self.id.is_empty() {
            return Err(bad("id", "is empty".into()));
        }
        if self.target.is_empty() {
            return Err(bad("target", "is empty".into()));
        }
        if self.samples_us.is_empty() {
            return Err(bad("samples_us", "has no samples".into()));
        }
        let positive = |field: &'static str, values: &[f64]| match values
            .iter()
            .position(|x| !(x.is_finite() && *x > 0.0))
        {
            Some(i) => Err(bad(
                field,
                format!("[{i}] = {} is not a finite time > 0", values[i]),
            )),
            None => Ok(()),
        };
        positive("samples_us", &self.samples_us)?;
        positive("setup_us", &self.setup_us)?;
        for (field, v) in [("flops", self.flops), ("bytes", self.bytes)] {
            if let Some(x) = v
                && !(x.is_finite() && x >= 0.0)
            {
                return Err(bad(field, format!("{x} is not a finite count >= 0")));
            }
        }
        Ok(())
    }
}

impl PerfFile {
    /// An empty file with the schema tag and the given environment.
    pub fn new(environment: Environment) -> PerfFile {
        PerfFile {
            schema: Some(SCHEMA.to_string()),
            environment: Some(environment),
            cases: Vec::new(),
        }
    }

    /// Add a record; a second record with the same (id, target, hardware) is an error.
    pub fn push(&mut self, record: PerfRecord) -> Result<(), PerfError> {
        if self.cases.iter().any(|c| c.key() == record.key()) {
            return Err(duplicate(Path::new("<in memory>"), &record));
        }
        self.cases.push(record);
        Ok(())
    }

    /// Parse and validate JSON text; `path` names the source in errors.
    pub fn from_json(text: &str, path: &Path) -> Result<PerfFile, PerfError> {
        let file: PerfFile = serde_json::from_str(text).map_err(|source| PerfError::PerfJson {
            path: path.to_path_buf(),
            source,
        })?;
        if let Some(schema) = &file.schema
            && schema != SCHEMA
        {
            return Err(PerfError::InvalidArgument {
                field: "schema",
                problem: format!(
                    "{}: `{schema}` is not a schema this version reads (`{SCHEMA}`)",
                    path.display()
                ),
            });
        }
        for (i, c) in file.cases.iter().enumerate() {
            c.validate(path)?;
            if file.cases[..i].iter().any(|d| d.key() == c.key()) {
                return Err(duplicate(path, c));
            }
        }
        Ok(file)
    }

    /// Read and validate a perf file.
    pub fn read(path: &Path) -> Result<PerfFile, PerfError> {
        let text = std::fs::read_to_string(path).map_err(|source| PerfError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        PerfFile::from_json(&text, path)
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> Result<String, PerfError> {
        serde_json::to_string_pretty(self).map_err(PerfError::Serialise)
    }

    /// Write the file (pretty JSON, trailing newline).
    pub fn write(&self, path: &Path) -> Result<(), PerfError> {
        let mut text = self.to_json()?;
        text.push('\n');
        crate::atomic_file::write(path, text.as_bytes()).map_err(|source| PerfError::Write {
            path: path.to_path_buf(),
            source,
        })
    }
}

fn duplicate(path: &Path, r: &PerfRecord) -> PerfError {
    PerfError::DuplicateCase {
        path: path.to_path_buf(),
        case: r.id.clone(),
        target: r.target.clone(),
        hardware: r.hardware.clone().unwrap_or_else(|| "-".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_input_is_accepted() {
        let f = PerfFile::from_json(
            r#"{"cases": [{"id": "a", "target": "t", "samples_us": [1.5, 2, 3]}]}"#,
            Path::new("m.json"),
        )
        .unwrap();
        assert_eq!(f.cases[0].samples_us, vec![1.5, 2.0, 3.0]);
        assert_eq!(f.environment, None);
    }

    #[test]
    fn bad_input_names_file_and_field() {
        let e = PerfFile::from_json(
            r#"{"cases": [{"id": "a", "target": "t"}]}"#,
            Path::new("x.json"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("x.json") && e.contains("samples_us"), "{e}");
        let e = PerfFile::from_json(
            r#"{"cases": [{"id": "a", "target": "t", "samples_us": [1, -2]}]}"#,
            Path::new("x.json"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("x.json") && e.contains("samples_us") && e.contains("[1] = -2"),
            "{e}"
        );
        let e = PerfFile::from_json(
            r#"{"cases": [{"id": "a", "target": "t", "samples_us": [1], "sample_us": [2]}]}"#,
            Path::new("x.json"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("sample_us"), "{e}");
        let dup = r#"{"cases": [{"id": "a", "target": "t", "samples_us": [1]},
                                {"id": "a", "target": "t", "samples_us": [2]}]}"#;
        let e = PerfFile::from_json(dup, Path::new("d.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("d.json") && e.contains("more than once"), "{e}");
    }

    #[test]
    fn a_written_file_reads_back_identically() {
        let mut f = PerfFile::new(Environment::capture(
            BTreeMap::from([("conform".to_string(), "0.1.0".to_string())]),
            Some("cpu".into()),
            Some("abc123".into()),
        ));
        let r = PerfRecord::from_samples("fa/1k", "reference", vec![10.0, 11.0, 12.5])
            .unwrap()
            .with_protocol(3, 3)
            .with_setup(vec![400.0])
            .unwrap()
            .with_work(
                Work {
                    flops: 1e9,
                    bytes: 1e6,
                },
                None,
            )
            .unwrap();
        f.push(r.clone()).unwrap();
        assert!(f.push(r).is_err());
        let back = PerfFile::from_json(&f.to_json().unwrap(), Path::new("mem")).unwrap();
        assert_eq!(back, f);
        assert!(PerfRecord::from_samples("a", "t", vec![]).is_err());
        assert!(PerfRecord::from_samples("a", "t", vec![f64::NAN]).is_err());
    }

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(rfc3339_from_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_from_unix(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_from_unix(1_795_320_306), "2026-11-22T04:05:06Z");
    }
}
