//! The results file: what `conform run` writes (`--json`) and `conform report` reads.
//! JSON Schema: docs/schemas/results.schema.json.
//! Schema documented in docs/results.md; `schema_version` changes on any breaking change.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::status::Status;
use std::collections::BTreeMap;

/// The version of this schema.
pub const RESULTS_SCHEMA_VERSION: u32 = 1;

/// A whole run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunResults {
    pub schema_version: u32,
    /// conform's version.
    pub conform_version: String,
    /// RFC 3339 UTC start time.
    pub started_at: String,
    /// Whether seeds were drawn fresh for this run (`--fresh-seeds`).
    pub fresh_seeds: bool,
    /// Hardware profile name the budgets were evaluated against, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    pub cases: Vec<CaseResult>,
    /// Set when the run was interrupted (`"SIGINT"`, `"SIGTERM"`): `cases` holds the trials
    /// that finished, `unfinished` those that did not run to the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// The (case, target) trials an interrupt left unfinished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfinished: Vec<UnfinishedTrial>,
    /// The A/B timing against another target (`--against`), when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ab: Option<AbResults>,
    /// What each target of the run was, as its handshake said: the device and implementation
    /// and the library versions (so a report says which module ran), or why it was unavailable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetInfo>,
    /// The project root the run was given (`--root` or `CONFORM_ROOT`), as an absolute path:
    /// replay lines name it, so they run when pasted in another directory. Absent when the
    /// root was found from the working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
}

/// A target of the run, as its handshake described it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TargetInfo {
    pub name: String,
    pub available: bool,
    /// The device and implementation, in words (available targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Library name -> version (available targets).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub versions: std::collections::BTreeMap<String, String>,
    /// Why it could not run (unavailable targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The absolute path of the worker's declaration (`target.toml`) when the worker was given
    /// by path (`conform run --worker`, `conform validate`) rather than by name: replay lines
    /// name it with `--worker`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
}

/// `--against T`: every passed case of the other targets timed against `T`, interleaved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AbResults {
    /// The target the others are compared with (the kernel being replaced).
    pub against: String,
    /// Per case and candidate target: the replaced kernel as baseline, the candidate as
    /// candidate (the same fields as `conform perf compare --json`).
    pub comparison: crate::compare::Comparison,
    /// Cases that could not be timed on both sides, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_timed: Vec<NotTimed>,
}

/// A case the A/B session could not time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NotTimed {
    pub id: String,
    pub target: String,
    pub reason: String,
}

/// A trial an interrupt stopped before it ended (or before it started).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UnfinishedTrial {
    pub id: String,
    pub target: String,
}

/// One (case, target) result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CaseResult {
    /// Stable case id, e.g. `fa_prefill/bf16/b2-s1024-hq32-hkv8-d128/causal_br`.
    pub id: String,
    pub suite: String,
    pub op: String,
    /// The recipe the case names (what its golden data and recipe checks were computed with);
    /// empty in results written before this field existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub recipe: String,
    pub target: String,
    pub status: Status,
    /// Human explanation: why it failed, was skipped, or errored. Empty when passed.
    #[serde(default)]
    pub message: String,
    /// The input seed used; `conform run --filter <id> --seed <seed>` replays the case.
    pub seed: u64,
    /// Per output tensor: the numerics verdict's figures.
    #[serde(default)]
    pub metrics: BTreeMap<String, OutputMetrics>,
    /// Wall time of the whole trial, milliseconds.
    #[serde(default)]
    pub duration_ms: f64,
    /// Performance figures when the run asked for them (`--perf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf: Option<serde_json::Value>,
    /// The worker's stderr tail or notes, when any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The reason a target gives for being nondeterministic (`nondeterministic = "..."` in its
    /// `target.toml`), when it declares itself so: its repeat of input set 0 is not required
    /// to give the same bits, and it is judged by the case's checks only. Absent for every
    /// other target, which the determinism check holds to bit-identical repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nondeterministic: Option<String>,
    /// How many output tensors of this trial were compared bit for bit with the golden store
    /// (the reference target on a quick-tier case at its own seed, the main job); absent when
    /// none was (other targets, the full tier, `--no-golden`, another seed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub golden_tensors: Option<u32>,
    /// The CANN kernel variant the case's recipe models for the case's shape (docs/ascend.md):
    /// present when the recipe models a CANN kernel whose host tiling dispatch conform models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<KernelVariantRecord>,
    /// Why a target that declares the case's recipe was judged by the case's checks for a
    /// target with its own arithmetic (`checks_without_recipe`) instead of against the
    /// recipe's bits: it reports a CANN release or a SoC outside those the variant describes,
    /// or the variant's bits rest on a convention of conform's no device is known to share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipe_set_aside: Option<String>,
}

/// A CANN kernel variant, as the results name it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KernelVariantRecord {
    /// The recipe preset that computes it (empty for a kernel conform does not model).
    pub preset: String,
    /// The kernel file (repository path).
    pub kernel: String,
    /// The host tiling that selects it: file and function.
    pub tiling: String,
    /// The tiling key, or the template the key encodes.
    pub key: String,
    /// The SoCs it was read for.
    pub socs: Vec<String>,
    /// The CANN releases it was read for, in words.
    pub releases: String,
    /// Why the case's shape lands on it (the tiling's branch and values).
    pub detail: String,
}

