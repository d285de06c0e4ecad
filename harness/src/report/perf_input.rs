//! Performance inputs, read loosely from JSON with documented keys (docs/report.md) so the
//! report accepts what `conform perf record`, `conform perf compare --json` and
//! `conform run --perf` write, and samples recorded elsewhere.
//!
//! Perf case (a `cases[]` entry of a perf record file, or a results case's `perf` object):
//! `id`, `target`, `samples_us` (raw samples), optional `median_us`, `hardware`, the budget as
//! `budget_us` or `budget: {max_us, min_roofline_fraction}`, and the roofline fraction as
//! `roofline_fraction` or `roofline: {fraction_of_peak, implausible}`.
//! Comparison (`conform perf compare --json`: an entry of `cases[]`, or of `comparisons[]` or
//! a top-level array): `id`, `target`, `verdict`, optional `ratio`, `ci_low`/`ci_high` (or
//! `ci: [low, high]`), `p_value` or `p_slower`/`p_faster`, `baseline.median_us`,
//! `candidate.median_us`, `reason`, `hardware`.

use super::error::ReportError;
use conform_metadata::compare::Verdict;
use serde_json::Value;
use std::path::Path;

/// One case's timing figures.
#[derive(Clone, Debug, PartialEq)]
pub struct PerfCase {
    pub id: String,
    pub target: String,
    pub samples_us: Vec<f64>,
    /// The recorded median, else the median of the samples.
    pub median_us: Option<f64>,
    pub budget_us: Option<f64>,
    /// A minimum roofline fraction the case must reach, when budgeted so.
    pub min_roofline_fraction: Option<f64>,
    pub roofline_fraction: Option<f64>,
    /// The time is below the roofline floor (a broken or cheating timer).
    pub implausible: bool,
    pub hardware: Option<String>,
}

/// One perf record file.
#[derive(Clone, Debug, PartialEq)]
pub struct PerfFile {
    /// Label on the trend plot's axis: `label`, `commit`, `recorded_at` or the file name.
    pub label: String,
    pub cases: Vec<PerfCase>,
}

/// One baseline comparison, as `conform perf compare --json` writes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub id: String,
    pub target: String,
    pub ratio: Option<f64>,
    pub ci: Option<(f64, f64)>,
    /// The rank test's p-value in the direction of the change (`p_value`, else `p_slower`
    /// when the ratio is >= 1 and `p_faster` otherwise).
    pub p_value: Option<f64>,
    pub baseline_median_us: Option<f64>,
    pub candidate_median_us: Option<f64>,
    /// The comparison's verdict (the metadata type `conform perf compare --json` writes).
    pub verdict: Verdict,
    /// Why, in words (from the comparison).
    pub reason: String,
    pub hardware: Option<String>,
    /// The history gate's word for a move of the whole run (`references[].noise.drift` of
    /// `conform perf history gate --json`): its verdict is UNCHANGED, but the row moved, so
    /// the report shows it as DRIFT, never with an UNCHANGED badge.
    pub drift: Option<String>,
}

/// A row's key in a comparison: (id, target, hardware).
type RowKey = (String, String, Option<String>);

/// The drift reasons of a history gate's comparison, by (id, target, hardware).
fn drift_of(v: &Value) -> Vec<(RowKey, String)> {
    let Some(Value::Array(refs)) = v.get("references") else {
        return Vec::new();
    };
    refs.iter()
        .filter_map(|r| {
            let why = r.get("noise")?.get("drift")?.as_str()?.to_string();
            let key = (
                opt_str(r, "id")?,
                opt_str(r, "target").unwrap_or_default(),
                opt_str(r, "hardware"),
            );
            Some((key, why))
        })
        .collect()
}

fn field_err(path: &Path, field: &str, reason: &str) -> ReportError {
    ReportError::Field {
        path: path.to_path_buf(),
        field: field.to_string(),
        reason: reason.to_string(),
    }
}

fn opt_f64(v: &Value, key: &str, path: &Path, at: &str) -> Result<Option<f64>, ReportError> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => x
            .as_f64()
            .map(Some)
            .ok_or_else(|| field_err(path, &format!("{at}.{key}"), "expected a number")),
    }
}

