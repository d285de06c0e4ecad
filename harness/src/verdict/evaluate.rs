//! Judging one output: checks the inputs, runs the comparison passes a policy needs, and
//! decides pass/fail with the policy's rule. Formulas and sources: docs/verdicts.md.

use super::check_policy::CheckPolicy;
use super::comparison::{byte_length_ok, fits, Comparison};
use super::heatmap::HeatGeometry;
use super::kernel::{run_baseline_pass, run_pass};
use super::metrics::{fill_metrics, PassConfig, PassStats};
use super::policies::Verdict;
use super::policy::PolicyError;
use super::subnormal::subnormal_stratum;
use crate::results::OutputMetrics;
use conform_reference::ops::{ElemType, Tensor, TensorSpec};
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
    #[error("output `{output}`: the unwritten mask has {got} flags for {want} elements")]
    UnwrittenMaskLength {
        output: String,
        got: usize,
        want: usize,
    },
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

/// The harness-side tensors a comparison brings, checked: the oracle and the baseline (each
/// present when given; an error when the policy needs one that is missing).
fn checked_sides<'a>(
    policy: &CheckPolicy,
    cmp: &Comparison<'a>,
) -> Result<(Option<&'a Tensor>, Option<&'a Tensor>), VerdictError> {
    let spec = cmp.spec;
    let needs = policy.needs();
    let missing = |tensor| VerdictError::MissingTensor {
        output: spec.name.clone(),
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
            output: spec.name.clone(),
            pattern: p,
            dtype: spec.dtype.name(),
        });
    }
    let numel = cmp.expected.data.len() / spec.dtype.size_bytes();
    if let Some(mask) = cmp.unwritten.filter(|m| m.len() != numel) {
        return Err(VerdictError::UnwrittenMaskLength {
            output: spec.name.clone(),
            got: mask.len(),
            want: numel,
        });
    }
    Ok((oracle, baseline))
}

/// The target's own faults in form (wrong dtype or shape, malformed length), if any.
fn form_fault(actual: &Tensor, spec: &TensorSpec) -> Option<String> {
    if actual.dtype != spec.dtype {
        return Some(format!(
            "wrong dtype: expected {}, got {}",
            spec.dtype.name(),
            actual.dtype.name()
        ));
    }
    if actual.shape != spec.shape {
        return Some(format!(
            "wrong shape: expected {:?}, got {:?}",
            spec.shape, actual.shape
        ));
    }
    if !byte_length_ok(actual) {
        return Some(format!(
            "malformed output: {} bytes for {}",
            actual.data.len(),
            describe(actual.dtype, &actual.shape)
        ));
    }
    None
}

/// `x` as a message names it: `+Inf`, `-Inf`, `NaN` or the number.
fn value_class(x: f64) -> String {
    if x.is_nan() {
        "NaN".to_string()
    } else if x == f64::INFINITY {
        "+Inf".to_string()
    } else if x == f64::NEG_INFINITY {
        "-Inf".to_string()
    } else {
        format!("{x}")
    }
}

/// The reasons every policy shares: unwritten and non-finite elements, and (for a policy
/// that is not exact) NaN/Inf on the expected side.
fn common_reasons(st: &PassStats, exact: bool, spec: &TensorSpec, two_fills: bool) -> Vec<String> {
    let mut reasons = Vec::new();
    if st.unwritten > 0 {
        let how = if two_fills {
            "held the poison pattern under both fills (the primary and the alternate pattern)"
        } else {
            "still hold the poison pattern"
        };
        reasons.push(format!(
            "unwritten: {} of {} elements {how}",
            st.unwritten, st.numel
        ));
    }
    if st.non_finite > 0 {
        reasons.push(format!(
            "non-finite: {} elements are NaN/Inf where the value judged against is finite",
            st.non_finite
        ));
    }
    let other_non_comparable = st.non_comparable - st.non_finite;
    if !exact && other_non_comparable > 0 {
        // An element whose class differs from the expected one (+Inf expected, -Inf or a
        // number or NaN returned) is the kernel's result, not a suite mistake: say where.
        let differs = st
            .worst
            .first_non_comparable()
            .filter(|c| !(c.actual.is_nan() && c.golden.is_nan()) && c.actual != c.golden);
        match differs {
            Some(c) => reasons.push(format!(
                "{other_non_comparable} elements are NaN/Inf on the expected side and the output differs: expected {}, got {} at {}",
                value_class(c.golden),
                value_class(c.actual),
                super::index::format_index(c.flat, &spec.shape, &spec.axes)
            )),
            None => reasons.push(format!(
                "{other_non_comparable} elements are NaN/Inf on the expected side (a numeric policy cannot pass them; use bitwise or ulp)"
            )),
        }
    }
    reasons
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
    let dtype = spec.dtype;
    let judge = policy.judge();
    policy
        .validate_for(dtype)
        .map_err(|source| VerdictError::Policy {
            output: spec.name.clone(),
            source,
        })?;
    let (oracle, baseline) = checked_sides(policy, cmp)?;
    let uses_oracle = judge.against_oracle() && oracle.is_some();
    let mut label = policy.label(dtype);
    if uses_oracle {
        label.push_str(" vs oracle");
    }
    if let Some(reason) = form_fault(cmp.actual, spec) {
        return Ok(failed(label, reason));
    }
    let golden = match oracle {
        Some(o) if uses_oracle => o,
        _ => cmp.expected,
    };
    let heat = HeatGeometry::for_axes(&spec.shape, &spec.axes);
    let small_value = judge.small_value(dtype);
    // A baseline pass first where the policy compares against one.
    let mut base = match (baseline, oracle) {
        (Some(b), Some(o)) if judge.needs().baseline => {
            Some(run_baseline_pass(b, o, small_value, threads))
        }
        _ => None,
    };
    let cfg = PassConfig {
        rule: judge.rule(dtype, base.as_ref()),
        poison: cmp.poison,
        unwritten: cmp.unwritten,
        small_value,
        heat: heat.as_ref(),
        worst: true,
    };
    let mut st = run_pass(cmp.actual, cmp.expected, golden, &cfg, threads);
    // The baseline NaN/Inf where the oracle is finite, while the target judged against the
    // same oracle has no such element: the harness's own recipe is at fault. (A baseline that
    // is finite where the oracle is infinite is not: it is left out of the baseline's
    // figures, as the target's matched infinities are left out of its own.)
    if let Some(b) = &base
        && b.non_finite > 0
        && st.non_comparable == 0
        && st.unwritten == 0
    {
        return Err(VerdictError::BaselineNotFinite {
            output: spec.name.clone(),
            count: b.non_finite,
        });
    }
    // The subnormal stratum, judged on its own where the policy asks (module `subnormal`).
    if let (Some(b), Some(bst), Some(o)) = (baseline, base.as_mut(), oracle)
        && judge.judges_subnormal_stratum()
    {
        st.subnormal = subnormal_stratum(cmp.actual, o, spec);
        bst.subnormal = subnormal_stratum(b, o, spec);
    }
    let mut verdict = Verdict {
        reasons: common_reasons(&st, judge.exact(), spec, cmp.unwritten.is_some()),
        extra: Vec::new(),
    };
    judge.verdict(dtype, &st, base.as_ref(), &mut verdict);
    let mut m = fill_metrics(st, &spec.shape, &spec.axes, true, heat);
    m.policy = label;
    m.extra.extend(verdict.extra);
    m.passed = verdict.reasons.is_empty();
    m.reason = verdict.reasons.join("; ");
    Ok(m)
}
