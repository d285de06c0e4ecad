//! A target behind the worker protocol: an external process started from `target.toml`.
//!
//! Per request: a FRESH scratch directory (no path to golden data) receives
//! `inputs.safetensors` and `outputs.safetensors`, the latter pre-filled with poisoned
//! tensors of the expected names, dtypes and shapes; the worker overwrites it. The outputs are
//! then read and checked (missing, extra, wrong dtype or shape: an error naming the tensor).
//! A timeout kills the worker, a crash is reported with its exit code or signal and stderr
//! tail, a protocol violation kills it; the next request starts a fresh worker.

use super::config::{ConfigError, ResolvedConfig, WorkerConfig};
use super::process::{Received, WorkerProcess};
use super::protocol::{HarnessMessage, ResultStatus, WorkerInfo, WorkerMessage, PROTOCOL_VERSION};
use crate::target::{
    Availability, Capabilities, DeclaredDtypes, ExecRequest, Execution, ExitReason, Target,
    TargetError,
};
use crate::tensor_file::{self, Metadata};
use conform_reference::ops::TensorMap;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the worker said in its handshake.
#[derive(Clone, Debug, PartialEq)]
pub struct Handshake {
    pub worker: WorkerInfo,
    pub libraries: BTreeMap<String, String>,
    pub device: String,
    pub capabilities: Capabilities,
    /// The capabilities' dtype names, parsed once when the handshake arrives.
    pub dtypes: DeclaredDtypes,
}

/// How long a worker gets to exit after `shutdown`.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// How long to wait for a dead worker's exit status and the rest of its stderr.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Free space a tmpfs scratch root must have to be used (containers often mount a 64 MiB
/// `/dev/shm`).
pub const MIN_SHM_FREE_BYTES: u64 = 4 << 30;

