//! Faults of any op: a stray NaN, and the target-level behaviours that the runner's poison
//! and anti-cheat checks must catch.

use super::{Edit, Fault, Requirement, TargetBehaviour};
use crate::ops::fault::tensors::{nan_bytes, set_element};
use crate::ops::{OpError, TensorMap};

/// The element of largest magnitude of the largest floating-point output becomes NaN.
fn nan_in_largest(
    _: &serde_json::Value,
    _: &TensorMap,
    outputs: &mut TensorMap,
) -> Result<bool, OpError> {
    let Some(name) = outputs
        .iter()
        .filter(|(_, t)| t.dtype.is_float() && t.numel() > 0)
        .max_by_key(|(_, t)| t.numel())
        .map(|(n, _)| n.clone())
    else {
        return Ok(false);
    };
    let t = outputs.get_mut(&name).expect("present");
    let values = t.to_f64_vec();
    let Some((i, _)) = values
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite())
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
    else {
        return Ok(false);
    };
    let Some(nan) = nan_bytes(t.dtype) else {
        return Ok(false);
    };
    set_element(t, i, &nan);
    Ok(true)
}

pub(super) static FAULTS: &[Fault] = &[
    Fault {
        name: "any-nan-in-largest-output",
        family: "any",
        ops: &[],
        requirement: Requirement::Quick,
        description: "one output element (the largest in magnitude) is NaN",
        edit: Edit::outputs(nan_in_largest),
    },
    Fault {
        name: "any-last-row-unwritten",
        family: "any",
        ops: &[],
        requirement: Requirement::Quick,
        description:
            "the last row of every output is never written (it keeps whatever the buffer held)",
        edit: Edit::target(TargetBehaviour::LastRowUnwritten),
    },
    Fault {
        name: "any-stale-output",
        family: "any",
        ops: &[],
        requirement: Requirement::Quick,
        description:
            "the previous call's outputs of the same shapes are returned (a cache keyed by shape)",
        edit: Edit::target(TargetBehaviour::StaleOutputByShape),
    },
    Fault {
        name: "any-second-input-set-ignored",
        family: "any",
        ops: &[],
        requirement: Requirement::Quick,
        description: "only the first input set of a case is computed; later sets get its outputs",
        edit: Edit::target(TargetBehaviour::FirstInputSetOnly),
    },
    Fault {
        name: "any-nondeterministic-last-ulp",
        family: "any",
        ops: &[],
        requirement: Requirement::Quick,
        description: "calls after the first give one element of the largest output one ULP off \
             (atomics or a scheduling-dependent reduction order): the same inputs, other bits",
        edit: Edit::target(TargetBehaviour::LastUlpJitter),
    },
];
