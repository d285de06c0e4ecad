//! Judging a target's outputs: each output of the op against the expected one (and the exact
//! oracle's, where the policy asks for it) under its check policy.

use super::{evaluate, two_fill, CheckPolicy, Comparison, VerdictError};
use crate::results::OutputMetrics;
use conform_reference::ops::{OpDescription, TensorMap};
use conform_reference::parallel::Threads;
use std::collections::BTreeMap;

/// Why outputs could not be judged (an error of the harness, not a failed check).
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    /// The reference produced no output of this name.
    #[error("the reference produced no `{0}`")]
    NoExpected(String),
    /// The comparison cannot be made.
    #[error(transparent)]
    Compare(#[from] VerdictError),
}

/// The metrics of every output `desc` lists: `outputs` (the target's) against `expected`
/// (and `oracle`, the exact outputs, when given) under `policies`. A missing output fails its
/// check; an output the reference did not produce, or a comparison that cannot be made, is an
/// error. `alternate` holds the outputs of the same request under the alternate poison fill,
/// when the runner made that execution: an integer output's element is then unwritten only
/// where it held both patterns ([`super::two_fill`]).
pub fn judge(
    desc: &OpDescription,
    policies: &BTreeMap<String, CheckPolicy>,
    expected: &TensorMap,
    oracle: Option<&TensorMap>,
    outputs: &TensorMap,
    alternate: Option<&TensorMap>,
    threads: Threads,
) -> Result<BTreeMap<String, OutputMetrics>, JudgeError> {
    let mut metrics = BTreeMap::new();
    for spec in &desc.outputs {
        let policy = &policies[&spec.name];
        let want = expected
            .get(&spec.name)
            .ok_or_else(|| JudgeError::NoExpected(spec.name.clone()))?;
        let Some(actual) = outputs.get(&spec.name) else {
            metrics.insert(
                spec.name.clone(),
                OutputMetrics {
                    policy: policy.label(spec.dtype),
                    passed: false,
                    reason: "output missing".into(),
                    ..Default::default()
                },
            );
            continue;
        };
        let poison = [conform_targets::poison::pattern_bits(spec.dtype)];
        let mut cmp = Comparison::new(spec, actual, want).with_poison(&poison);
        let mask = alternate
            .and_then(|a| a.get(&spec.name))
            .and_then(|second| two_fill::unwritten_mask(spec, actual, second));
        if let Some(mask) = &mask {
            cmp = cmp.with_unwritten(mask);
        }
        if let Some(o) = oracle.and_then(|o| o.get(&spec.name)) {
            cmp = cmp.with_oracle(o).with_baseline(want);
        }
        let mut m = evaluate(policy, &cmp, threads)?;
        if let Some(mask) = mask.as_deref().filter(|_| !m.passed)
            && let Some(why) = two_fill::written_poison_reason(spec, actual, want, mask)
        {
            m.reason = format!("{}; {why}", m.reason);
        }
        metrics.insert(spec.name.clone(), m);
    }
    Ok(metrics)
}
