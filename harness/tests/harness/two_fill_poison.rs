//! Unwritten integer outputs are told from written ones by two poison fills: int8's primary
//! pattern 0xA5 is -91, a value a kernel may write. A scripted target that writes a wrong -91
//! is told what was expected there, never that the element is unwritten; one that leaves an
//! element unwritten is still called unwritten (where the expected value is -91 too, by the
//! determinism repeat); float outputs keep their one pattern and their message.

use conform_harness::case_data::generate_inputs;
use conform_harness::results::Status;
use conform_harness::runner::{run_trial, RunOptions};
use conform_harness::suite::select::load_all;
use conform_harness::suite::{Case, Tier};
use conform_reference::ops::{self, ElemType, TensorMap};
use conform_reference::parallel::Threads;
use conform_targets::poison::Fill;
use conform_targets::reference_target::ReferenceTarget;
use conform_targets::target::{
    Availability, Capabilities, ExecRequest, Execution, Target, TargetError,
};
use std::path::Path;

/// What the scripted target does to one element of the output of `dtype`, after computing
/// the case's recipe.
#[derive(Clone, Copy)]
enum Script {
    /// Writes -91 (the primary pattern's value) at the first element expected otherwise.
    WritesMinus91,
    /// Leaves the first element expected other than -91 as the buffer held it (the fill).
    LeavesUnwritten,
    /// Leaves the first element whose expected value is -91 as the buffer held it.
    LeavesUnwrittenWhereMinus91IsExpected,
}

/// The reference, then the script on the first output of `dtype`; counts its executions by
/// fill.
struct Scripted {
    reference: ReferenceTarget,
    script: Script,
    dtype: ElemType,
    calls: Vec<Fill>,
}

impl Target for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn availability(&mut self) -> Availability {
        self.reference.availability()
    }
    fn capabilities(&mut self) -> Capabilities {
        self.reference.capabilities()
    }
    fn execute(&mut self, request: &ExecRequest) -> Result<Execution, TargetError> {
        self.calls.push(request.poison);
        let mut exec = self.reference.execute(request)?;
        let (name, t) = first_of(&mut exec.outputs, self.dtype);
        let w = t.dtype.size_bytes();
        let minus91 = Fill::Primary.bytes(t.dtype);
        let at = |want_minus91: bool| {
            t.data
                .chunks_exact(w)
                .position(|c| (c == minus91.as_slice()) == want_minus91)
        };
        let (i, bytes) = match self.script {
            Script::WritesMinus91 => (at(false), minus91.clone()),
            Script::LeavesUnwritten => (at(false), request.poison.bytes(t.dtype)),
            // Input set 0 has such an element (`int8_case`); another set may not.
            Script::LeavesUnwrittenWhereMinus91IsExpected => {
                (at(true), request.poison.bytes(t.dtype))
            }
        };
        if let Some(i) = i {
            t.data[i * w..(i + 1) * w].copy_from_slice(&bytes);
        } else {
            assert!(request.input_set > 0, "`{name}` has no element to script");
        }
        Ok(exec)
    }
}

fn first_of(
    outputs: &mut TensorMap,
    dtype: ElemType,
) -> (String, &mut conform_reference::ops::Tensor) {
    outputs
        .iter_mut()
        .find(|(_, t)| t.dtype == dtype)
        .map(|(k, t)| (k.clone(), t))
        .expect("an output of the dtype")
}

/// The first quick dynamic-quant case (an int8 output and an f32 scale output) whose int8
/// output on its own seed holds -91 somewhere and other values elsewhere.
fn int8_case() -> Case {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    load_all(&root.join("suites"))
        .unwrap()
        .into_iter()
        .filter(|c| c.op == "dynamic_quant" && c.tier == Tier::Quick)
        .find(|c| {
            let family = ops::find(&c.op).unwrap();
            let inputs = generate_inputs(c, c.seed).unwrap();
            let mut out = family
                .run(&c.params, &c.recipe, &inputs, Threads(2))
                .unwrap();
            assert!(out.values().any(|t| t.dtype == ElemType::F32));
            let (_, y) = first_of(&mut out, ElemType::I8);
            let n = y.data.iter().filter(|&&b| b == 0xA5).count();
            n > 0 && n < y.data.len()
        })
        .expect("a quick dynamic_quant case whose int8 output holds -91")
}

fn run(script: Script, dtype: ElemType) -> (conform_harness::results::CaseResult, Vec<Fill>) {
    let case = int8_case();
    let mut target = Scripted {
        reference: ReferenceTarget::new(Threads(2)),
        script,
        dtype,
        calls: Vec::new(),
    };
    let r = run_trial(&case, &mut target, case.seed, &RunOptions::default());
    (r, target.calls)
}

#[test]
fn a_written_wrong_minus_91_is_told_what_was_expected_not_unwritten() {
    let (r, calls) = run(Script::WritesMinus91, ElemType::I8);
    assert_eq!(r.status, Status::Failed, "{}", r.message);
    assert!(!r.message.contains("unwritten"), "{}", r.message);
    assert!(
        r.message
            .contains("1 element(s) written with -91 (the value of the poison pattern"),
        "{}",
        r.message
    );
    assert!(r.message.contains(", got -91 at "), "{}", r.message);
    let expected = r
        .message
        .split("expected ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .expect("the expected value is stated");
    assert_ne!(expected.parse::<i8>().unwrap(), -91, "{}", r.message);
    let y = r.metrics.values().find(|m| !m.passed).unwrap();
    assert_eq!(y.unwritten, 0);
    // The set under the primary fill, then the same request under the alternate one.
    assert_eq!(calls[..2], [Fill::Primary, Fill::Alternate]);
}

#[test]
fn an_element_left_unwritten_is_still_called_unwritten() {
    let (r, calls) = run(Script::LeavesUnwritten, ElemType::I8);
    assert_eq!(r.status, Status::Failed, "{}", r.message);
    assert!(
        r.message.contains("unwritten: 1 of ")
            && r.message
                .contains("elements held the poison pattern under both fills"),
        "{}",
        r.message
    );
    assert!(!r.message.contains("written with -91"), "{}", r.message);
    assert_eq!(calls[..2], [Fill::Primary, Fill::Alternate]);
}

#[test]
fn an_unwritten_element_whose_expected_value_is_the_pattern_is_caught_by_the_repeat() {
    let (r, calls) = run(Script::LeavesUnwrittenWhereMinus91IsExpected, ElemType::I8);
    assert_eq!(r.status, Status::Failed, "{}", r.message);
    // Every input set's verdict passed (the bits are the expected ones); the determinism
    // repeat, under the alternate fill, tells.
    assert!(r.metrics.values().all(|m| m.passed), "{:?}", r.metrics);
    assert!(
        r.message.starts_with("unwritten: `")
            && r.message
                .contains("elements held the poison pattern on both calls"),
        "{}",
        r.message
    );
    assert!(!r.message.contains("not deterministic"), "{}", r.message);
    assert_eq!(calls.last(), Some(&Fill::Alternate));
    assert!(calls[..calls.len() - 1].iter().all(|&f| f == Fill::Primary));
}

#[test]
fn a_float_element_left_unwritten_keeps_its_one_pattern_and_message() {
    let (r, calls) = run(Script::LeavesUnwritten, ElemType::F32);
    assert_eq!(r.status, Status::Failed, "{}", r.message);
    assert!(
        r.message.contains("elements still hold the poison pattern"),
        "{}",
        r.message
    );
    // No second fill was needed to tell.
    assert!(calls.iter().all(|&f| f == Fill::Primary), "{calls:?}");
}
