//! Judging a target's outputs: each output of the op against the expected one (and the exact
//! oracle's, where the policy asks for it) under its check policy.

use super::{evaluate, CheckPolicy, Comparison};
use crate::results::OutputMetrics;
use conform_reference::ops::{OpDescription, TensorMap};
use conform_reference::parallel::Threads;
use std::collections::BTreeMap;

/// The metrics of every output `desc` lists: `outputs` (the target's) against `expected`
/// (and `oracle`, the exact outputs, when given) under `policies`. A missing output fails its
/// check; an output the reference did not produce, or a comparison that cannot be made, is an
/// error.
pub fn judge(
    desc: &OpDescription,
    policies: &BTreeMap<String, CheckPolicy>,
    expected: &TensorMap,
    oracle: Option<&TensorMap>,
    outputs: &TensorMap,
    threads: Threads,
) -> Result<BTreeMap<String, OutputMetrics>, String> {
    let mut metrics = BTreeMap::new();
    for spec in &desc.outputs {
        let policy = &policies[&spec.name];
        let want = expected
            .get(&spec.name)
            .ok_or_else(|| format!("the reference produced no `{}`", spec.name))?;
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
        if let Some(o) = oracle.and_then(|o| o.get(&spec.name)) {
            cmp = cmp.with_oracle(o).with_baseline(want);
        }
        let m = evaluate(policy, &cmp, threads).map_err(|e| e.to_string())?;
        metrics.insert(spec.name.clone(), m);
    }
    Ok(metrics)
}
