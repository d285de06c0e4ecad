//! The perf file: raw timing samples per (case, target, hardware) plus the environment they
//! were taken in (docs/perf.md; JSON Schema docs/schemas/perf.schema.json). The minimal
//! accepted input is `{"cases": [{"id": "...", "target": "...", "samples_us": [...]}]}`;
//! every other field is optional. Unknown fields are rejected so that a misspelt field is
//! reported, not ignored. The harness validates the values (finite, positive times; no case
//! twice) when it reads one.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Identifier written into files this version produces.
pub const SCHEMA: &str = "conform-perf/1";

/// A whole perf file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PerfFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    pub cases: Vec<PerfRecord>,
}

/// Where and with what the samples were taken.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
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

/// The timings of one (case, target, hardware).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PerfRecord {
    pub id: String,
    pub target: String,
    /// Hardware profile name (a `ci/hardware/<name>.toml`), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    /// Per-iteration kernel times in microseconds, in the order measured. Never a summary.
    pub samples_us: Vec<f64>,
    /// Process CPU time of each sample in microseconds, in the same order, where the target
    /// measures it (the in-process reference, CPU workers); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_us: Vec<f64>,
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

/// Work of one kernel invocation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Work {
    /// Floating-point (or integer multiply-add, counted as 2) operations.
    pub flops: f64,
    /// Minimum bytes that must cross the memory interface.
    pub bytes: f64,
}

/// Which ceiling bounds the floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    Compute,
    Memory,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Roofline {
    pub hardware: String,
    pub dtype: String,
    /// The time the figures are for (the median sample), microseconds.
    pub time_us: f64,
    pub achieved_tflops: f64,
    pub achieved_gbps: f64,
    /// max(flops / peak compute, bytes / peak bandwidth), microseconds (the compute term
    /// alone when the profile has no bandwidth figure).
    pub floor_us: f64,
    pub bound: Bound,
    /// floor / time: 1.0 is the roofline; above 1 is impossible.
    pub fraction_of_peak: f64,
    /// The time is below the roofline floor.
    pub implausible: bool,
}

impl PerfRecord {
    /// Record the warm-up and iteration counts used.
    pub fn with_protocol(mut self, warmup: u32, iterations: u32) -> PerfRecord {
        self.warmup = Some(warmup);
        self.iterations = Some(iterations);
        self
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
}
