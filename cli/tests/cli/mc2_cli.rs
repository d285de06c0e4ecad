//! `conform mc2 plan` end to end: the worked-example golden through the built binary, and a
//! clear message with exit code 2 for each kind of bad input.

use std::path::{Path, PathBuf};
use std::process::Output;

const SEED_COSTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../suites/mc2/costs-seed-example.toml"
);

use crate::cli;
// The commands under test read only the files they are given: no project, no --root.
use cli::conform_files as conform;

fn plan(m: &str, dtype: &str, costs: &Path, json: bool) -> Output {
    let costs = costs.to_str().unwrap();
    let mut args = vec![
        "mc2", "plan", "--m", m, "--k", "3072", "--n", "8192", "--dtype", dtype, "--costs", costs,
    ];
    if json {
        args.push("--json");
    }
    conform(&args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A cost file in the test's scratch directory: the seed file with `edit` applied.
fn edited_costs(name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let seed = std::fs::read_to_string(SEED_COSTS).unwrap();
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mc2-{name}.toml"));
    std::fs::write(&path, edit(seed)).unwrap();
    path
}

#[test]
fn seed_example_json_plan_is_512_then_four_896_communication_bound() {
    let o = plan("4096", "f16", Path::new(SEED_COSTS), true);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["bound"], "communication");
    assert_eq!(v["tiles"], serde_json::json!([512, 896, 896, 896, 896]));
    assert_eq!(v["serial_us"], 1874.0);
    let predicted = v["predicted_us"].as_f64().unwrap();
    // By hand: the first all-reduce (CostComm(8 MiB) = 170.19 us) ends before the second
    // matmul (175.66 us), so the all-reduces run back to back from the end of matmul 1:
    // 100.375 + 175.65625 + 4 * CostComm(14 MiB).
    let expected = 100.375 + 175.65625 + 4.0 * (13.58491263 * 14.0 + 61.508333);
    approx::assert_abs_diff_eq!(predicted, expected, epsilon = 1e-9);
    assert_eq!(v["measured_fused_us"], 1262.0);
    assert_eq!(v["timeline"].as_array().unwrap().len(), 5);
}

#[test]
fn seed_example_text_report_shows_bound_tiles_and_times() {
    let o = plan("4096", "f16", Path::new(SEED_COSTS), false);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("bound: communication"), "{text}");
    assert!(text.contains("tiles: [512, 896, 896, 896, 896]"), "{text}");
    assert!(text.contains("serial: 1874.0 us"), "{text}");
    assert!(text.contains("predicted fused: 1282.8 us"), "{text}");
    assert!(text.contains("measured fused: 1262.0 us"), "{text}");
}

#[test]
fn another_m_uses_the_models_instead_of_the_measured_times() {
    let o = plan("2048", "f16", Path::new(SEED_COSTS), true);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["unsplit"]["source"], "from the cost models");
    assert!(v["measured_fused_us"].is_null());
    let tiles: Vec<u64> = serde_json::from_value(v["tiles"].clone()).unwrap();
    assert_eq!(tiles.iter().sum::<u64>(), 2048);
}

fn assert_input_error(o: &Output, needles: &[&str]) {
    assert_eq!(o.status.code(), Some(2), "stderr: {}", stderr(o));
    assert!(o.stdout.is_empty());
    let err = stderr(o);
    for n in needles {
        assert!(err.contains(n), "expected `{n}` in: {err}");
    }
}

#[test]
fn m_zero_is_an_input_error() {
    let o = plan("0", "f16", Path::new(SEED_COSTS), true);
    assert_input_error(&o, &["M must be greater than 0"]);
}

#[test]
fn unknown_dtype_is_an_input_error() {
    let o = plan("4096", "f8", Path::new(SEED_COSTS), false);
    assert_input_error(&o, &["unknown dtype `f8`", "--dtype"]);
}

#[test]
fn non_monotone_cost_model_is_an_input_error() {
    let p = edited_costs("non-monotone", |s| {
        s.replace("slope = 13.58491263", "slope = -13.58491263")
    });
    let o = plan("4096", "f16", &p, false);
    assert_input_error(
        &o,
        &["mc2-non-monotone.toml", "`communication`", "not monotone"],
    );
}

#[test]
fn malformed_toml_is_an_input_error() {
    let p = edited_costs("malformed", |s| s.replace("[planner]", "[planner"));
    let o = plan("4096", "f16", &p, false);
    assert_input_error(&o, &["mc2-malformed.toml", "is not valid"]);
}

#[test]
fn unknown_field_is_an_input_error() {
    let p = edited_costs("unknown-field", |s| {
        s.replace("contention = 1.15", "contension = 1.15")
    });
    let o = plan("4096", "f16", &p, false);
    assert_input_error(&o, &["mc2-unknown-field.toml", "contension"]);
}

#[test]
fn missing_cost_file_is_an_input_error() {
    let o = plan("4096", "f16", Path::new("/nonexistent/costs.toml"), false);
    assert_input_error(&o, &["cannot read cost file", "/nonexistent/costs.toml"]);
}

#[test]
fn shape_other_than_the_rows_model_was_measured_for_is_an_input_error() {
    let o = plan("4096", "bf16", Path::new(SEED_COSTS), false);
    assert_input_error(&o, &["[shape]", "K=3072 N=8192 dtype=f16"]);
}
