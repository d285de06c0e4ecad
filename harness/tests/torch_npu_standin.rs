//! The torch_npu worker end to end before it meets a device: the whole quick tier through the
//! real worker code (argument building, layouts, block tables, actual sequence lengths, FP4
//! unpacking, the MC2 rank launch and its process group, the timing path) on the CPU stand-in
//! for torch / torch_npu (`targets/torch_npu/standin`, switched on by
//! CONFORM_TORCH_NPU_STANDIN=1). Every case must pass or be skipped with a reason — never an
//! error — and say that the stand-in ran it. Without the stand-in, a required torch_npu that
//! cannot be imported fails the run with the import error.
//!
//! The worker needs the Python venv (`ci/setup-targets.sh`): without it the trials are
//! ignored with the reason, unless CONFORM_REQUIRE_TARGETS names a CPU worker (CI), where they
//! fail.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../targets/tests/support/trials.rs"]
mod trials;
#[path = "support/venv.rs"]
mod venv;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

fn conform(args: &[&str], standin: bool, require: Option<&str>) -> (Option<i32>, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_conform"));
    c.args(args).current_dir(repo()).env_remove("CI");
    c.env_remove("CONFORM_REQUIRE_TARGETS");
    if let Some(r) = require {
        c.env("CONFORM_REQUIRE_TARGETS", r);
    }
    if standin {
        c.env("CONFORM_TORCH_NPU_STANDIN", "1");
    } else {
        c.env_remove("CONFORM_TORCH_NPU_STANDIN");
    }
    let o = c.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), text)
}

fn quick_tier_on_the_standin_passes_or_skips_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let (code, text) = conform(
        &[
            "run",
            "--target",
            "torch_npu",
            "--json",
            json.to_str().unwrap(),
            "--report",
            dir.path().join("report").to_str().unwrap(),
        ],
        true,
        Some("torch_npu"),
    );
    assert_eq!(code, Some(0), "{text}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // The results and the report say which module ran.
    let t = &r["targets"][0];
    assert_eq!(t["name"], "torch_npu");
    assert!(
        t["description"]
            .as_str()
            .unwrap()
            .contains("conform CPU stand-in")
            && t["versions"]["torch_npu"]
                .as_str()
                .unwrap()
                .contains("conform CPU stand-in"),
        "{t}"
    );
    let report = std::fs::read_to_string(dir.path().join("report/index.html")).unwrap();
    assert!(
        report.contains("target <b>torch_npu</b>: ") && report.contains("conform CPU stand-in"),
        "the report does not name the stand-in"
    );
    let cases = r["cases"].as_array().unwrap();
    let mut passed_ops = std::collections::BTreeSet::new();
    for c in cases {
        let id = c["id"].as_str().unwrap();
        match c["status"].as_str().unwrap() {
            "passed" => {
                passed_ops.insert(id.split('/').next().unwrap().to_string());
                let notes = c["notes"].to_string();
                assert!(
                    notes.contains("conform CPU stand-in"),
                    "{id}: the results do not say the stand-in ran it: {notes}"
                );
            }
            "skipped" => assert!(
                !c["message"].as_str().unwrap_or("").is_empty(),
                "{id}: skipped without a reason"
            ),
            other => panic!("{id}: {other}: {}", c["message"]),
        }
    }
    // Every path of the worker ran: attention (FA, PA with block tables), FP4, MC2 ranks.
    for suite in [
        "fa_prefill",
        "pa_decode",
        "fp4_dequant",
        "mc2_matmul_allreduce",
    ] {
        assert!(
            passed_ops.contains(suite),
            "no {suite} case passed: {passed_ops:?}"
        );
    }
    // The timing path too: device events around each call.
    let (code, text) = conform(
        &[
            "run",
            "--target",
            "torch_npu",
            "--perf",
            "--suite",
            "fa_prefill",
            "--iterations",
            "3",
        ],
        true,
        None,
    );
    assert_eq!(code, Some(0), "{text}");
}

fn without_torch_npu_a_required_target_fails_with_the_import_error() {
    let (code, text) = conform(
        &["run", "--target", "torch_npu", "--suite", "fa_prefill"],
        false,
        Some("torch_npu"),
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("import failed") && text.contains("No module named 'torch"),
        "{text}"
    );
}

/// The interpreter the worker runs under (as the target declaration resolves it).
fn python() -> PathBuf {
    std::env::var_os("CONFORM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv/bin/python"))
}

/// Where a real torch or torch_npu is importable, the stand-in refuses to load (by design) and
/// the device run replaces these trials.
fn real_torch_here() -> bool {
    Command::new(python())
        .args([
            "-c",
            "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torch') \
             or importlib.util.find_spec('torch_npu') else 1)",
        ])
        .status()
        .is_ok_and(|s| s.success())
}

fn main() {
    let missing = if let Some(why) = venv::missing(&repo()) {
        Some(why)
    } else if python().exists() && real_torch_here() {
        Some(
            "a real torch / torch_npu is importable here: the stand-in refuses to load, and the \
             device run takes its place"
                .to_string(),
        )
    } else {
        None
    };
    trials::run(vec![
        trials::Test {
            name: "quick_tier_on_the_standin_passes_or_skips_with_reasons",
            body: quick_tier_on_the_standin_passes_or_skips_with_reasons,
            missing: missing.clone(),
        },
        trials::Test {
            name: "without_torch_npu_a_required_target_fails_with_the_import_error",
            body: without_torch_npu_a_required_target_fails_with_the_import_error,
            missing,
        },
    ])
}
