//! The JSON Schemas in docs/schemas/ describe what the CLI really writes: a results file, a
//! perf file, a comparison and an adequacy report produced here validate against them (and
//! the committed schema files are the ones the metadata types generate, checked in
//! `metadata/tests/schemas_up_to_date.rs`).

use std::path::Path;
use std::process::Output;

use crate::cli;
use cli::repo;

/// `conform ARGS...` on the repository, which must succeed.
fn succeeds(args: &[&str]) -> Output {
    let o = cli::conform_clean(&repo(), args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "conform {args:?}:\n{}",
        cli::text(&o)
    );
    o
}

fn committed_schema(name: &str) -> serde_json::Value {
    let path = repo().join(format!("docs/schemas/{name}.schema.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Validates `file` against the committed schema `name`; every violation is listed.
fn assert_valid(name: &str, file: &Path) -> serde_json::Value {
    let schema = committed_schema(name);
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let text = std::fs::read_to_string(file).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{} does not match docs/schemas/{name}.schema.json:\n{}",
        file.display(),
        errors.join("\n")
    );
    doc
}

#[test]
fn results_perf_and_comparison_files_match_their_schemas() {
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n).to_str().unwrap().to_string();
    let (results, perf, cmp) = (p("results.json"), p("perf.json"), p("compare.json"));
    succeeds(&[
        "run",
        "--suite",
        "fp4_dequant",
        "--perf",
        "--iterations",
        "3",
        "--json",
        &results,
    ]);
    let doc = assert_valid("results", Path::new(&results));
    assert!(!doc["cases"].as_array().unwrap().is_empty());
    assert!(doc["cases"][0]["perf"].is_object(), "{}", doc["cases"][0]);

    succeeds(&[
        "perf",
        "record",
        "--suite",
        "paged_kv",
        "--iterations",
        "5",
        "--out",
        &perf,
    ]);
    let doc = assert_valid("perf", Path::new(&perf));
    assert!(!doc["cases"][0]["samples_us"].as_array().unwrap().is_empty());

    succeeds(&[
        "perf",
        "compare",
        "--baseline",
        &perf,
        "--candidate",
        &perf,
        "--json",
        &cmp,
    ]);
    let doc = assert_valid("compare", Path::new(&cmp));
    assert_eq!(doc["cases"][0]["verdict"], "UNCHANGED");
}

#[test]
fn an_adequacy_report_matches_its_schema() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("adequacy.json");
    succeeds(&[
        "adequacy",
        "--suite",
        "fp4_dequant",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
    ]);
    let doc = assert_valid("adequacy", &json);
    assert_eq!(doc["format"], "conform-adequacy-v1");
}

#[test]
fn a_file_that_breaks_the_schema_is_caught() {
    // The check is not vacuous: a status outside the enum and a missing field are violations.
    let schema = committed_schema("results");
    let validator = jsonschema::validator_for(&schema).unwrap();
    let bad = serde_json::json!({
        "schema_version": 1, "conform_version": "0", "started_at": "x", "fresh_seeds": false,
        "cases": [{"id": "a", "suite": "s", "op": "o", "target": "t", "status": "fine",
                   "seed": 1}]
    });
    assert!(!validator.is_valid(&bad));
    let mut good = bad.clone();
    good["cases"][0]["status"] = "passed".into();
    assert!(validator.is_valid(&good), "{good}");
    good["cases"][0].as_object_mut().unwrap().remove("seed");
    assert!(!validator.is_valid(&good));
}
