//! The anti-cheat double run: every part of it in one place.
//!
//! A target never sees golden data, but a worker could still return a cached result keyed on
//! the case id or the input shapes. The runner therefore runs every worker case on at least
//! two input sets of the same shapes, the second generated from [`second_run_seed`], and
//! checks each result against its own expectation: a cached answer fails the second set.
//! [`identical_outputs`] names the blatant case (outputs bitwise identical although the inputs
//! differ) so the message says why the second set failed.

use conform_targets::{ExecRequest, Execution, REFERENCE_TARGET};

/// How many input sets a worker case runs on by default.
pub const DEFAULT_INPUT_SETS: u32 = 2;

/// How many input sets a case runs on for the target named `target`: 1 for the in-process
/// reference (it is the expectation); for every other target the configured count, never
/// fewer than [`DEFAULT_INPUT_SETS`] (the double run is not optional).
pub fn input_sets(target: &str, configured: u32) -> u32 {
    if target == REFERENCE_TARGET {
        1
    } else {
        configured.max(DEFAULT_INPUT_SETS)
    }
}

/// The seed of the input set after the one generated from `seed` (different inputs, the same
/// shapes).
pub fn second_run_seed(seed: u64) -> u64 {
    seed ^ conform_reference::splitmix::GAMMA
}

/// `Some(message)` when two runs on different inputs produced bitwise identical outputs
/// (a cached result). Ops whose outputs legitimately ignore the differing inputs make the
/// harness generate inputs that differ where it matters; this check is evidence for the
/// message, the verdict against each run's own expectation is what fails the case.
pub fn identical_outputs(
    first: (&ExecRequest, &Execution),
    second: (&ExecRequest, &Execution),
) -> Option<String> {
    if first.0.inputs == second.0.inputs || first.1.outputs.is_empty() {
        return None;
    }
    if first.1.outputs == second.1.outputs {
        Some(format!(
            "input sets {} and {} differ but every output is bitwise identical: the target \
             returned a cached result",
            first.0.input_set, second.0.input_set
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conform_reference::ops::{Tensor, TensorMap};

    /// A request with these inputs.
    fn request(input_set: u32, inputs: TensorMap) -> ExecRequest {
        ExecRequest {
            case_id: "c".into(),
            input_set,
            op: "op".into(),
            params: serde_json::json!({}),
            recipe: None,
            inputs,
            expected_outputs: vec![],
            poison: Default::default(),
            timing: None,
        }
    }

    fn one(name: &str, v: f32) -> TensorMap {
        let mut m = TensorMap::new();
        m.insert(name.into(), Tensor::from_f32(vec![1], &[v]));
        m
    }

    #[test]
    fn workers_run_at_least_twice_and_the_reference_once() {
        assert_eq!(input_sets(REFERENCE_TARGET, 5), 1);
        assert_eq!(
            input_sets("w", 0),
            2,
            "a worker never runs fewer than two sets"
        );
        assert_eq!(input_sets("w", 3), 3);
    }

    #[test]
    fn the_second_seed_differs_and_is_fixed() {
        for seed in [0u64, 1, 0xDEAD_BEEF, u64::MAX] {
            let s = second_run_seed(seed);
            assert_ne!(s, seed);
            assert_eq!(
                second_run_seed(s),
                seed,
                "an involution: set 2 of set 1 is set 0"
            );
        }
    }

    #[test]
    fn identical_outputs_on_different_inputs_are_named() {
        let (first, second) = (request(0, one("x", 1.0)), request(1, one("x", 2.0)));
        let e = Execution {
            outputs: one("y", 5.0),
            ..Default::default()
        };
        let msg = identical_outputs((&first, &e), (&second, &e)).unwrap();
        assert!(msg.contains("input sets 0 and 1"), "{msg}");
        assert!(msg.contains("cached result"), "{msg}");
        // Same inputs: no evidence either way.
        assert!(identical_outputs((&first, &e), (&first, &e)).is_none());
        // No outputs: nothing to compare.
        let empty = Execution::default();
        assert!(identical_outputs((&first, &empty), (&second, &empty)).is_none());
        let f = Execution {
            outputs: one("y", 6.0),
            ..Default::default()
        };
        assert!(identical_outputs((&first, &e), (&second, &f)).is_none());
    }
}