/// The scratch root: `$CONFORM_SCRATCH`, else `/dev/shm` (tmpfs) where present, writable and
/// with at least [`MIN_SHM_FREE_BYTES`] free, else the system temporary directory.
pub fn default_scratch_root() -> PathBuf {
    if let Ok(p) = std::env::var("CONFORM_SCRATCH")
        && !p.is_empty()
    {
        return PathBuf::from(p);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && free_bytes(shm).is_some_and(|f| f >= MIN_SHM_FREE_BYTES)
        && tempfile::tempdir_in(shm).is_ok()
    {
        return shm.to_path_buf();
    }
    std::env::temp_dir()
}

/// Free bytes on the filesystem holding `path`.
#[cfg(unix)]
fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is a plain C struct of integers, for which all-zero bytes are a valid
    // value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated C string that lives to the end of the call, and `st` is
    // a valid, writable statvfs that statvfs fills in.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(not(unix))]
fn free_bytes(_path: &Path) -> Option<u64> {
    None
}

/// A worker target.
pub struct WorkerTarget {
    name: String,
    config: ResolvedConfig,
    process: Option<WorkerProcess>,
    handshake: Option<Handshake>,
    availability: Option<Availability>,
    scratch_root: PathBuf,
    next_id: u64,
    starts: u32,
}

fn first_chars(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().count() > n {
        out.push_str("...");
    }
    out
}

impl WorkerTarget {
    /// A worker target named `name` started as `config` says.
    pub fn new(name: &str, config: ResolvedConfig) -> WorkerTarget {
        WorkerTarget {
            name: name.to_string(),
            config,
            process: None,
            handshake: None,
            availability: None,
            scratch_root: default_scratch_root(),
            next_id: 0,
            starts: 0,
        }
    }

    /// The worker target in `target_dir` (its `target.toml`), named after the directory.
    pub fn from_dir(repo: &Path, target_dir: &Path) -> Result<WorkerTarget, ConfigError> {
        let cfg = WorkerConfig::load(&target_dir.join("target.toml"))?;
        let name = target_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(WorkerTarget::new(&name, cfg.resolve(repo, target_dir)))
    }

    /// Puts scratch directories under `root` instead of the default.
    pub fn with_scratch_root(mut self, root: &Path) -> WorkerTarget {
        self.scratch_root = root.to_path_buf();
        self
    }

    /// The resolved configuration.
    pub fn config(&self) -> &ResolvedConfig {
        &self.config
    }

    /// The last successful handshake.
    pub fn handshake(&self) -> Option<&Handshake> {
        self.handshake.as_ref()
    }

    /// How many times a worker process was started (1 + restarts).
    pub fn starts(&self) -> u32 {
        self.starts
    }

    /// Starts a worker and waits for its handshake. `Unavailable` for a worker that cannot
    /// run here (cannot be started, reports itself unavailable, never answers, speaks another
    /// protocol version).
    fn start(&mut self) -> Result<(), TargetError> {
        self.process = None;
        self.starts += 1;
        let mut p = WorkerProcess::spawn(&self.config).map_err(|e| {
            TargetError::Unavailable(format!("cannot start `{}`: {e}", self.config.command))
        })?;
        let mark = p.stderr().mark();
        let secs = self.config.timeouts.handshake_s;
        let received = p.recv(Duration::from_secs_f64(secs));
        let line = match received {
            Received::Line(l) => l,
            Received::Timeout => {
                let tail = p.stderr().tail_since(mark);
                p.kill();
                return Err(TargetError::Unavailable(format!(
                    "no handshake within {secs} s{}",
                    stderr_hint(&tail)
                )));
            }
            Received::Closed => {
                let exit = p.wait_exit(EXIT_GRACE);
                p.wait_stderr_closed(EXIT_GRACE);
                let tail = p.stderr().tail_since(mark);
                return Err(TargetError::Unavailable(format!(
                    "worker exited before its handshake ({exit}){}",
                    stderr_hint(&tail)
                )));
            }
            Received::TooLong | Received::NotUtf8 => {
                p.kill();
                return Err(TargetError::Unavailable(
                    "handshake line is too long or not UTF-8".into(),
                ));
            }
        };
        match serde_json::from_str::<WorkerMessage>(&line) {
            Ok(WorkerMessage::Hello {
                protocol,
                worker,
                libraries,
                device,
                capabilities,
            }) => {
                if protocol != PROTOCOL_VERSION {
                    p.kill();
                    return Err(TargetError::Unavailable(format!(
                        "worker speaks protocol version {protocol}; this harness speaks {PROTOCOL_VERSION}"
                    )));
                }
                self.handshake = Some(Handshake {
                    worker,
                    libraries,
                    device,
                    dtypes: DeclaredDtypes::of(&capabilities),
                    capabilities,
                });
                self.process = Some(p);
                Ok(())
            }
            Ok(WorkerMessage::Unavailable { reason, .. }) => {
                p.shutdown(
                    &serde_json::to_string(&HarnessMessage::Shutdown).unwrap_or_default(),
                    SHUTDOWN_GRACE,
                );
                Err(TargetError::Unavailable(reason))
            }
            Ok(other) => {
                p.kill();
                Err(TargetError::Unavailable(format!(
                    "expected a hello handshake, got {}",
                    first_chars(&format!("{other:?}"), 200)
                )))
            }
            Err(e) => {
                p.kill();
                Err(TargetError::Unavailable(format!(
                    "malformed handshake `{}`: {e}",
                    first_chars(&line, 200)
                )))
            }
        }
    }

    /// Kills the current worker (it is restarted by the next request).
    fn discard(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.kill();
        }
    }

    fn write_files(
        &self,
        dir: &Path,
        request: &ExecRequest,
    ) -> Result<(PathBuf, PathBuf), TargetError> {
        let inputs = dir.join("inputs.safetensors");
        let outputs = dir.join("outputs.safetensors");
        let mut meta = Metadata::new();
        meta.insert("conform_protocol".into(), PROTOCOL_VERSION.to_string());
        tensor_file::write(&inputs, &request.inputs, &meta)
            .map_err(|e| TargetError::Internal(e.to_string()))?;
        // Poisoned outputs are streamed to the file, never materialised.
        let specs: Vec<_> = request
            .expected_outputs
            .iter()
            .map(|s| (s.name.clone(), s.dtype, s.shape.clone()))
            .collect();
        meta.insert("poisoned".into(), "true".into());
        meta.insert("poison".into(), request.poison.name().into());
        let fill = request.poison;
        tensor_file::write_filled(&outputs, &specs, |d| fill.bytes(d), &meta)
            .map_err(|e| TargetError::Internal(e.to_string()))?;
        Ok((inputs, outputs))
    }

    fn check_outputs(&self, request: &ExecRequest, path: &Path) -> Result<TensorMap, TargetError> {
        // At most the expected outputs' size (plus the header): a worker cannot make conform
        // read a huge (or endless) file.
        let limit = crate::input_file::Limit::for_specs(&request.expected_outputs);
        let file = tensor_file::read(path, limit).map_err(|e| TargetError::Protocol {
            message: format!("unreadable output file: {e}"),
            stderr_tail: String::new(),
        })?;
        let outputs = file.tensors;
        for spec in &request.expected_outputs {
            let t = outputs.get(&spec.name).ok_or_else(|| TargetError::Output {
                tensor: spec.name.clone(),
                message: "missing from the worker's output file".into(),
            })?;
            if t.dtype != spec.dtype {
                return Err(TargetError::Output {
                    tensor: spec.name.clone(),
                    message: format!("dtype {}, expected {}", t.dtype.name(), spec.dtype.name()),
                });
            }
            if t.shape != spec.shape {
                return Err(TargetError::Output {
                    tensor: spec.name.clone(),
                    message: format!("shape {:?}, expected {:?}", t.shape, spec.shape),
                });
            }
        }
        if let Some(extra) = outputs
            .keys()
            .find(|k| !request.expected_outputs.iter().any(|s| &s.name == *k))
        {
            return Err(TargetError::Output {
                tensor: extra.clone(),
                message: format!("not an output of `{}`", request.op),
            });
        }
        Ok(outputs)
    }
}

