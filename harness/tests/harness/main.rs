//! The harness library's integration tests, in one test binary (a module per former test
//! file; `repo` and `rate` are their shared helpers). A test's name starts with its file's
//! name: `cargo test -p conform-harness --test harness ci_files::` runs one file's tests. The
//! conformance suite target (`tests/conformance.rs`) keeps its own binary: it has its own
//! test harness.

mod rate;
mod repo;

mod ab_confirmation;
mod ascend_ledger;
mod atlas_cann_detection;
mod ci_files;
mod control_docs;
mod determinism_check;
mod docs_complete;
mod fingerprint_catalogue;
mod kernel_variants;
mod knob_coverage;
mod library_run;
mod mc2_costs;
mod parsers_fuzz;
mod perf_gate_simulation;
mod perf_nightly_simulation;
mod two_fill_poison;
mod verdict_determinism;
mod verdict_policies;