/// The first of `paths` (each a key path such as `["budget", "max_us"]`) that is present.
fn first_f64(
    v: &Value,
    paths: &[&[&str]],
    path: &Path,
    at: &str,
) -> Result<Option<f64>, ReportError> {
    for keys in paths {
        let (last, parents) = keys.split_last().expect("non-empty key path");
        let mut node = v;
        let mut found = true;
        for k in parents {
            match node.get(*k) {
                Some(n) if n.is_object() => node = n,
                _ => {
                    found = false;
                    break;
                }
            }
        }
        if found {
            let inner_at = if parents.is_empty() {
                at.to_string()
            } else {
                format!("{at}.{}", parents.join("."))
            };
            if let Some(x) = opt_f64(node, last, path, &inner_at)? {
                return Ok(Some(x));
            }
        }
    }
    Ok(None)
}

fn opt_str(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Median of finite samples (mean of the two middle values for an even count).
pub fn median(samples: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// Reads one perf case object; `at` names it in errors (e.g. `cases[3]`).
pub fn perf_case(
    v: &Value,
    default_id: &str,
    default_target: &str,
    path: &Path,
    at: &str,
) -> Result<PerfCase, ReportError> {
    if !v.is_object() {
        return Err(field_err(path, at, "expected an object"));
    }
    let samples_us = match v.get("samples_us") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_f64())
            .collect::<Option<Vec<f64>>>()
            .ok_or_else(|| field_err(path, &format!("{at}.samples_us"), "expected numbers"))?,
        Some(_) => {
            return Err(field_err(
                path,
                &format!("{at}.samples_us"),
                "expected an array of numbers",
            ))
        }
    };
    let median_us = match opt_f64(v, "median_us", path, at)? {
        Some(m) => Some(m),
        None => median(&samples_us),
    };
    Ok(PerfCase {
        id: opt_str(v, "id").unwrap_or_else(|| default_id.to_string()),
        target: opt_str(v, "target").unwrap_or_else(|| default_target.to_string()),
        samples_us,
        median_us,
        budget_us: first_f64(v, &[&["budget_us"], &["budget", "max_us"]], path, at)?,
        min_roofline_fraction: first_f64(
            v,
            &[
                &["min_roofline_fraction"],
                &["budget", "min_roofline_fraction"],
            ],
            path,
            at,
        )?,
        roofline_fraction: first_f64(
            v,
            &[&["roofline_fraction"], &["roofline", "fraction_of_peak"]],
            path,
            at,
        )?,
        implausible: v
            .get("roofline")
            .and_then(|r| r.get("implausible"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        hardware: opt_str(v, "hardware"),
    })
}

fn entries<'a>(v: &'a Value, keys: &[&str], path: &Path) -> Result<&'a [Value], ReportError> {
    if let Value::Array(a) = v {
        return Ok(a);
    }
    for k in keys {
        if let Some(Value::Array(a)) = v.get(*k) {
            return Ok(a);
        }
    }
    Err(field_err(
        path,
        keys[0],
        "missing: expected an array of cases",
    ))
}

/// Reads a perf record file's JSON.
pub fn perf_file(v: &Value, path: &Path) -> Result<PerfFile, ReportError> {
    let mut cases = Vec::new();
    for (i, c) in entries(v, &["cases"], path)?.iter().enumerate() {
        let at = format!("cases[{i}]");
        if c.get("id").and_then(Value::as_str).is_none() {
            return Err(field_err(
                path,
                &format!("{at}.id"),
                "missing or not a string",
            ));
        }
        cases.push(perf_case(c, "", "", path, &at)?);
    }
    let env = v.get("environment");
    let date = env
        .and_then(|e| opt_str(e, "date"))
        .or_else(|| opt_str(v, "recorded_at"))
        .map(|d| d.chars().take(16).collect::<String>().replace('T', " "));
    let commit = opt_str(v, "commit")
        .or_else(|| env.and_then(|e| opt_str(e, "commit")))
        .map(|c| c.chars().take(10).collect::<String>());
    let label = opt_str(v, "label").or(date).or(commit).unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    Ok(PerfFile { label, cases })
}