fn stderr_hint(tail: &str) -> String {
    let t = tail.trim();
    if t.is_empty() {
        String::new()
    } else {
        // The last non-empty line says most (e.g. the ImportError).
        let last = t.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(t);
        format!(": {}", first_chars(last.trim(), 300))
    }
}

impl Target for WorkerTarget {
    fn name(&self) -> &str {
        &self.name
    }

    fn device_group(&self) -> &str {
        &self.config.device_group
    }

    fn nondeterministic(&self) -> Option<&str> {
        self.config.nondeterministic.as_deref()
    }

    fn availability(&mut self) -> Availability {
        if let Some(a) = &self.availability {
            return a.clone();
        }
        let a = match self.start() {
            Ok(()) => {
                let h = self.handshake.as_ref().expect("set by start");
                Availability::Available {
                    description: format!("{} {} on {}", h.worker.name, h.worker.version, h.device),
                    versions: h.libraries.clone(),
                }
            }
            Err(TargetError::Unavailable(reason)) => Availability::Unavailable { reason },
            Err(other) => Availability::Unavailable {
                reason: other.to_string(),
            },
        };
        self.availability = Some(a.clone());
        a
    }

    fn capabilities(&mut self) -> Capabilities {
        if !self.availability().is_available() {
            return Capabilities::default();
        }
        self.handshake
            .as_ref()
            .map(|h| h.capabilities.clone())
            .unwrap_or_default()
    }

    fn declared_dtypes(&mut self) -> DeclaredDtypes {
        if !self.availability().is_available() {
            return DeclaredDtypes::default();
        }
        self.handshake
            .as_ref()
            .map(|h| h.dtypes.clone())
            .unwrap_or_default()
    }

    /// Shuts the worker down (it finishes what it was asked, then exits); the next request
    /// starts a fresh process. Its capabilities stay as its first handshake declared them.
    fn renew(&mut self) {
        if let Some(mut p) = self.process.take() {
            let line = serde_json::to_string(&HarnessMessage::Shutdown).unwrap_or_default();
            p.shutdown(&line, SHUTDOWN_GRACE);
        }
    }

