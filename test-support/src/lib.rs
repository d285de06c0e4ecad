//! The support code that more than one of conform's test binaries uses, in one crate that the
//! crates' tests take as a dev-dependency (instead of including the same files by relative
//! `#[path]` from each binary). It depends on no crate of the workspace, so any crate's tests
//! may use it.
//!
//! Where a test's support code goes (README, "House rules"):
//! - used by one test binary: a module of that binary, in the binary's own folder
//!   (`cli/tests/cli/snap.rs`, `cli/tests/nightly/night_stamps.rs`,
//!   `reference/tests/reference/common/`);
//! - used by more than one test binary, of one crate or several: a module here.

pub mod cli;
pub mod copy_dir;
pub mod history_scenario;
pub mod repo;
pub mod slowable_worker;
pub mod trials;
pub mod venv;
