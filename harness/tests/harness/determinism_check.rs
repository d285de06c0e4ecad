//! The runner's determinism check: every trial gives the target input set 0 a second time
//! and the outputs must have the same bits. A kernel one ULP off now and then passes any
//! tolerance (the case below is judged by an error ratio); the repeat catches it. A target
//! that declares itself nondeterministic is judged by the case's checks only, and its result
//! carries the reason.

use conform_harness::results::Status;
use conform_harness::runner::{run_trial, RunOptions};
use conform_harness::suite::select::load_all;
use conform_harness::suite::Case;
use conform_reference::faults;
use conform_reference::parallel::Threads;
use conform_targets::fault_target::FaultTarget;
use conform_targets::target::{
    Availability, Capabilities, ExecRequest, Execution, Target, TargetError,
};
use std::path::Path;

/// A case judged with a tolerance only (no bitwise or ULP check on its largest output).
fn tolerance_case() -> Case {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cases = load_all(&root.join("suites")).unwrap();
    cases
        .into_iter()
        .find(|c| c.id == "pa_decode/bf16/b2-hq4-hkv1-d64-bs32/vllm-v1")
        .expect("the vLLM v1 decode case")
}

fn jitter() -> FaultTarget {
    let f = faults::catalogue()
        .into_iter()
        .find(|f| f.name == "any-nondeterministic-last-ulp")
        .expect("the jitter fault");
    FaultTarget::new(f, Threads(1))
}

/// The jittering target, declared nondeterministic.
struct Declared(FaultTarget);

impl Target for Declared {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn nondeterministic(&self) -> Option<&str> {
        Some("atomics in the split-K reduction")
    }
    fn availability(&mut self) -> Availability {
        self.0.availability()
    }
    fn capabilities(&mut self) -> Capabilities {
        self.0.capabilities()
    }
    fn execute(&mut self, request: &ExecRequest) -> Result<Execution, TargetError> {
        self.0.execute(request)
    }
}

#[test]
fn a_kernel_one_ulp_off_now_and_then_fails_the_repeat() {
    let case = tolerance_case();
    let opts = RunOptions::default();
    let r = run_trial(&case, &mut jitter(), case.seed, &opts);
    assert_eq!(r.status, Status::Failed, "{}", r.message);
    assert!(
        r.message
            .starts_with("not deterministic: input set 0 given again gave other bits: `"),
        "{}",
        r.message
    );
    assert!(r.message.contains("1 of "), "{}", r.message);
    // Every verdict of the input sets themselves passed: only the repeat tells.
    assert!(r.metrics.values().all(|m| m.passed), "{:?}", r.metrics);
    assert_eq!(r.nondeterministic, None);
}

#[test]
fn a_declared_nondeterministic_target_is_judged_by_the_checks_and_says_why() {
    let case = tolerance_case();
    let r = run_trial(
        &case,
        &mut Declared(jitter()),
        case.seed,
        &RunOptions::default(),
    );
    assert_eq!(r.status, Status::Passed, "{}", r.message);
    assert_eq!(
        r.nondeterministic.as_deref(),
        Some("atomics in the split-K reduction")
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["nondeterministic"], "atomics in the split-K reduction");
}

#[test]
fn the_reference_repeats_bit_for_bit() {
    let case = tolerance_case();
    let mut reference = conform_targets::reference_target::ReferenceTarget::new(Threads(2));
    let r = run_trial(&case, &mut reference, case.seed, &RunOptions::default());
    assert_eq!(r.status, Status::Passed, "{}", r.message);
}