    fn execute(&mut self, request: &ExecRequest) -> Result<Execution, TargetError> {
        if let Availability::Unavailable { reason } = self.availability() {
            return Err(TargetError::Unavailable(reason));
        }
        self.ensure_running()?;
        self.admit(request)?;
        std::fs::create_dir_all(&self.scratch_root)
            .map_err(|e| TargetError::Internal(format!("{}: {e}", self.scratch_root.display())))?;
        let scratch = tempfile::Builder::new()
            .prefix(&super::live::scratch_prefix())
            .tempdir_in(&self.scratch_root)
            .map_err(|e| TargetError::Internal(format!("scratch directory: {e}")))?;
        let (inputs_path, outputs_path) = self.write_files(scratch.path(), request)?;
        let sent = self.send_run(request, &inputs_path, &outputs_path)?;
        let (reply, tail) = self.receive(request, &sent)?;
        let answer = match check_reply(&reply, &sent.id, request, &outputs_path) {
            Ok(answer) => answer,
            Err(Violation::Protocol(message)) => {
                // A worker that broke the protocol is in an unknown state: the next case
                // gets a fresh one, whatever the violation was.
                self.discard();
                return Err(TargetError::Protocol {
                    message,
                    stderr_tail: tail,
                });
            }
            Err(Violation::Reported(status, message)) => {
                return Err(match status {
                    ResultStatus::Unsupported => TargetError::Unsupported(message),
                    _ => TargetError::Worker {
                        message,
                        stderr_tail: tail,
                    },
                })
            }
        };
        let outputs = self.check_outputs(request, &outputs_path)?;
        Ok(Execution {
            outputs,
            timings_us: answer.timings_us,
            cpu_us: answer.cpu_us,
            setup_us: answer.setup_us,
            notes: answer.notes,
            stderr_tail: tail,
        })
    }
}

/// A request written to the worker, waiting for its reply.
struct SentRequest {
    id: String,
    /// The worker's stderr position when the request was written.
    stderr_mark: u64,
    /// Whether the line reached the worker's stdin (not: the worker is gone).
    delivered: bool,
}

/// What a valid `ok` reply carries besides the output file.
struct Answer {
    timings_us: Vec<f64>,
    cpu_us: Vec<f64>,
    setup_us: Option<f64>,
    notes: Vec<String>,
}

/// Why a reply is not an [`Answer`].
enum Violation {
    /// The reply breaks the protocol (the worker is restarted).
    Protocol(String),
    /// A well-formed reply saying the case failed or is unsupported.
    Reported(ResultStatus, String),
}

/// Checks one reply line against the request it answers: a `result` for request `id`, with
/// `status` ok, the outputs where they were asked for, one time per requested iteration and
/// every time finite and >= 0.
fn check_reply(
    reply: &str,
    id: &str,
    request: &ExecRequest,
    outputs_path: &Path,
) -> Result<Answer, Violation> {
    let parsed = serde_json::from_str::<WorkerMessage>(reply).map_err(|e| {
        Violation::Protocol(format!(
            "malformed JSON reply `{}`: {e}",
            first_chars(reply, 200)
        ))
    })?;
    let WorkerMessage::Result {
        id: got_id,
        status,
        outputs,
        timings_us,
        cpu_us,
        setup_us,
        message,
        notes,
    } = parsed
    else {
        return Err(Violation::Protocol(format!(
            "expected a result, got `{}`",
            first_chars(reply, 200)
        )));
    };
    if got_id != id {
        return Err(Violation::Protocol(format!(
            "reply for request id `{got_id}`, expected `{id}`"
        )));
    }
    if status != ResultStatus::Ok {
        return Err(Violation::Reported(status, message));
    }
    if let Some(o) = &outputs
        && Path::new(o) != outputs_path
    {
        return Err(Violation::Protocol(format!(
            "outputs written to `{o}`, expected `{}`",
            outputs_path.display()
        )));
    }
    if let Some(t) = request.timing
        && timings_us.len() != t.iterations as usize
    {
        return Err(Violation::Protocol(format!(
            "{} timings for {} requested iterations",
            timings_us.len(),
            t.iterations
        )));
    }
    if !cpu_us.is_empty() && cpu_us.len() != timings_us.len() {
        return Err(Violation::Protocol(format!(
            "{} CPU times (cpu_us) for {} timings: one per timing, or none",
            cpu_us.len(),
            timings_us.len()
        )));
    }
    if let Some(bad) = timings_us
        .iter()
        .chain(cpu_us.iter())
        .chain(setup_us.iter())
        .find(|x| !x.is_finite() || **x < 0.0)
    {
        return Err(Violation::Protocol(format!("invalid time {bad} us")));
    }
    Ok(Answer {
        timings_us,
        cpu_us,
        setup_us,
        notes,
    })
}

