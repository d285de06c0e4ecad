//! The perf file: raw timing samples per (case, target, hardware) plus the environment they
//! were taken in. JSON, documented in docs/perf.md. The minimal accepted input is
//! `{"cases": [{"id": "...", "target": "...", "samples_us": [...]}]}`; every other field is
//! optional. Unknown fields are rejected so that a misspelt field is reported, not ignored.

use std::collections::BTreeMap;
use std::path::Path;

use super::error::PerfError;
use super::hardware::HardwareProfile;
use super::roofline::{roofline, Work};
use super::stats::median;

pub use conform_metadata::perf::{Environment, PerfFile, PerfRecord, SCHEMA};

/// Filling an [`Environment`] from this process.
pub trait EnvironmentCapture {
    /// The environment of this process: hostname and the current UTC date filled in, plus
    /// the given versions, device and commit.
    fn capture(
        versions: BTreeMap<String, String>,
        device: Option<String>,
        commit: Option<String>,
    ) -> Environment;
}

impl EnvironmentCapture for Environment {
    fn capture(
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

/// The longest time a sample may hold, in microseconds: about 11.6 days. A kernel timing
/// beyond it is a broken timer or a corrupt file, and a mean over such values can overflow
/// `f64` (1e308 us beside 100 us gave an infinite interval judged UNCHANGED).
pub const MAX_SAMPLE_US: f64 = 1e12;

/// Whether `x` is a time a sample may hold: finite, above 0 and at most [`MAX_SAMPLE_US`].
pub fn is_valid_sample(x: f64) -> bool {
    x.is_finite() && x > 0.0 && x <= MAX_SAMPLE_US
}

/// Building and validating a [`PerfRecord`]: every constructor checks the values (non-empty,
/// finite, positive times), so an invalid record never reaches a file.
pub trait PerfRecordBuild: Sized {
    /// A record from raw samples; validates them (non-empty, finite, > 0).
    fn from_samples(
        id: impl Into<String>,
        target: impl Into<String>,
        samples_us: Vec<f64>,
    ) -> Result<Self, PerfError>;
    /// Record one-time setup times (microseconds).
    fn with_setup(self, setup_us: Vec<f64>) -> Result<Self, PerfError>;
    /// Record the work of one iteration and, when a hardware profile is given, the roofline
    /// figures of the median sample for `dtype` (the profile's peak table key).
    fn with_work(
        self,
        work: Work,
        profile: Option<(&HardwareProfile, &str)>,
    ) -> Result<Self, PerfError>;
    /// Check the values; `path` names the source in errors.
    fn validate(&self, path: &Path) -> Result<(), PerfError>;
}

impl PerfRecordBuild for PerfRecord {
    fn from_samples(
        id: impl Into<String>,
        target: impl Into<String>,
        samples_us: Vec<f64>,
    ) -> Result<PerfRecord, PerfError> {
        let r = PerfRecord {
            id: id.into(),
            target: target.into(),
            hardware: None,
            samples_us,
            cpu_us: Vec::new(),
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

    fn with_setup(mut self, setup_us: Vec<f64>) -> Result<PerfRecord, PerfError> {
        self.setup_us = setup_us;
        self.validate(Path::new("<in memory>"))?;
        Ok(self)
    }

    fn with_work(
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
            .position(|x| !is_valid_sample(*x))
        {
            Some(i) => Err(bad(
                field,
                format!(
                    "[{i}] = {} is not a finite time > 0 and <= {MAX_SAMPLE_US:e} us",
                    values[i]
                ),
            )),
            None => Ok(()),
        };
        positive("samples_us", &self.samples_us)?;
        positive("setup_us", &self.setup_us)?;
        if !self.cpu_us.is_empty() && self.cpu_us.len() != self.samples_us.len() {
            return Err(bad(
                "cpu_us",
                format!(
                    "has {} values for {} samples (one per sample, or none)",
                    self.cpu_us.len(),
                    self.samples_us.len()
                ),
            ));
        }
        if let Some(i) = self
            .cpu_us
            .iter()
            .position(|x| !(x.is_finite() && *x >= 0.0 && *x <= MAX_SAMPLE_US))
        {
            return Err(bad(
                "cpu_us",
                format!(
                    "[{i}] = {} is not a finite time >= 0 and <= {MAX_SAMPLE_US:e} us",
                    self.cpu_us[i]
                ),
            ));
        }
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

/// Reading, writing and extending a [`PerfFile`], with validation and errors that name the
/// file and the case.
pub trait PerfFileIo: Sized {
    /// Add a record; a second record with the same (id, target, hardware) is an error.
    fn push(&mut self, record: PerfRecord) -> Result<(), PerfError>;
    /// Parse and validate JSON text; `path` names the source in errors.
    fn from_json(text: &str, path: &Path) -> Result<Self, PerfError>;
    /// Read and validate a perf file.
    fn read(path: &Path) -> Result<Self, PerfError>;
    /// Pretty JSON.
    fn to_json(&self) -> Result<String, PerfError>;
    /// Write the file (pretty JSON, trailing newline).
    fn write(&self, path: &Path) -> Result<(), PerfError>;
}

impl PerfFileIo for PerfFile {
    /// Add a record; a second record with the same (id, target, hardware) is an error.
    fn push(&mut self, record: PerfRecord) -> Result<(), PerfError> {
        if self.cases.iter().any(|c| c.key() == record.key()) {
            return Err(duplicate(Path::new("<in memory>"), &record));
        }
        self.cases.push(record);
        Ok(())
    }

    /// Parse and validate JSON text; `path` names the source in errors.
    fn from_json(text: &str, path: &Path) -> Result<PerfFile, PerfError> {
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
    fn read(path: &Path) -> Result<PerfFile, PerfError> {
        let text = crate::input_file::read_text(path, crate::input_file::Limit::PERF).map_err(
            |source| PerfError::Read {
                path: path.to_path_buf(),
                source,
            },
        )?;
        PerfFile::from_json(&text, path)
    }

    /// Pretty JSON.
    fn to_json(&self) -> Result<String, PerfError> {
        serde_json::to_string_pretty(self).map_err(PerfError::Serialise)
    }

    /// Write the file (pretty JSON, trailing newline).
    fn write(&self, path: &Path) -> Result<(), PerfError> {
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
