//! conform's stable, machine-readable types — what other tools read and write when they work
//! with conform, kept apart from the engine so they change only deliberately:
//!
//! - [`status::Status`]: the outcome of a trial; [`exit_code`]: the process's exit codes;
//! - [`results`]: the results file of `conform run --json`;
//! - [`perf`]: the perf file of `conform perf record` / `conform run --perf`;
//! - [`compare`]: the gate's comparison (`conform perf compare --json`);
//! - [`adequacy`]: the adequacy report (`conform adequacy --json`);
//! - [`fingerprint`]: the knob-by-knob fingerprint (`conform fingerprint --json`);
//! - [`protocol`] and [`capabilities`]: the worker protocol's messages.
//!
//! [`schema`] generates a JSON Schema for each file and message; the generated schemas are
//! committed under `docs/schemas/`, and a test fails when they are out of date.

pub mod adequacy;
pub mod capabilities;
pub mod compare;
pub mod exit_code;
pub mod fingerprint;
pub mod perf;
pub mod protocol;
pub mod results;
pub mod schema;
pub mod status;

pub use status::Status;
