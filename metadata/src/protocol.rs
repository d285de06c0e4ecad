//! The worker protocol's messages (documented in targets/PROTOCOL.md): one JSON object per line, tagged
//! by `type`.

use crate::capabilities::{Capabilities, TimingRequest};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The protocol version this harness speaks. A worker announcing another version is refused.
pub const PROTOCOL_VERSION: u32 = 1;

/// The worker's name and version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerInfo {
    pub name: String,
    pub version: String,
}

/// Messages a worker writes to its stdout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum WorkerMessage {
    /// The handshake, first line: who the worker is and what it can do.
    Hello {
        protocol: u32,
        worker: WorkerInfo,
        /// Library name -> version (torch_npu, CANN, onnxruntime, ...).
        #[serde(default)]
        libraries: BTreeMap<String, String>,
        /// The device, in words.
        device: String,
        capabilities: Capabilities,
    },
    /// The handshake of a worker that cannot run here (e.g. an import failed); it exits
    /// after writing this.
    Unavailable { protocol: u32, reason: String },
    /// The answer to one [`HarnessMessage::Run`].
    Result {
        /// The request's `id`.
        id: String,
        status: ResultStatus,
        /// The output file written (the request's `outputs` path) when `status` is `ok`.
        #[serde(default)]
        outputs: Option<String>,
        /// Per-iteration times in microseconds, one per timed iteration.
        #[serde(default)]
        timings_us: Vec<f64>,
        /// Optional: per-iteration CPU time of the worker process in microseconds, one per
        /// timing (CPU workers; absent or empty where the worker does not measure it).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        cpu_us: Vec<f64>,
        /// One-time setup in microseconds, outside the timed region.
        #[serde(default)]
        setup_us: Option<f64>,
        /// Why the case failed or is unsupported.
        #[serde(default)]
        message: String,
        #[serde(default)]
        notes: Vec<String>,
    },
}

/// The status of a [`WorkerMessage::Result`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResultStatus {
    Ok,
    /// The op raised.
    Error,
    /// The worker cannot run this case (outside what its library supports).
    Unsupported,
}

/// Messages the harness writes to the worker's stdin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum HarnessMessage {
    /// Run one case on one input set.
    Run {
        /// Unique per request (the worker echoes it).
        id: String,
        case_id: String,
        input_set: u32,
        op: String,
        params: serde_json::Value,
        #[serde(default)]
        recipe: Option<String>,
        /// Path of the input safetensors file.
        inputs: String,
        /// Path of the output safetensors file, pre-filled with poisoned tensors of the
        /// expected names, dtypes and shapes; the worker overwrites it.
        outputs: String,
        #[serde(default)]
        timing: Option<TimingRequest>,
    },
    /// Exit cleanly.
    Shutdown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_parses_and_rejects_unknown_fields() {
        let line = r#"{"type":"hello","protocol":1,"worker":{"name":"w","version":"1"},"libraries":{"numpy":"2.4"},"device":"cpu","capabilities":{"ops":{"x":{"dtypes":["f32"]}}}}"#;
        let m: WorkerMessage = serde_json::from_str(line).unwrap();
        match m {
            WorkerMessage::Hello {
                protocol,
                capabilities,
                ..
            } => {
                assert_eq!(protocol, 1);
                assert_eq!(capabilities.ops["x"].dtypes, vec!["f32"]);
            }
            other => panic!("{other:?}"),
        }
        let bad = line.replace("\"device\"", "\"devices\"");
        assert!(serde_json::from_str::<WorkerMessage>(&bad).is_err());
    }

    #[test]
    fn result_defaults_and_run_round_trip() {
        let m: WorkerMessage =
            serde_json::from_str(r#"{"type":"result","id":"7","status":"error","message":"boom"}"#)
                .unwrap();
        assert_eq!(
            m,
            WorkerMessage::Result {
                id: "7".into(),
                status: ResultStatus::Error,
                outputs: None,
                timings_us: vec![],
                cpu_us: vec![],
                setup_us: None,
                message: "boom".into(),
                notes: vec![],
            }
        );
        let run = HarnessMessage::Run {
            id: "1".into(),
            case_id: "c".into(),
            input_set: 1,
            op: "fa_prefill".into(),
            params: serde_json::json!({"dtype": "f16"}),
            recipe: None,
            inputs: "/tmp/a".into(),
            outputs: "/tmp/b".into(),
            timing: Some(TimingRequest {
                warmup: 1,
                iterations: 2,
            }),
        };
        let s = serde_json::to_string(&run).unwrap();
        assert!(s.starts_with(r#"{"type":"run""#), "{s}");
        assert_eq!(serde_json::from_str::<HarnessMessage>(&s).unwrap(), run);
        assert_eq!(
            serde_json::to_string(&HarnessMessage::Shutdown).unwrap(),
            r#"{"type":"shutdown"}"#
        );
    }
}
