//! External kernels behind the worker protocol (targets/PROTOCOL.md).
//!
//! - `config`: `targets/<name>/target.toml`.
//! - [`env`]: its `[env]` entries, set outright or put around the inherited value.
//! - [`live`]: the live worker process groups and scratch directories, for clean-up on
//!   interrupt.
//! - [`process`]: the worker process (JSON lines, stderr capture, timeouts, kill, limits).
//! - [`protocol`]: the messages.
//! - [`worker_target`]: [`WorkerTarget`], the [`crate::Target`] implementation.

pub mod config;
pub mod env;
pub mod live;
pub mod process;
pub mod protocol;
pub mod worker_target;

pub use config::{ConfigError, ResolvedConfig, WorkerConfig};
pub use protocol::PROTOCOL_VERSION;
pub use worker_target::{default_scratch_root, Handshake, WorkerTarget};