/// Reads a comparison file's JSON. A file of raw samples (a perf record) is refused with a
/// message saying how to produce the comparison.
pub fn comparisons(v: &Value, path: &Path) -> Result<Vec<Comparison>, ReportError> {
    let list = entries(v, &["comparisons", "cases"], path)?;
    let drift = drift_of(v);
    let mut out = Vec::with_capacity(list.len());
    for (i, c) in list.iter().enumerate() {
        let at = format!("cases[{i}]");
        let verdict = match c.get("verdict").and_then(Value::as_str) {
            // Any case, as the report always read it: `regression` is REGRESSION.
            Some(s) => serde_json::from_value::<Verdict>(Value::String(s.to_ascii_uppercase()))
                .map_err(|_| {
                    field_err(
                        path,
                        &format!("{at}.verdict"),
                        &format!(
                            "`{s}` is no verdict (REGRESSION, IMPROVEMENT, UNCHANGED, \
                             INCONCLUSIVE, ONLY_IN_BASELINE or ONLY_IN_CANDIDATE)"
                        ),
                    )
                })?,
            None if c.get("samples_us").is_some() => {
                return Err(ReportError::BaselineIsRecord {
                    path: path.to_path_buf(),
                })
            }
            None => {
                return Err(field_err(
                    path,
                    &format!("{at}.verdict"),
                    "missing or not a string",
                ))
            }
        };
        let id = opt_str(c, "id")
            .ok_or_else(|| field_err(path, &format!("{at}.id"), "missing or not a string"))?;
        let ci = match (
            opt_f64(c, "ci_low", path, &at)?,
            opt_f64(c, "ci_high", path, &at)?,
        ) {
            (Some(lo), Some(hi)) => Some((lo, hi)),
            _ => match c.get("ci").and_then(Value::as_array) {
                Some(a) if a.len() == 2 => match (a[0].as_f64(), a[1].as_f64()) {
                    (Some(lo), Some(hi)) => Some((lo, hi)),
                    _ => return Err(field_err(path, &format!("{at}.ci"), "expected [low, high]")),
                },
                Some(_) => {
                    return Err(field_err(path, &format!("{at}.ci"), "expected [low, high]"))
                }
                None => None,
            },
        };
        let ratio = opt_f64(c, "ratio", path, &at)?;
        // The p-value the CLI's table shows for the same row (one rule, in the metadata).
        let p_value = match opt_f64(c, "p_value", path, &at)? {
            Some(p) => Some(p),
            None => conform_metadata::compare::directed_p_value(
                ratio,
                opt_f64(c, "p_slower", path, &at)?,
                opt_f64(c, "p_faster", path, &at)?,
            ),
        };
        let target = opt_str(c, "target").unwrap_or_default();
        let hardware = opt_str(c, "hardware");
        let key = (id.clone(), target.clone(), hardware.clone());
        out.push(Comparison {
            drift: drift
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, w)| w.clone()),
            id,
            target,
            ratio,
            ci,
            p_value,
            baseline_median_us: first_f64(c, &[&["baseline", "median_us"]], path, &at)?,
            candidate_median_us: first_f64(c, &[&["candidate", "median_us"]], path, &at)?,
            verdict,
            reason: opt_str(c, "reason").unwrap_or_default(),
            hardware,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_minimal_record_and_computes_median() {
        let v = json!({"cases": [{"id": "a", "target": "t", "samples_us": [3.0, 1.0, 2.0, 10.0]}]});
        let f = perf_file(&v, Path::new("/x/base.json")).unwrap();
        assert_eq!(f.label, "base");
        assert_eq!(f.cases[0].median_us, Some(2.5));
        assert_eq!(f.cases[0].budget_us, None);
    }

    #[test]
    fn reads_the_shapes_conform_perf_writes() {
        let rec = json!({"schema": "conform-perf/1",
            "environment": {"commit": "0123456789abcdef", "date": "2026-11-21T02:03:04Z"},
            "cases": [{"id": "a", "target": "t", "hardware": "atlas-800i-a2",
                "samples_us": [10.0, 12.0, 11.0], "flops": 1e9, "bytes": 1e6,
                "roofline": {"hardware": "atlas-800i-a2", "dtype": "bf16", "time_us": 11.0,
                    "achieved_tflops": 90.9, "achieved_gbps": 90.9, "floor_us": 3.2,
                    "bound": "compute", "fraction_of_peak": 0.29, "implausible": false},
                "budget": {"max_us": 12.5, "min_roofline_fraction": 0.25}}]});
        let f = perf_file(&rec, Path::new("n.json")).unwrap();
        assert_eq!(f.label, "2026-11-21 02:03");
        let c = &f.cases[0];
        assert_eq!((c.median_us, c.budget_us), (Some(11.0), Some(12.5)));
        assert_eq!(c.roofline_fraction, Some(0.29));
        assert_eq!(c.min_roofline_fraction, Some(0.25));
        assert!(!c.implausible);
        let cmp = json!({"config": {"threshold": 0.03}, "cases": [
            {"id": "a", "target": "t", "hardware": null, "verdict": "REGRESSION",
             "baseline": {"samples": 30, "median_us": 10.0, "location_us": 10.0, "outliers": 0},
             "candidate": {"samples": 30, "median_us": 11.0, "location_us": 11.0, "outliers": 1},
             "ratio": 1.1, "ci_low": 1.08, "ci_high": 1.12, "p_slower": 1e-9, "p_faster": 1.0,
             "reason": "lower bound 1.08 > 1.03"},
            {"id": "b", "target": "t", "verdict": "ONLY_IN_BASELINE",
             "baseline": {"samples": 3, "median_us": 5.0, "location_us": 5.0, "outliers": 0},
             "candidate": null, "ratio": null, "ci_low": null, "ci_high": null,
             "p_slower": null, "p_faster": null, "reason": "the candidate has no samples"}]});
        let c = comparisons(&cmp, Path::new("c.json")).unwrap();
        assert_eq!(c[0].p_value, Some(1e-9));
        assert_eq!(
            (c[0].baseline_median_us, c[0].candidate_median_us),
            (Some(10.0), Some(11.0))
        );
        assert_eq!(c[0].reason, "lower bound 1.08 > 1.03");
        assert_eq!(
            (c[1].ratio, c[1].ci, c[1].candidate_median_us),
            (None, None, None)
        );
    }

    #[test]
    fn names_the_bad_field() {
        let v = json!({"cases": [{"id": "a", "samples_us": [1.0, "x"]}]});
        let e = perf_file(&v, Path::new("p.json")).unwrap_err().to_string();
        assert!(e.contains("cases[0].samples_us"), "{e}");
        let v = json!({"runs": []});
        let e = perf_file(&v, Path::new("p.json")).unwrap_err().to_string();
        assert!(e.contains("`cases`"), "{e}");
    }

    #[test]
    fn comparisons_accept_both_ci_spellings_and_refuse_records() {
        let v = json!({"comparisons": [
            {"id": "a", "target": "t", "ratio": 1.1, "ci_low": 1.05, "ci_high": 1.15, "verdict": "REGRESSION", "p_value": 1e-6},
            {"id": "b", "ratio": 1.0, "ci": [0.98, 1.02], "verdict": "UNCHANGED"}
        ]});
        let c = comparisons(&v, Path::new("c.json")).unwrap();
        assert_eq!(c[0].ci, Some((1.05, 1.15)));
        assert_eq!(c[1].ci, Some((0.98, 1.02)));
        let rec = json!({"cases": [{"id": "a", "samples_us": [1.0]}]});
        assert!(matches!(
            comparisons(&rec, Path::new("r.json")),
            Err(ReportError::BaselineIsRecord { .. })
        ));
    }

    #[test]
    fn verdicts_are_the_metadata_type_in_any_case_and_other_words_are_refused() {
        let v = json!({"cases": [
            {"id": "a", "verdict": "regression"},
            {"id": "b", "verdict": "ONLY_IN_CANDIDATE"}
        ]});
        let c = comparisons(&v, Path::new("c.json")).unwrap();
        assert_eq!(c[0].verdict, Verdict::Regression);
        assert_eq!(c[1].verdict, Verdict::OnlyInCandidate);
        let bad = json!({"cases": [{"id": "a", "verdict": "WORSE"}]});
        let e = comparisons(&bad, Path::new("c.json"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cases[0].verdict") && e.contains("`WORSE`"),
            "{e}"
        );
    }
}
