//! The target model: something that runs cases of ops — the in-process reference or an
//! external kernel behind the worker protocol.
//!
//! The harness asks a target for its [`Availability`] and [`Capabilities`], skips (with the
//! [`SkipReason`]) every case outside them, and calls [`Target::execute`] once per input set.
//!
//! # Anti-cheat: the double run
//! A target never sees the golden data. For workers, the harness calls `execute` AT LEAST
//! TWICE per case: once with the case's inputs and once more with a second input set of the
//! same shapes generated from another seed (the harness regenerates; targets cannot). Each
//! result is checked against its own expectation, so a worker that returns a cached result
//! (keyed on shape or case id) fails the second run. [`ExecRequest::input_set`] numbers the
//! runs for reports; the case id is the same for both. See PROTOCOL.md, "Anti-cheat".

use conform_metadata::capabilities::DTYPE_PARAM;
use conform_metadata::Status;
use conform_reference::ops::{ElemType, TensorMap, TensorSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use thiserror::Error;

/// Whether a target can run here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Availability {
    Available {
        /// The device and implementation, in words.
        description: String,
        /// Library name -> version (e.g. `torch_npu`, `CANN`, `onnxruntime`).
        versions: BTreeMap<String, String>,
    },
    Unavailable {
        /// Why, for a human (e.g. the import error).
        reason: String,
    },
}

impl Availability {
    pub fn is_available(&self) -> bool {
        matches!(self, Availability::Available { .. })
    }
}

impl fmt::Display for Availability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Availability::Available {
                description,
                versions,
            } => {
                write!(f, "available: {description}")?;
                if !versions.is_empty() {
                    let v: Vec<String> = versions.iter().map(|(k, v)| format!("{k} {v}")).collect();
                    write!(f, " ({})", v.join(", "))?;
                }
                Ok(())
            }
            Availability::Unavailable { reason } => write!(f, "unavailable: {reason}"),
        }
    }
}

pub use conform_metadata::capabilities::{
    Capabilities, OpCapability, ParamLimit, SkipReason, TimingRequest,
};

/// Each op's declared dtype names, parsed once by the one dtype parser ([`ElemType`]'s
/// `FromStr`) where the capabilities enter (a worker's handshake). A name the parser does not
/// know is left out: it matches no case.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeclaredDtypes(BTreeMap<String, Vec<ElemType>>);

impl DeclaredDtypes {
    /// Parses the declared `dtypes` of every op in `caps`.
    pub fn of(caps: &Capabilities) -> DeclaredDtypes {
        DeclaredDtypes(
            caps.ops
                .iter()
                .map(|(op, cap)| {
                    let parsed = cap.dtypes.iter().filter_map(|d| d.parse().ok()).collect();
                    (op.clone(), parsed)
                })
                .collect(),
        )
    }

    /// The parsed dtypes declared for `op` (empty when none parse or the op is not declared).
    pub fn of_op(&self, op: &str) -> &[ElemType] {
        self.0.get(op).map_or(&[], Vec::as_slice)
    }
}

/// Whether a case of `op` with `params` is within `caps`, whose dtypes `declared` holds parsed;
/// the error is the skip reason. The steps, in order: the op (implemented, runnable here), its
/// dtype, its layouts, its limits. The dtype step compares types: the case's `dtype` is parsed
/// by the one parser, and one that does not parse is outside. The skip reason lists the
/// declared names as the target wrote them, known to the parser or not.
pub fn supports(
    caps: &Capabilities,
    declared: &DeclaredDtypes,
    op: &str,
    params: &serde_json::Value,
) -> Result<(), SkipReason> {
    let cap = caps.op(op)?;
    if !cap.dtypes.is_empty() {
        let Some(d) = params.get(DTYPE_PARAM) else {
            return Err(cap.dtypes_without_dtype_param(op));
        };
        let wanted = d.as_str().and_then(|s| s.parse::<ElemType>().ok());
        if !wanted.is_some_and(|w| declared.of_op(op).contains(&w)) {
            return Err(cap.unsupported_dtype(op, d));
        }
    }
    cap.supports_layouts_and_limits(op, params)
}