impl WorkerTarget {
    /// Starts the worker again after a timeout, crash or protocol error.
    fn ensure_running(&mut self) -> Result<(), TargetError> {
        if self.process.is_some() {
            return Ok(());
        }
        self.start().map_err(|e| match e {
            TargetError::Unavailable(reason) => TargetError::Crashed {
                exit: ExitReason::Unknown,
                stderr_tail: format!("restarting the worker failed: {reason}"),
            },
            other => other,
        })
    }

    /// Whether the handshake's capabilities cover the op and the requested recipe.
    fn admit(&self, request: &ExecRequest) -> Result<(), TargetError> {
        let caps = &self.handshake.as_ref().expect("started").capabilities;
        let Some(cap) = caps.ops.get(&request.op) else {
            return Err(TargetError::Unsupported(format!(
                "worker `{}` does not implement `{}`",
                self.name, request.op
            )));
        };
        if let Some(r) = &request.recipe
            && !cap.recipes.contains(r)
        {
            return Err(TargetError::Unsupported(format!(
                "worker `{}` implements `{}` with recipe(s) [{}], not `{r}`",
                self.name,
                request.op,
                cap.recipes.join(", ")
            )));
        }
        Ok(())
    }

    /// Writes the `run` request line. A worker that cannot take the line is found dead by
    /// [`WorkerTarget::receive`].
    fn send_run(
        &mut self,
        request: &ExecRequest,
        inputs_path: &Path,
        outputs_path: &Path,
    ) -> Result<SentRequest, TargetError> {
        self.next_id += 1;
        let id = self.next_id.to_string();
        let msg = HarnessMessage::Run {
            id: id.clone(),
            case_id: request.case_id.clone(),
            input_set: request.input_set,
            op: request.op.clone(),
            params: request.params.clone(),
            recipe: request.recipe.clone(),
            inputs: inputs_path.to_string_lossy().into_owned(),
            outputs: outputs_path.to_string_lossy().into_owned(),
            timing: request.timing,
        };
        let line = serde_json::to_string(&msg)
            .map_err(|e| TargetError::Internal(format!("request: {e}")))?;
        let p = self.process.as_mut().expect("started");
        let stderr_mark = p.stderr().mark();
        let delivered = p.send_line(&line).is_ok();
        Ok(SentRequest {
            id,
            stderr_mark,
            delivered,
        })
    }

    /// Waits for the reply line within the request's timeout; returns it with the worker's
    /// stderr since the request. A timeout, a dead worker or an unreadable line discards the
    /// worker and is the error.
    fn receive(
        &mut self,
        request: &ExecRequest,
        sent: &SentRequest,
    ) -> Result<(String, String), TargetError> {
        let secs = if request.timing.is_some() {
            self.config.timeouts.timed_request_s
        } else {
            self.config.timeouts.request_s
        };
        let mark = sent.stderr_mark;
        let p = self.process.as_mut().expect("started");
        let received = if sent.delivered {
            p.recv(Duration::from_secs_f64(secs))
        } else {
            Received::Closed
        };
        let err = match received {
            Received::Line(l) => return Ok((l, p.stderr().tail_since(mark))),
            Received::Timeout => TargetError::Timeout {
                seconds: secs,
                stderr_tail: p.stderr().tail_since(mark),
            },
            Received::Closed => {
                let exit = p.wait_exit(EXIT_GRACE);
                p.wait_stderr_closed(EXIT_GRACE);
                TargetError::Crashed {
                    exit,
                    stderr_tail: p.stderr().tail_since(mark),
                }
            }
            Received::TooLong | Received::NotUtf8 => TargetError::Protocol {
                message: "reply line too long or not UTF-8".into(),
                stderr_tail: p.stderr().tail_since(mark),
            },
        };
        self.discard();
        Err(err)
    }
}

impl Drop for WorkerTarget {
    fn drop(&mut self) {
        self.renew();
    }
}
