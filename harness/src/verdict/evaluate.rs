//! Judging one output: checks the inputs, runs the comparison passes a policy needs, and
//! decides pass/fail with the policy's rule. Formulas and sources: docs/verdicts.md.

use super::comparison::{byte_length_ok, fits, Comparison};
use super::heatmap::HeatGeometry;
use super::metrics::{fill_metrics, run_baseline_pass, run_pass, sat, ElementRule, PassConfig};
use super::policy::{CannDtype, CheckPolicy, PolicyError};
use crate::results::OutputMetrics;
use conform_reference::ops::{ElemType, Tensor};
use conform_reference::parallel::Threads;
use thiserror::Error;

/// The harness could not judge an output (its own inputs are wrong). A wrong output from the
/// target is never an error: it is a failed [`OutputMetrics`].
#[derive(Debug, Error, Clone, PartialEq)]
pub enum VerdictError {
    #[error("output `{output}`: {source}")]
    Policy {
        output: String,
        #[source]
        source: PolicyError,
    },
    #[error("output `{output}`: check policy `{policy}` needs the `{tensor}` tensor")]
    MissingTensor {
        output: String,
        policy: &'static str,
        tensor: &'static str,
    },
    #[error("output `{output}`: the `{tensor}` tensor is {got}, the output is {want}")]
    TensorMismatch {
        output: String,
        tensor: &'static str,
        want: String,
        got: String,
    },
    #[error("output `{output}`: poison pattern {pattern:#x} does not fit dtype {dtype}")]
    PoisonWidth {
        output: String,
        pattern: u64,
        dtype: &'static str,
    },
    #[error(
        "output `{output}`: the baseline has {count} NaN/Inf elements where the oracle is finite"
    )]
    BaselineNotFinite { output: String, count: u64 },
}

fn describe(dtype: ElemType, shape: &[usize]) -> String {
    format!("{} {:?}", dtype.name(), shape)
}

/// Checks a harness-side tensor: `dtype` (or F64 when `f64_ok`), the spec's shape, byte length.
fn check_side(
    cmp: &Comparison<'_>,
    tensor: &'static str,
    t: &Tensor,
    f64_ok: bool,
) -> Result<(), VerdictError> {
    let spec = cmp.spec;
    let dtype_ok = t.dtype == spec.dtype || (f64_ok && t.dtype == ElemType::F64);
    if !dtype_ok || t.shape != spec.shape || !byte_length_ok(t) {
        let want = if f64_ok && spec.dtype != ElemType::F64 {
            format!("{} (or F64) {:?}", spec.dtype.name(), spec.shape)
        } else {
            describe(spec.dtype, &spec.shape)
        };
        let mut got = describe(t.dtype, &t.shape);
        if !byte_length_ok(t) {
            got.push_str(&format!(" with {} bytes", t.data.len()));
        }
        return Err(VerdictError::TensorMismatch {
            output: spec.name.clone(),
            tensor,
            want,
            got,
        });
    }
    Ok(())
}

fn failed(label: String, reason: String) -> OutputMetrics {
    OutputMetrics {
        policy: label,
        passed: false,
        reason,
        ..OutputMetrics::default()
    }
}

/// `n <= limit * b`, and the ratio n / b for reports (0 when n = 0; f64::MAX when only b = 0).
fn ratio(n: f64, b: f64) -> f64 {
    if n == 0.0 {
        0.0
    } else if b == 0.0 {
        f64::MAX
    } else {
        sat(n / b)
    }
}