/// One execution of one case on one input set.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecRequest {
    /// Stable case id (the same for every input set of the case).
    pub case_id: String,
    /// Which input set this is (0 = the case's seed, 1.. = the anti-cheat re-runs).
    pub input_set: u32,
    pub op: String,
    /// Parameters, with the suites' names.
    pub params: serde_json::Value,
    /// The recipe to emulate: any recipe (or `oracle`) for the reference; for a worker, `None`
    /// (its own numerics) or one of the recipes it declares.
    pub recipe: Option<String>,
    pub inputs: TensorMap,
    /// The outputs the case must produce (names, dtypes, shapes: `OpFamily::describe`'s
    /// `outputs`). Workers get them pre-filled with poison and are checked against them.
    pub expected_outputs: Vec<TensorSpec>,
    /// Which poison pattern the output buffers are pre-filled with ([`crate::poison::Fill`]):
    /// the primary one, or the alternate one when the runner tells unwritten integer elements
    /// from written ones.
    pub poison: crate::poison::Fill,
    /// Timing, when asked for.
    pub timing: Option<TimingRequest>,
}

/// What a target produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Execution {
    pub outputs: TensorMap,
    /// Per-iteration times in microseconds (device times where the target can measure them);
    /// empty when no timing was requested.
    pub timings_us: Vec<f64>,
    /// Per-iteration process CPU time in microseconds, one per timing, where the target
    /// measures it (the in-process reference; a worker that reports `cpu_us`); else empty.
    pub cpu_us: Vec<f64>,
    /// One-time setup (planning, weight repacking), reported but kept out of `timings_us`.
    pub setup_us: Option<f64>,
    /// Free-form notes from the target.
    pub notes: Vec<String>,
    /// The last lines the worker wrote to stderr during this request (empty in-process).
    pub stderr_tail: String,
}

/// How a worker process ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
    /// Closed its stdout without exiting (or the exit status could not be read).
    Unknown,
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitReason::Code(c) => write!(f, "exit code {c}"),
            ExitReason::Signal(s) => write!(f, "signal {s}"),
            ExitReason::Unknown => write!(f, "closed its output"),
        }
    }
}

fn tail_suffix(tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!("\n--- stderr tail ---\n{}", tail.trim_end())
    }
}

/// Why an execution produced no outputs. [`TargetError::status`] maps each to the result
/// status the harness records.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum TargetError {
    /// No answer within the per-request timeout; the worker was killed (and is restarted for
    /// the next case).
    #[error("no answer within {seconds} s; worker killed{}", tail_suffix(.stderr_tail))]
    Timeout { seconds: f64, stderr_tail: String },
    /// The worker process died.
    #[error("worker crashed ({exit}){}", tail_suffix(.stderr_tail))]
    Crashed {
        exit: ExitReason,
        stderr_tail: String,
    },
    /// The worker broke the protocol (malformed JSON, wrong message, bad output file).
    #[error("protocol error: {message}{}", tail_suffix(.stderr_tail))]
    Protocol {
        message: String,
        stderr_tail: String,
    },
    /// An output tensor is missing or has the wrong dtype or shape.
    #[error("output `{tensor}`: {message}")]
    Output { tensor: String, message: String },
    /// The worker reported that the case failed (e.g. the kernel raised).
    #[error("worker reported an error: {message}{}", tail_suffix(.stderr_tail))]
    Worker {
        message: String,
        stderr_tail: String,
    },
    /// The case is outside what the target can do (recorded as `skipped`).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The target is not available here (recorded as `skipped`, or as a failure where the
    /// target is required).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A problem on the harness side (scratch directory, invalid request).
    #[error("internal error: {0}")]
    Internal(String),
}

impl TargetError {
    /// The results status this error is recorded as: timeout, crashed, skipped or error.
    pub fn status(&self) -> Status {
        match self {
            TargetError::Timeout { .. } => Status::Timeout,
            TargetError::Crashed { .. } => Status::Crashed,
            TargetError::Unsupported(_) | TargetError::Unavailable(_) => Status::Skipped,
            TargetError::Protocol { .. }
            | TargetError::Output { .. }
            | TargetError::Worker { .. }
            | TargetError::Internal(_) => Status::Error,
        }
    }
}

/// The device group of targets that run on the host CPU: their trials may overlap.
pub const CPU_DEVICE_GROUP: &str = "cpu";

