//! Performance inputs, read loosely from JSON with documented keys (docs/report.md) so the
//! report accepts what `conform perf record`, `conform perf compare --json` and
//! `conform run --perf` write, and samples recorded elsewhere.
//!
//! Perf case (a `cases[]` entry of a perf record file, or a results case's `perf` object):
//! `id`, `target`, `samples_us` (raw samples), optional `median_us`, `budget_us`,
//! `roofline_fraction`, `hardware`.
//! Comparison (an entry of `comparisons[]` or `cases[]`, or of a top-level array):
//! `id`, `target`, `ratio`, `ci_low`/`ci_high` (or `ci: [low, high]`), `verdict`, optional
//! `p_value`.

use super::error::ReportError;
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
    pub roofline_fraction: Option<f64>,
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
    pub p_value: Option<f64>,
    /// REGRESSION, IMPROVEMENT, UNCHANGED or INCONCLUSIVE.
    pub verdict: String,
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
        budget_us: opt_f64(v, "budget_us", path, at)?,
        roofline_fraction: opt_f64(v, "roofline_fraction", path, at)?,
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
    let label = opt_str(v, "label")
        .or_else(|| opt_str(v, "commit"))
        .or_else(|| env.and_then(|e| opt_str(e, "commit")))
        .or_else(|| opt_str(v, "recorded_at"))
        .unwrap_or_else(|| {
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
    let mut out = Vec::with_capacity(list.len());
    for (i, c) in list.iter().enumerate() {
        let at = format!("cases[{i}]");
        let verdict = match c.get("verdict").and_then(Value::as_str) {
            Some(s) => s.to_string(),
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
        out.push(Comparison {
            id,
            target: opt_str(c, "target").unwrap_or_default(),
            ratio: opt_f64(c, "ratio", path, &at)?,
            ci,
            p_value: opt_f64(c, "p_value", path, &at)?,
            verdict,
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
}
