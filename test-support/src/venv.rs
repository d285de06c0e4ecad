//! Whether the tests that run the CPU Python workers can run here.

use std::path::Path;

/// The CPU workers whose requirement (in `CONFORM_REQUIRE_TARGETS`) makes the venv required.
const CPU_WORKERS: [&str; 3] = ["ml_dtypes", "onnxruntime", "numpy"];

/// Why a test needing the CPU workers' venv cannot run here, or None. The venv is required
/// (a missing one fails the test) only where the CPU workers are: CI names them in
/// CONFORM_REQUIRE_TARGETS; an Atlas runner that requires only `torch_npu` has no CPU venv and
/// ignores these tests with the reason.
pub fn missing(repo: &Path) -> Option<String> {
    let required = std::env::var("CONFORM_REQUIRE_TARGETS").unwrap_or_default();
    let cpu_required = required
        .split([',', ' '])
        .any(|t| CPU_WORKERS.contains(&t.trim()));
    (!repo.join(".venv/bin/python").exists() && !cpu_required)
        .then(|| ".venv is absent: run ci/setup-targets.sh".to_string())
}