/// The figures every numerics verdict records for one output tensor.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OutputMetrics {
    /// The check policy, e.g. `bitwise`, `ulp(max=2)`, `cann_single(bf16)`.
    pub policy: String,
    pub passed: bool,
    /// Why the check failed (empty when passed).
    #[serde(default)]
    pub reason: String,
    pub numel: u64,
    pub max_abs_err: f64,
    pub max_rel_err: f64,
    /// Mean relative error, |a-g| / (|g| + 1e-7) (CANN MERE).
    pub mere: f64,
    /// Max relative error with the same denominator (CANN MARE).
    pub mare: f64,
    pub rmse: f64,
    /// Max ULP distance in the output dtype (None for policies that do not compute it).
    #[serde(default)]
    pub max_ulp: Option<u64>,
    /// Elements the policy judged wrong.
    pub mismatches: u64,
    pub mismatch_ratio: f64,
    /// Elements that are NaN/Inf where the value the rule judges against is finite: the
    /// expected value for the bitwise and ULP rules, the golden one for the tolerance and
    /// error-ratio rules (always a failure).
    #[serde(default)]
    pub non_finite: u64,
    /// Elements that still hold the harness's poison pattern (never written).
    #[serde(default)]
    pub unwritten: u64,
    /// ULP-distance histogram: bucket label (`0`, `1`, `2-3`, `4-7`, ...) -> count.
    #[serde(default)]
    pub ulp_histogram: Vec<(String, u64)>,
    /// Relative-error histogram: bucket label (`<2^-20`, `2^-20..2^-19`, ...) -> count.
    #[serde(default)]
    pub rel_err_histogram: Vec<(String, u64)>,
    /// The worst elements, worst first.
    #[serde(default)]
    pub worst: Vec<WorstElement>,
    /// Error over two logical axes (for attention: query position x head).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heatmap: Option<Heatmap>,
    /// Extra policy-specific figures (error ratios, small-value counts, ...).
    #[serde(default)]
    pub extra: BTreeMap<String, f64>,
}

/// One badly wrong element, located by its logical index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorstElement {
    /// Logical index, e.g. `b=0 n=3 s=17 d=5`.
    pub index: String,
    /// NaN/Inf are written as the strings `"NaN"`, `"inf"`, `"-inf"` (JSON has no such numbers).
    #[serde(with = "non_finite_f64")]
    #[schemars(schema_with = "non_finite_f64::schema")]
    pub actual: f64,
    #[serde(with = "non_finite_f64")]
    #[schemars(schema_with = "non_finite_f64::schema")]
    pub expected: f64,
    pub abs_err: f64,
    pub rel_err: f64,
    #[serde(default)]
    pub ulp: Option<u64>,
}

/// Maximum absolute error over a grid of two logical axes (bucketed to at most 64 x 64).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Heatmap {
    pub row_axis: String,
    pub col_axis: String,
    /// Number of logical positions per row/column bucket.
    pub row_bucket: usize,
    pub col_bucket: usize,
    pub rows: usize,
    pub cols: usize,
    /// Row-major `rows x cols` values.
    pub values: Vec<f64>,
}

impl RunResults {
    /// Counts per status.
    pub fn counts(&self) -> BTreeMap<Status, usize> {
        let mut m = BTreeMap::new();
        for c in &self.cases {
            *m.entry(c.status).or_insert(0) += 1;
        }
        m
    }
}

/// An f64 that may be NaN or infinite: a JSON number when finite, else the string `"NaN"`,
/// `"inf"` or `"-inf"`. Reads both forms.
mod non_finite_f64 {
    use serde::{Deserialize, Deserializer, Serializer};

    /// A number, or one of the three names.
    pub fn schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "oneOf": [
                { "type": "number" },
                { "type": "string", "enum": ["NaN", "inf", "-inf"] }
            ]
        })
    }

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_nan() {
            s.serialize_str("NaN")
        } else if *v == f64::INFINITY {
            s.serialize_str("inf")
        } else if *v == f64::NEG_INFINITY {
            s.serialize_str("-inf")
        } else {
            s.serialize_f64(*v)
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrName {
        Number(f64),
        Name(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        match NumberOrName::deserialize(d)? {
            NumberOrName::Number(v) => Ok(v),
            NumberOrName::Name(n) => match n.as_str() {
                "NaN" => Ok(f64::NAN),
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                other => Err(serde::de::Error::custom(format!(
                    "expected a number, \"NaN\", \"inf\" or \"-inf\", got \"{other}\""
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_element_with_nan_and_infinity_round_trips_through_json() {
        for (a, e) in [
            (f64::NAN, 1.5),
            (f64::INFINITY, -2.0),
            (f64::NEG_INFINITY, 0.0),
            (0.25, 3.0),
        ] {
            let w = WorstElement {
                index: "b=0 s=1".to_string(),
                actual: a,
                expected: e,
                abs_err: 0.0,
                rel_err: 0.0,
                ulp: None,
            };
            let text = serde_json::to_string(&w).unwrap();
            let back: WorstElement = serde_json::from_str(&text).unwrap();
            if a.is_nan() {
                assert!(back.actual.is_nan(), "{text}");
            } else {
                assert_eq!(back.actual, a, "{text}");
            }
            assert_eq!(back.expected, e);
        }
        let bad = r#"{"index":"x","actual":"nan?","expected":1.0,"abs_err":0.0,"rel_err":0.0}"#;
        assert!(serde_json::from_str::<WorstElement>(bad).is_err());
    }
}