/// An implementation under test.
///
/// Calls are sequential (`&mut self`); a target may start a process lazily on the first call
/// that needs it. `Send` so the harness may drive different targets from different threads.
pub trait Target: Send {
    /// The target's name (`reference`, `ml_dtypes`, `torch_npu`, ...).
    fn name(&self) -> &str;
    /// The device this target uses (`cpu`, `cuda`, `npu`, ...). Trials of targets in one
    /// group other than [`CPU_DEVICE_GROUP`] never overlap where the harness runs trials
    /// concurrently (the conformance test target: a lock per group in one process, the nextest
    /// `device` test group across processes; see `harness/src/runner/device.rs`), so timings
    /// and device memory do not interfere. `conform run` runs one trial at a time anyway.
    fn device_group(&self) -> &str {
        CPU_DEVICE_GROUP
    }
    /// The reason it gives for being nondeterministic (same inputs, other bits), when it
    /// declares itself so; `None` holds it to bit-identical repeats (the runner's determinism
    /// check).
    fn nondeterministic(&self) -> Option<&str> {
        None
    }
    /// Whether it can run here (a worker answers this by a handshake with a short timeout).
    fn availability(&mut self) -> Availability;
    /// What it can do (empty when unavailable).
    fn capabilities(&mut self) -> Capabilities;
    /// The declared dtypes of [`Target::capabilities`], parsed. A target whose capabilities
    /// are fixed when it starts keeps them parsed from then on.
    fn declared_dtypes(&mut self) -> DeclaredDtypes {
        DeclaredDtypes::of(&self.capabilities())
    }
    /// Whether a case is within the capabilities; the error is the skip reason.
    fn supports(&mut self, op: &str, params: &serde_json::Value) -> Result<(), SkipReason> {
        match self.availability() {
            Availability::Available { .. } => {
                let declared = self.declared_dtypes();
                supports(&self.capabilities(), &declared, op, params)
            }
            Availability::Unavailable { reason } => {
                Err(SkipReason(format!("target unavailable: {reason}")))
            }
        }
    }
    /// Runs one case on one input set. The harness calls this at least twice per case for
    /// workers (see the module docs).
    fn execute(&mut self, request: &ExecRequest) -> Result<Execution, TargetError>;
    /// Starts afresh before the next request: a worker ends its process (the next request
    /// starts a new one), the in-process reference its threads. The A/B rounds call it at the
    /// start of each round, so where a process happened to be placed (a core beside a busy
    /// job, its memory layout, its clock) holds for one round, never for the whole window.
    /// Default: nothing to renew.
    fn renew(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The rule, with the declared dtypes parsed from `c` itself.
    fn check(c: &Capabilities, op: &str, params: &serde_json::Value) -> Result<(), SkipReason> {
        supports(c, &DeclaredDtypes::of(c), op, params)
    }

    fn caps() -> Capabilities {
        let mut limits = BTreeMap::new();
        limits.insert(
            "head_dim".to_string(),
            ParamLimit {
                min: Some(16.0),
                max: Some(512.0),
                one_of: vec![],
            },
        );
        limits.insert(
            "sparse_mode".to_string(),
            ParamLimit {
                one_of: vec![json!(0), json!(2), json!(3)],
                ..Default::default()
            },
        );
        limits.insert(
            "actual_seq_lengths".to_string(),
            ParamLimit {
                max: Some(4096.0),
                ..Default::default()
            },
        );
        let mut ops = BTreeMap::new();
        ops.insert(
            "fa_prefill".to_string(),
            OpCapability {
                dtypes: vec!["f16".into(), "f32".into()],
                layouts: vec!["BSND".into(), "BNSD".into()],
                limits,
                ..Default::default()
            },
        );
        Capabilities { ops }
    }

    #[test]
    fn an_op_found_unavailable_at_the_handshake_skips_with_its_reason() {
        let mut c = caps();
        c.ops.get_mut("fa_prefill").unwrap().unavailable =
            Some("torch_npu 2.1.0 has no float4_e2m1fn_x2".to_string());
        let r = check(&c, "fa_prefill", &json!({"dtype": "f16"})).unwrap_err();
        assert_eq!(
            r.0,
            "op `fa_prefill` cannot run on this target here: torch_npu 2.1.0 has no float4_e2m1fn_x2"
        );
        // The handshake field round-trips through the protocol's JSON.
        let text = serde_json::to_string(&c).unwrap();
        let back: Capabilities = serde_json::from_str(&text).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn supports_checks_op_dtype_layout_and_limits() {
        let c = caps();
        let ok = json!({"dtype": "F16", "input_layout": "BSND", "head_dim": 128, "sparse_mode": 3});
        assert_eq!(check(&c, "fa_prefill", &ok), Ok(()));
        let r = check(&c, "pa_decode", &ok).unwrap_err();
        assert!(
            r.0.contains("pa_decode") && r.0.contains("fa_prefill"),
            "{r}"
        );
        let r = check(&c, "fa_prefill", &json!({"dtype": "bf16"})).unwrap_err();
        assert!(r.0.contains("bf16") && r.0.contains("f16, f32"), "{r}");
        let r = check(
            &c,
            "fa_prefill",
            &json!({"dtype": "f16", "input_layout": "TND"}),
        )
        .unwrap_err();
        assert!(r.0.contains("TND"), "{r}");
        let r = check(&c, "fa_prefill", &json!({"dtype": "f16", "head_dim": 8})).unwrap_err();
        assert!(r.0.contains("head_dim") && r.0.contains("minimum"), "{r}");
        let r = check(&c, "fa_prefill", &json!({"dtype": "f16", "sparse_mode": 4})).unwrap_err();
        assert!(
            r.0.contains("sparse_mode") && r.0.contains("0, 2, 3"),
            "{r}"
        );
        let r = check(
            &c,
            "fa_prefill",
            &json!({"dtype": "f16", "actual_seq_lengths": [10, 5000]}),
        )
        .unwrap_err();
        assert!(r.0.contains("5000"), "{r}");
    }

    #[test]
    fn dtypes_match_as_types_whatever_the_spelling() {
        let mut c = caps();
        let declared = &mut c.ops.get_mut("fa_prefill").unwrap().dtypes;
        *declared = vec!["BF16".into(), "half".into(), "fp8".into()];
        for d in ["bf16", "bfloat16", "BF16", "f16", "float16", "FP16"] {
            assert_eq!(check(&c, "fa_prefill", &json!({"dtype": d})), Ok(()), "{d}");
        }
        // A declared name the parser does not know matches no case, not even its own spelling,
        // and is listed as declared.
        for d in [json!("fp8"), json!("f32"), json!("float"), json!(16)] {
            let r = check(&c, "fa_prefill", &json!({ "dtype": d })).unwrap_err();
            let shown = d.as_str().map_or_else(|| d.to_string(), str::to_string);
            assert_eq!(
                r.0,
                format!(
                    "dtype {shown} is not supported for `fa_prefill` (supported: BF16, half, fp8)"
                )
            );
        }
        let declared = DeclaredDtypes::of(&c);
        assert_eq!(
            declared.of_op("fa_prefill"),
            [ElemType::Bf16, ElemType::F16]
        );
        assert_eq!(declared.of_op("pa_decode"), []);
        // Declared dtypes for a case without a dtype parameter (quant_matmul names its output
        // type `out`) are not silently ignored: the case is skipped saying so.
        let r = check(&caps(), "fa_prefill", &json!({"out": "bf16"})).unwrap_err();
        assert!(
            r.0.contains("no `dtype` parameter") && r.0.contains("limits.out.one_of"),
            "{r}"
        );
        // No declared dtypes: any.
        c.ops.get_mut("fa_prefill").unwrap().dtypes.clear();
        assert_eq!(check(&c, "fa_prefill", &json!({"dtype": "fp8"})), Ok(()));
        assert_eq!(check(&c, "fa_prefill", &json!({})), Ok(()));
    }

    #[test]
    fn capabilities_round_trip_and_reject_unknown_fields() {
        let c = caps();
        let s = serde_json::to_string(&c).unwrap();
        let back: Capabilities = serde_json::from_str(&s).unwrap();
        assert_eq!(back, c);
        let bad = r#"{"ops": {"x": {"dtype": ["f16"]}}}"#;
        assert!(serde_json::from_str::<Capabilities>(bad).is_err());
    }

    #[test]
    fn errors_map_to_statuses_and_show_stderr() {
        let e = TargetError::Crashed {
            exit: ExitReason::Signal(9),
            stderr_tail: "boom\n".into(),
        };
        assert_eq!(e.status(), Status::Crashed);
        let s = e.to_string();
        assert!(s.contains("signal 9") && s.contains("boom"), "{s}");
        assert_eq!(
            TargetError::Timeout {
                seconds: 2.0,
                stderr_tail: String::new()
            }
            .status(),
            Status::Timeout
        );
        assert_eq!(
            TargetError::Unsupported("x".into()).status(),
            Status::Skipped
        );
        assert_eq!(
            TargetError::Output {
                tensor: "out".into(),
                message: "missing".into()
            }
            .status(),
            Status::Error
        );
    }
}