/// Judges one output tensor under `policy`. The figures do not depend on `threads`.
///
/// Returns `Ok` with `passed == false` for every fault of the target (wrong dtype or shape,
/// unwritten elements, NaN/Inf, numeric errors) and `Err` for faults of the harness (a missing
/// or malformed expected/oracle/baseline tensor, a policy that cannot judge the dtype).
pub fn evaluate(
    policy: &CheckPolicy,
    cmp: &Comparison<'_>,
    threads: Threads,
) -> Result<OutputMetrics, VerdictError> {
    let spec = cmp.spec;
    let output = || spec.name.clone();
    policy
        .validate_for(spec.dtype)
        .map_err(|source| VerdictError::Policy {
            output: output(),
            source,
        })?;
    let needs = policy.needs();
    let missing = |tensor| VerdictError::MissingTensor {
        output: output(),
        policy: policy.name(),
        tensor,
    };
    check_side(cmp, "expected", cmp.expected, false)?;
    let oracle = match cmp.oracle {
        Some(o) => {
            check_side(cmp, "oracle", o, true)?;
            Some(o)
        }
        None if needs.oracle => return Err(missing("oracle")),
        None => None,
    };
    let baseline = match cmp.baseline {
        Some(b) => {
            check_side(cmp, "baseline", b, false)?;
            Some(b)
        }
        None if needs.baseline => return Err(missing("baseline")),
        None => None,
    };
    if let Some(&p) = cmp.poison.iter().find(|&&p| !fits(spec.dtype, p)) {
        return Err(VerdictError::PoisonWidth {
            output: output(),
            pattern: p,
            dtype: spec.dtype.name(),
        });
    }

    let cann = CannDtype::of(spec.dtype);
    let uses_oracle = matches!(
        policy,
        CheckPolicy::CannSingle {}
            | CheckPolicy::CannMixed {}
            | CheckPolicy::CannDouble { .. }
            | CheckPolicy::ErrorRatio { .. }
    ) && oracle.is_some();
    let mut label = policy.label(spec.dtype);
    if uses_oracle {
        label.push_str(" vs oracle");
    }

    // The target's own faults in form.
    let actual = cmp.actual;
    if actual.dtype != spec.dtype {
        return Ok(failed(
            label,
            format!(
                "wrong dtype: expected {}, got {}",
                spec.dtype.name(),
                actual.dtype.name()
            ),
        ));
    }
    if actual.shape != spec.shape {
        return Ok(failed(
            label,
            format!(
                "wrong shape: expected {:?}, got {:?}",
                spec.shape, actual.shape
            ),
        ));
    }
    if !byte_length_ok(actual) {
        return Ok(failed(
            label,
            format!(
                "malformed output: {} bytes for {}",
                actual.data.len(),
                describe(actual.dtype, &actual.shape)
            ),
        ));
    }

    let golden = if uses_oracle {
        oracle.unwrap_or(cmp.expected)
    } else {
        cmp.expected
    };
    let heat = HeatGeometry::for_axes(&spec.shape, &spec.axes);

    // A baseline pass first where the policy compares against one.
    let base = match (policy, baseline, oracle) {
        (CheckPolicy::CannDouble { .. } | CheckPolicy::ErrorRatio { .. }, Some(b), Some(o)) => {
            let small_value = match policy {
                CheckPolicy::CannDouble { .. } => cann.and_then(CannDtype::small_value),
                _ => None,
            };
            Some(run_baseline_pass(b, o, small_value, threads))
        }
        _ => None,
    };

    let small_value = match policy {
        CheckPolicy::CannDouble { .. } => cann.and_then(CannDtype::small_value),
        _ => None,
    };
    let rule = match *policy {
        CheckPolicy::Bitwise { nan_bits } => ElementRule::Bitwise { nan_bits },
        CheckPolicy::Ulp { max } => ElementRule::Ulp { max },
        CheckPolicy::Allclose { atol, rtol, .. } => ElementRule::Allclose { atol, rtol },
        CheckPolicy::CannSingle {} => ElementRule::RelAbove {
            limit: 10.0 * cann.map_or(0.0, CannDtype::threshold),
        },
        CheckPolicy::CannMixed {} => ElementRule::Mixed {
            t: cann.map_or(0.0, CannDtype::threshold),
        },
        CheckPolicy::CannDouble { level } => {
            let b = base.as_ref().map_or(0.0, |b| b.normal_max_rel);
            let (small, small_err) = small_value.unwrap_or((0.0, 0.0));
            ElementRule::CannDouble {
                rel_limit: level.limits().mare * b,
                small,
                small_err,
            }
        }
        CheckPolicy::ErrorRatio {
            max_ratio, atol, ..
        } => ElementRule::AbsAbove {
            limit: max_ratio * base.as_ref().map_or(0.0, |b| b.max_abs) + atol,
        },
    };
    let cfg = PassConfig {
        rule,
        poison: cmp.poison,
        small_value,
        heat: heat.as_ref(),
        worst: true,
    };
    let st = run_pass(actual, cmp.expected, golden, &cfg, threads);

    if let Some(b) = &base
        && b.non_comparable > 0
        && st.non_comparable == 0
        && st.unwritten == 0
    {
        return Err(VerdictError::BaselineNotFinite {
            output: output(),
            count: b.non_comparable,
        });
    }

    let mut reasons: Vec<String> = Vec::new();
    if st.unwritten > 0 {
        reasons.push(format!(
            "unwritten: {} of {} elements still hold the poison pattern",
            st.unwritten, st.numel
        ));
    }
    if st.non_finite > 0 {
        reasons.push(format!(
            "non-finite: {} elements are NaN/Inf where the expected value is finite",
            st.non_finite
        ));
    }
    let numeric_policy = !matches!(
        policy,
        CheckPolicy::Bitwise { .. } | CheckPolicy::Ulp { .. }
    );
    let other_non_comparable = st.non_comparable - st.non_finite;
    if numeric_policy && other_non_comparable > 0 {
        reasons.push(format!(
            "{other_non_comparable} elements are NaN/Inf on the expected side (a numeric policy cannot pass them; use bitwise or ulp)"
        ));
    }

    let mut extra: Vec<(String, f64)> = Vec::new();
    let mut put = |k: &str, v: f64| extra.push((k.to_string(), v));
    match *policy {
        CheckPolicy::Bitwise { .. } => {
            // Unwritten elements are reported above; the rest differ in their bits.
            let differ = st.mismatches - st.unwritten;
            if differ > 0 {
                // ULP distances exist only between numbers: a NaN against a number (an Inf,
                // say) is counted apart, and equal-class NaNs with other bits are named, so a
                // mismatch never reads "max ULP 0".
                let detail = match (st.max_ulp, st.ulp_nan_mismatch) {
                    (0, 0) => "only NaN encodings (payload or sign) differ".to_string(),
                    (0, n) => format!("{n} NaN against a number"),
                    (m, 0) => format!("max ULP {m}"),
                    (m, n) => format!("max ULP {m} between numbers, {n} NaN against a number"),
                };
                reasons.push(format!(
                    "{differ} of {} elements differ bitwise ({detail})",
                    st.numel
                ));
            }
        }
        CheckPolicy::Ulp { max } => {
            if st.mismatches > st.unwritten {
                reasons.push(format!(
                    "{} of {} elements are more than {max} ULP away (max ULP {}, NaN vs number {})",
                    st.mismatches - st.unwritten,
                    st.numel,
                    st.max_ulp,
                    st.ulp_nan_mismatch
                ));
            }
        }
        CheckPolicy::Allclose {
            atol,
            rtol,
            min_matched_ratio,
        } => {
            let matched = if st.numel == 0 {
                1.0
            } else {
                (st.numel - st.mismatches) as f64 / st.numel as f64
            };
            put("matched_ratio", matched);
            if matched < min_matched_ratio {
                reasons.push(format!(
                    "matched ratio {matched} < {min_matched_ratio}: {} elements have |a-e| > {atol} and |a-e|/(|e|+1e-8) > {rtol}",
                    st.mismatches
                ));
            }
        }
        CheckPolicy::CannSingle {} => {
            let t = cann.map_or(0.0, CannDtype::threshold);
            put("threshold", t);
            put("mere_limit", t);
            put("mare_limit", 10.0 * t);
            if st.mere() >= t {
                reasons.push(format!("MERE {} >= T = {t}", st.mere()));
            }
            if st.max_rel >= 10.0 * t {
                reasons.push(format!("MARE {} >= 10T = {}", st.max_rel, 10.0 * t));
            }
        }
        CheckPolicy::CannMixed {} => {
            let t = cann.map_or(0.0, CannDtype::threshold);
            let cap = cann.map_or(0.0, CannDtype::mixed_max_abs);
            let pass_ratio = if st.numel == 0 {
                1.0
            } else {
                (st.numel - st.mismatches) as f64 / st.numel as f64
            };
            put("threshold", t);
            put("pass_ratio", pass_ratio);
            put("max_abs_limit", cap);
            if pass_ratio < 0.99 {
                reasons.push(format!(
                    "only {pass_ratio} of elements satisfy |a-g| <= T + T|g| (T = {t}); 0.99 needed"
                ));
            }
            if st.max_abs > cap {
                reasons.push(format!("max abs error {} > {cap}", st.max_abs));
            }
        }
        CheckPolicy::CannDouble { level } => {
            let b = base.as_ref().expect("baseline pass ran");
            let lim = level.limits();
            let pairs = [
                ("mare", st.normal_max_rel, b.normal_max_rel, lim.mare),
                ("mere", st.normal_mere(), b.normal_mere(), lim.mere),
                ("rmse", st.normal_rmse(), b.normal_rmse(), lim.rmse),
            ];
            for (name, n, bv, limit) in pairs {
                let r = ratio(n, bv);
                put(&format!("npu_{name}"), n);
                put(&format!("baseline_{name}"), bv);
                put(&format!("ratio_{name}"), r);
                put(&format!("limit_{name}"), limit);
                if n > limit * bv {
                    reasons.push(format!(
                        "{} ratio {r} > {limit} ({level:?}): NPU {n}, baseline {bv}",
                        name.to_uppercase()
                    ));
                }
            }
            let allowed = 2 * b.small_err.max(1);
            put("small_values", st.small as f64);
            put("npu_small_errors", st.small_err as f64);
            put("baseline_small_errors", b.small_err as f64);
            put("small_errors_limit", allowed as f64);
            if st.small_err > allowed {
                reasons.push(format!(
                    "{} small values have errors above the threshold; at most {allowed} allowed (baseline {})",
                    st.small_err, b.small_err
                ));
            }
        }
        CheckPolicy::ErrorRatio {
            max_ratio,
            mean_ratio,
            atol,
        } => {
            let b = base.as_ref().expect("baseline pass ran");
            put("npu_max_abs", st.max_abs);
            put("baseline_max_abs", b.max_abs);
            put("ratio_max_abs", ratio(st.max_abs, b.max_abs));
            put("npu_mean_abs", st.mean_abs());
            put("baseline_mean_abs", b.mean_abs());
            put("ratio_mean_abs", ratio(st.mean_abs(), b.mean_abs()));
            if st.max_abs > max_ratio * b.max_abs + atol {
                reasons.push(format!(
                    "max abs error {} > {max_ratio} x baseline {} + {atol}",
                    st.max_abs, b.max_abs
                ));
            }
            if st.mean_abs() > mean_ratio * b.mean_abs() + atol {
                reasons.push(format!(
                    "mean abs error {} > {mean_ratio} x baseline {} + {atol}",
                    st.mean_abs(),
                    b.mean_abs()
                ));
            }
        }
    }

    let mut m = fill_metrics(st, &spec.shape, &spec.axes, true, heat);
    m.policy = label;
    m.extra.extend(extra);
    m.passed = reasons.is_empty();
    m.reason = reasons.join("; ");
    Ok(m)
}
