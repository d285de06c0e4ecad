//! The worker target against deliberately misbehaving workers (targets/tests/workers/).
//! Every wait is bounded by small timeouts: these tests never hang.

use conform_metadata::Status;
use conform_reference::ops::{ElemType, Tensor, TensorMap, TensorSpec};
use conform_targets::poison;
use conform_targets::worker::config::{Limits, ResolvedConfig, Timeouts};
use conform_targets::{
    Availability, ExecRequest, ExitReason, Target, TargetError, TimingRequest, WorkerTarget,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use conform_test_support::trials;

fn main() {
    // Only the helper round trip needs the venv (numpy); the misbehaving worker is stdlib-only.
    let venv = (!repo().join(".venv/bin/python").exists()
        && conform_targets::registry::required_targets().is_empty())
    .then(|| ".venv is absent: run ci/setup-targets.sh".to_string());
    let test = |name, body, missing| trials::Test {
        name,
        body,
        missing,
    };
    trials::run(vec![
        test("good_worker_round_trip", good_worker_round_trip, None),
        test(
            "timeout_kills_and_restarts",
            timeout_kills_and_restarts,
            None,
        ),
        test(
            "crash_reports_exit_code_and_stderr_then_recovers",
            crash_reports_exit_code_and_stderr_then_recovers,
            None,
        ),
        test(
            "malformed_json_is_a_protocol_error_and_the_worker_restarts",
            malformed_json_is_a_protocol_error_and_the_worker_restarts,
            None,
        ),
        test(
            "every_protocol_violation_restarts_the_worker",
            every_protocol_violation_restarts_the_worker,
            None,
        ),
        test(
            "bad_outputs_are_errors_naming_the_tensor",
            bad_outputs_are_errors_naming_the_tensor,
            None,
        ),
        test(
            "unwritten_outputs_stay_poisoned",
            unwritten_outputs_stay_poisoned,
            None,
        ),
        test(
            "worker_that_never_answers_the_handshake_is_unavailable",
            worker_that_never_answers_the_handshake_is_unavailable,
            None,
        ),
        test(
            "unavailable_handshakes_give_the_reason",
            unavailable_handshakes_give_the_reason,
            None,
        ),
        test(
            "cached_results_are_caught_by_the_double_run",
            cached_results_are_caught_by_the_double_run,
            None,
        ),
        test(
            "python_helper_round_trips_every_float_dtype_and_keeps_poison",
            python_helper_round_trips_every_float_dtype_and_keeps_poison,
            venv.clone(),
        ),
    ])
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Any Python 3 works for the stdlib-only misbehaving worker.
fn python() -> String {
    conform_targets::worker::config::python_interpreter(&repo())
}

fn config(script: &str, args: &[&str], request_s: f64) -> ResolvedConfig {
    let mut env = BTreeMap::new();
    env.insert(
        "PYTHONPATH".to_string(),
        repo().join("targets/python").into_os_string(),
    );
    ResolvedConfig {
        description: "test".into(),
        command: python(),
        args: std::iter::once(
            repo()
                .join("targets/tests/workers")
                .join(script)
                .to_string_lossy()
                .into_owned(),
        )
        .chain(args.iter().map(|s| s.to_string()))
        .collect(),
        env,
        working_dir: repo(),
        device_group: "cpu".into(),
        timeouts: Timeouts {
            handshake_s: 10.0,
            request_s,
            timed_request_s: request_s,
        },
        limits: Limits::default(),
        nondeterministic: None,
    }
}

fn worker(mode: &str) -> WorkerTarget {
    WorkerTarget::new("misbehave", config("misbehave.py", &[mode], 5.0))
}

fn request(case_id: &str, values: &[f32]) -> ExecRequest {
    let mut inputs = TensorMap::new();
    inputs.insert("x".into(), Tensor::from_f32(vec![values.len()], values));
    ExecRequest {
        case_id: case_id.into(),
        input_set: 0,
        op: "double".into(),
        params: json!({"n": values.len(), "dtype": "f32"}),
        recipe: None,
        inputs,
        expected_outputs: vec![TensorSpec::new(
            "y",
            ElemType::F32,
            vec![values.len()],
            &["i"],
        )],
        timing: None,
        poison: Default::default(),
    }
}

fn y(e: &conform_targets::Execution) -> Vec<f32> {
    e.outputs["y"].to_f32_vec().unwrap()
}

fn good_worker_round_trip() {
    let mut w = worker("good");
    match w.availability() {
        Availability::Available {
            description,
            versions,
        } => {
            assert!(description.contains("misbehave good"), "{description}");
            assert!(versions.contains_key("python"));
        }
        other => panic!("{other}"),
    }
    assert!(w.supports("double", &json!({"dtype": "f32"})).is_ok());
    // The handshake's dtype names were parsed once: any spelling of f32 is f32.
    assert_eq!(w.declared_dtypes().of_op("double"), [ElemType::F32]);
    assert!(w.supports("double", &json!({"dtype": "FLOAT32"})).is_ok());
    let skip = w.supports("double", &json!({"dtype": "bf16"})).unwrap_err();
    assert_eq!(
        skip.0,
        "dtype bf16 is not supported for `double` (supported: f32)"
    );
    assert!(w.supports("fa_prefill", &json!({})).is_err());
    let e = w.execute(&request("c1", &[1.0, -2.5, 3.0])).unwrap();
    assert_eq!(y(&e), vec![2.0, -5.0, 6.0]);
    let mut r = request("c2", &[1.0]);
    r.timing = Some(TimingRequest {
        warmup: 1,
        iterations: 4,
    });
    assert_eq!(w.execute(&r).unwrap().timings_us, vec![1.0; 4]);
    r.recipe = Some("fancy".into());
    let e = w.execute(&r).unwrap_err();
    assert_eq!(e.status(), Status::Skipped);
    assert!(e.to_string().contains("plain"), "{e}");
    assert_eq!(w.starts(), 1);
}

fn timeout_kills_and_restarts() {
    let mut w = WorkerTarget::new("misbehave", config("misbehave.py", &["good"], 1.5));
    assert!(w.availability().is_available());
    let t = Instant::now();
    let e = w.execute(&request("hang/1", &[1.0])).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    assert_eq!(e.status(), Status::Timeout);
    match &e {
        TargetError::Timeout {
            seconds,
            stderr_tail,
        } => {
            assert_eq!(*seconds, 1.5);
            assert!(stderr_tail.contains("about to hang"), "{stderr_tail}");
        }
        other => panic!("{other}"),
    }
    // The next case runs on a fresh worker.
    let e = w.execute(&request("after", &[4.0])).unwrap();
    assert_eq!(y(&e), vec![8.0]);
    assert_eq!(w.starts(), 2);
}

fn crash_reports_exit_code_and_stderr_then_recovers() {
    let mut w = worker("good");
    let e = w.execute(&request("crash/1", &[1.0])).unwrap_err();
    assert_eq!(e.status(), Status::Crashed);
    match &e {
        TargetError::Crashed { exit, stderr_tail } => {
            assert_eq!(*exit, ExitReason::Code(3));
            assert!(stderr_tail.contains("device lost"), "{stderr_tail}");
        }
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains("exit code 3"));
    let e = w.execute(&request("segv/1", &[1.0])).unwrap_err();
    match &e {
        TargetError::Crashed { exit, stderr_tail } => {
            assert_eq!(*exit, ExitReason::Signal(11));
            assert!(stderr_tail.contains("about to segfault"), "{stderr_tail}");
        }
        other => panic!("{other}"),
    }
    let e = w.execute(&request("fine", &[0.5])).unwrap();
    assert_eq!(y(&e), vec![1.0]);
    assert_eq!(w.starts(), 3);
}

fn malformed_json_is_a_protocol_error_and_the_worker_restarts() {
    let mut w = worker("good");
    let e = w.execute(&request("malformed", &[1.0])).unwrap_err();
    assert_eq!(e.status(), Status::Error);
    assert!(
        e.to_string().contains("malformed JSON") && e.to_string().contains("this is not json"),
        "{e}"
    );
    let e = w.execute(&request("wrong_id", &[1.0])).unwrap_err();
    assert!(e.to_string().contains("request id"), "{e}");
    assert_eq!(y(&w.execute(&request("ok", &[1.0])).unwrap()), vec![2.0]);

    let mut noisy = worker("stdout_noise");
    let e = noisy.execute(&request("n", &[1.0])).unwrap_err();
    assert!(e.to_string().contains("loading kernels"), "{e}");
}

fn every_protocol_violation_restarts_the_worker() {
    // Whatever the violation (malformed line, another request's id, another output file, a
    // wrong number of times, a negative time), the worker's state is unknown afterwards: the
    // next request goes to a fresh process, and that one answers correctly.
    let timed = |case: &str| {
        let mut r = request(case, &[1.0, 2.0]);
        r.timing = Some(conform_targets::target::TimingRequest {
            warmup: 0,
            iterations: 2,
        });
        r
    };
    let mut w = worker("good");
    let violations = [
        ("malformed", "malformed JSON"),
        ("wrong_id", "request id"),
        ("wrong_outputs_path", "outputs written to"),
        ("wrong_timings", "3 timings for 2 requested iterations"),
        ("negative_time", "invalid time -1"),
    ];
    for (i, (case, says)) in violations.iter().enumerate() {
        let e = w.execute(&timed(case)).unwrap_err();
        assert_eq!(e.status(), Status::Error, "{case}: {e}");
        assert!(
            e.to_string().starts_with("protocol error") && e.to_string().contains(says),
            "{case}: {e}"
        );
        assert_eq!(
            w.starts(),
            i as u32 + 1,
            "{case}: the worker is restarted only on demand"
        );
        let ok = w.execute(&timed("ok")).unwrap();
        assert_eq!(y(&ok), vec![2.0, 4.0], "after {case}");
        assert_eq!(
            w.starts(),
            i as u32 + 2,
            "after {case}: a fresh worker answered"
        );
    }
    // A well-formed report of failure is not a violation: the same worker goes on.
    let before = w.starts();
    assert_eq!(
        w.execute(&timed("error")).unwrap_err().status(),
        Status::Error
    );
    assert_eq!(y(&w.execute(&timed("ok")).unwrap()), vec![2.0, 4.0]);
    assert_eq!(w.starts(), before);
}

fn bad_outputs_are_errors_naming_the_tensor() {
    let mut w = worker("good");
    let e = w.execute(&request("missing", &[1.0, 2.0])).unwrap_err();
    assert_eq!(e.status(), Status::Error);
    assert_eq!(
        e,
        TargetError::Output {
            tensor: "y".into(),
            message: "missing from the worker's output file".into()
        }
    );
    let e = w.execute(&request("wrong_shape", &[1.0, 2.0])).unwrap_err();
    assert!(
        e.to_string().contains("`y`") && e.to_string().contains("[2, 1]"),
        "{e}"
    );
    let e = w.execute(&request("wrong_dtype", &[1.0, 2.0])).unwrap_err();
    assert!(
        e.to_string().contains("`y`") && e.to_string().contains("F64"),
        "{e}"
    );
    let e = w.execute(&request("error", &[1.0])).unwrap_err();
    assert_eq!(e.status(), Status::Error);
    assert!(e.to_string().contains("kernel raised"), "{e}");
    // A worker that reported errors keeps serving.
    assert_eq!(w.starts(), 1);
}

fn unwritten_outputs_stay_poisoned() {
    let mut w = worker("good");
    let e = w.execute(&request("partial", &[1.0, 2.0, 3.0])).unwrap();
    let out = &e.outputs["y"];
    assert_eq!(poison::count_unwritten(out), 2);
    assert_eq!(out.to_f32_vec().unwrap()[0], 2.0);
}

fn worker_that_never_answers_the_handshake_is_unavailable() {
    let mut cfg = config("misbehave.py", &["no_handshake"], 5.0);
    cfg.timeouts.handshake_s = 1.0;
    let mut w = WorkerTarget::new("silent", cfg);
    let t = Instant::now();
    match w.availability() {
        Availability::Unavailable { reason } => {
            assert!(reason.contains("no handshake within 1 s"), "{reason}")
        }
        other => panic!("{other}"),
    }
    assert!(t.elapsed() < Duration::from_secs(6));
    let e = w.execute(&request("c", &[1.0])).unwrap_err();
    assert_eq!(e.status(), Status::Skipped);
    let skip = w.supports("double", &json!({})).unwrap_err();
    assert!(skip.0.contains("unavailable"), "{skip}");
}

fn unavailable_handshakes_give_the_reason() {
    let mut w = worker("unavailable");
    assert_eq!(
        w.availability(),
        Availability::Unavailable {
            reason: "import fancy_kernels failed: no module".into()
        }
    );
    let mut w = worker("bad_version");
    let a = w.availability().to_string();
    assert!(
        a.starts_with("unavailable: ") && a.contains("version 99"),
        "{a}"
    );
    let mut cfg = config("misbehave.py", &[], 5.0);
    cfg.command = "/nonexistent/python".into();
    let mut w = WorkerTarget::new("nope", cfg);
    let a = w.availability().to_string();
    assert!(a.contains("cannot start `/nonexistent/python`"), "{a}");
}

fn cached_results_are_caught_by_the_double_run() {
    let mut w = worker("cached");
    let first = request("double/n3", &[1.0, 2.0, 3.0]);
    let mut second_inputs = TensorMap::new();
    second_inputs.insert("x".into(), Tensor::from_f32(vec![3], &[-7.0, 0.5, 9.0]));
    let second = ExecRequest {
        inputs: second_inputs,
        input_set: 1,
        ..first.clone()
    };
    let a = w.execute(&first).unwrap();
    let b = w.execute(&second).unwrap();
    // Each run is checked against its own expectation: the second is wrong.
    assert_eq!(y(&a), vec![2.0, 4.0, 6.0]);
    assert_ne!(y(&b), vec![-14.0, 1.0, 18.0]);
    assert_eq!(
        y(&b),
        y(&a),
        "the cached worker answers the second set with the first"
    );
    // An honest worker passes both.
    let mut honest = worker("good");
    let a = honest.execute(&first).unwrap();
    let b = honest.execute(&second).unwrap();
    assert_eq!(y(&b), vec![-14.0, 1.0, 18.0]);
    assert_ne!(y(&b), y(&a));
}

/// Tests that need the venv's numpy run only where `.venv` exists, unless targets are
/// required (CI), where a missing venv is a failure.
/// The stdlib-and-numpy helper worker needs the venv; a trial that runs without it fails (CI).
fn helper_worker() -> WorkerTarget {
    let mut w = WorkerTarget::new("helper", config("helper_double.py", &[], 10.0));
    if let Availability::Unavailable { reason } = w.availability() {
        panic!("the python helper worker is unavailable: {reason}; run ci/setup-targets.sh");
    }
    w
}

fn python_helper_round_trips_every_float_dtype_and_keeps_poison() {
    let mut w = helper_worker();
    // F32, F16, BF16 (BF16 handed to the op as bits and rounded back once).
    let mut r = request("h/f32", &[1.5, -3.0, 0.0]);
    assert_eq!(y(&w.execute(&r).unwrap()), vec![3.0, -6.0, 0.0]);
    for dt in [ElemType::F16, ElemType::Bf16] {
        let bits: Vec<u16> = match dt {
            ElemType::F16 => vec![0x3C00, 0xC000, 0x7C00], // 1, -2, inf
            _ => vec![0x3F80, 0xC000, 0x7F80],
        };
        r.inputs
            .insert("x".into(), Tensor::from_bits16(dt, vec![3], &bits));
        r.expected_outputs = vec![TensorSpec::new("y", dt, vec![3], &["i"])];
        let e = w.execute(&r).unwrap();
        let v = e.outputs["y"].to_f32_vec().unwrap();
        assert_eq!(v, vec![2.0, -4.0, f32::INFINITY], "{dt:?}");
    }
    let mut r = request("h/partial", &[1.0, 2.0, 3.0, 4.0]);
    r.op = "double_partial".into();
    let e = w.execute(&r).unwrap();
    assert_eq!(poison::count_unwritten(&e.outputs["y"]), 2);
    let mut r = request("h/timed", &[1.0, 2.0]);
    r.op = "timed_double".into();
    r.timing = Some(TimingRequest {
        warmup: 2,
        iterations: 5,
    });
    let e = w.execute(&r).unwrap();
    assert_eq!(e.timings_us.len(), 5);
    assert_eq!(y(&e), vec![2.0, 4.0]);
    // Untimed ops get wall-clock timings from the helper.
    let mut r = request("h/walltimed", &[1.0]);
    r.timing = Some(TimingRequest {
        warmup: 1,
        iterations: 3,
    });
    let e = w.execute(&r).unwrap();
    assert_eq!(e.timings_us.len(), 3);
    assert!(
        e.notes.iter().any(|n| n.contains("wall time")),
        "{:?}",
        e.notes
    );
    // An op that prints to stdout (Python print and raw fd 1): the helper routes it to
    // stderr and the protocol survives. (The stderr tail of a successful request is best
    // effort: stderr is drained by its own thread, so it is not asserted here.)
    let mut r = request("h/noisy", &[3.0]);
    r.op = "noisy".into();
    for _ in 0..3 {
        assert_eq!(y(&w.execute(&r).unwrap()), vec![6.0]);
    }
    // An op the helper worker does not have.
    let mut r = request("h/none", &[1.0]);
    r.op = "triple".into();
    assert_eq!(w.execute(&r).unwrap_err().status(), Status::Skipped);
}
