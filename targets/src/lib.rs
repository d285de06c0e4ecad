//! conform-targets: implementations under test.
//!
//! - [`target`]: the [`Target`] trait, capabilities, requests, executions and errors.
//! - [`reference_target`]: the in-process reference.
//! - [`worker`]: external kernels behind the worker protocol (targets/PROTOCOL.md).
//! - [`registry`]: discovery of `targets/*/target.toml` plus the reference.
//! - [`tensor_file`]: tensors on disk (safetensors), the one exchange format.
//! - [`poison`]: the pattern output buffers hold before a kernel runs.
//! - [`input_file`]: reading any file conform is given within a size limit.

pub mod cpu_time;
pub mod fault_target;
pub mod input_file;
pub mod poison;
pub mod reference_target;
pub mod registry;
pub mod serve;
pub mod target;
pub mod tensor_file;
pub mod worker;

pub use fault_target::FaultTarget;
pub use reference_target::{ReferenceTarget, REFERENCE_TARGET};
pub use target::{
    Availability, Capabilities, DeclaredDtypes, ExecRequest, Execution, ExitReason, OpCapability,
    ParamLimit, SkipReason, Target, TargetError, TimingRequest,
};
pub use worker::WorkerTarget;
