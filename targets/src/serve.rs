//! An in-process target served over the worker protocol (targets/PROTOCOL.md) on a pair of
//! streams: `conform perf serve-reference` runs the reference of its own build this way, so
//! that another conform — tonight's, in the nightly gate — can time it as a worker, side by
//! side with its own build (the same-night control, docs/perf.md). Nothing but protocol lines
//! is written to `output`.

use crate::target::{ExecRequest, Target, TargetError};
use crate::tensor_file;
use conform_metadata::protocol::{
    HarnessMessage, ResultStatus, WorkerInfo, WorkerMessage, PROTOCOL_VERSION,
};
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;

fn send(output: &mut dyn Write, msg: &WorkerMessage) -> std::io::Result<()> {
    let line = serde_json::to_string(msg).map_err(std::io::Error::other)?;
    writeln!(output, "{line}")?;
    output.flush()
}

/// Handshake as `name` / `version`, then answers requests until `shutdown` or the end of
/// `input`. A malformed request line ends the session with an error (the harness restarts
/// a worker after a protocol violation anyway).
pub fn serve(
    target: &mut dyn Target,
    name: &str,
    version: &str,
    libraries: BTreeMap<String, String>,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> std::io::Result<()> {
    let device = match target.availability() {
        crate::target::Availability::Available { description, .. } => description,
        crate::target::Availability::Unavailable { reason } => {
            return send(
                output,
                &WorkerMessage::Unavailable {
                    protocol: PROTOCOL_VERSION,
                    reason,
                },
            );
        }
    };
    send(
        output,
        &WorkerMessage::Hello {
            protocol: PROTOCOL_VERSION,
            worker: WorkerInfo {
                name: name.to_string(),
                version: version.to_string(),
            },
            libraries,
            device,
            capabilities: target.capabilities(),
        },
    )?;
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line.trim().is_empty() {
            continue;
        }
        let msg: HarnessMessage = serde_json::from_str(line.trim_end()).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("malformed request line: {e}"),
            )
        })?;
        let HarnessMessage::Run {
            id,
            case_id,
            input_set,
            op,
            params,
            recipe,
            inputs,
            outputs,
            timing,
        } = msg
        else {
            return Ok(());
        };
        let reply = match run_one(
            target, &case_id, input_set, &op, params, recipe, &inputs, &outputs, timing,
        ) {
            Ok(exec) => WorkerMessage::Result {
                id,
                status: ResultStatus::Ok,
                outputs: Some(outputs),
                timings_us: exec.timings_us,
                cpu_us: exec.cpu_us,
                setup_us: exec.setup_us,
                message: String::new(),
                notes: exec.notes,
            },
            Err(e) => WorkerMessage::Result {
                id,
                status: match e {
                    TargetError::Unsupported(_) => ResultStatus::Unsupported,
                    _ => ResultStatus::Error,
                },
                outputs: None,
                timings_us: Vec::new(),
                cpu_us: Vec::new(),
                setup_us: None,
                message: e.to_string(),
                notes: Vec::new(),
            },
        };
        send(output, &reply)?;
    }
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    target: &mut dyn Target,
    case_id: &str,
    input_set: u32,
    op: &str,
    params: serde_json::Value,
    recipe: Option<String>,
    inputs: &str,
    outputs: &str,
    timing: Option<crate::target::TimingRequest>,
) -> Result<crate::target::Execution, TargetError> {
    let worker = |message: String| TargetError::Worker {
        message,
        stderr_tail: String::new(),
    };
    // At most what the op's inputs hold for these parameters (unknown op or parameters: the
    // header's room only; the run below says what is wrong with them).
    let limit = conform_reference::ops::find(op)
        .and_then(|f| f.describe(&params))
        .map_or(crate::input_file::Limit::tensors(0), |d| {
            crate::input_file::Limit::for_specs(&d.inputs)
        });
    let read = tensor_file::read(Path::new(inputs), limit).map_err(|e| worker(e.to_string()))?;
    let request = ExecRequest {
        case_id: case_id.to_string(),
        input_set,
        op: op.to_string(),
        params,
        recipe,
        inputs: read.tensors,
        expected_outputs: Vec::new(),
        timing,
        // The in-process reference writes every element; the fill never shows.
        poison: Default::default(),
    };
    let exec = target.execute(&request)?;
    // A sibling, then a rename: the harness never reads a half-written file.
    let out = Path::new(outputs);
    let tmp = out.with_extension("serving.tmp");
    tensor_file::write(&tmp, &exec.outputs, &BTreeMap::new())
        .and_then(|()| {
            std::fs::rename(&tmp, out).map_err(|source| tensor_file::TensorFileError::Io {
                path: out.to_path_buf(),
                source,
            })
        })
        .map_err(|e| worker(e.to_string()))?;
    Ok(exec)
}
