//! The committed JSON Schemas (docs/schemas/) are the ones the types generate. A type that
//! changed without its schema fails here; `CONFORM_BLESS_SCHEMAS=1 cargo test -p
//! conform-metadata --test schemas_up_to_date` rewrites them (review the diff, commit both).

use conform_metadata::schema::{published, render};
use std::path::PathBuf;

fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/schemas")
}

#[test]
fn committed_schemas_match_the_types() {
    let dir = schema_dir();
    let bless = std::env::var_os("CONFORM_BLESS_SCHEMAS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for s in published() {
        let path = dir.join(format!("{}.schema.json", s.name));
        let want = render(&s.schema);
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            if bless {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &want).unwrap();
            } else {
                stale.push(path.display().to_string());
            }
        }
    }
    assert!(
        stale.is_empty(),
        "out of date (the types changed; rerun with CONFORM_BLESS_SCHEMAS=1 and commit): {}",
        stale.join(", ")
    );
    // Nothing else in the folder: a schema whose type was removed must be removed too.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".schema.json"))
        .collect();
    names.sort();
    let mut expected: Vec<String> = published()
        .iter()
        .map(|s| format!("{}.schema.json", s.name))
        .collect();
    expected.sort();
    assert_eq!(
        names, expected,
        "docs/schemas/ holds schemas of no published type"
    );
}

#[test]
fn every_schema_is_a_valid_draft_2020_12_schema() {
    for s in published() {
        let json = serde_json::to_value(&s.schema).unwrap();
        assert_eq!(
            json["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{}",
            s.name
        );
        jsonschema::draft202012::meta::validate(&json)
            .unwrap_or_else(|e| panic!("{}: not a valid schema: {e}", s.name));
    }
}

#[test]
fn the_worker_protocol_examples_validate() {
    let schemas = published();
    let find = |n: &str| {
        let s = schemas.iter().find(|s| s.name == n).unwrap();
        jsonschema::validator_for(&serde_json::to_value(&s.schema).unwrap()).unwrap()
    };
    let worker = find("worker-message");
    for line in [
        r#"{"type":"hello","protocol":1,"worker":{"name":"w","version":"1"},"device":"cpu","capabilities":{"ops":{"x":{"dtypes":["f32"],"limits":{"ranks":{"max":8}}}}}}"#,
        r#"{"type":"unavailable","protocol":1,"reason":"no torch_npu"}"#,
        r#"{"type":"result","id":"7","status":"ok","outputs":"/tmp/o.safetensors","timings_us":[1.5]}"#,
    ] {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(worker.is_valid(&v), "{line}");
    }
    for bad in [
        r#"{"type":"result","id":"7","status":"fine"}"#,
        r#"{"type":"hello","protocol":1}"#,
        r#"{"type":"greeting"}"#,
    ] {
        let v: serde_json::Value = serde_json::from_str(bad).unwrap();
        assert!(!worker.is_valid(&v), "{bad} should not validate");
    }
    let harness = find("harness-message");
    let run = r#"{"type":"run","id":"1","case_id":"c","input_set":0,"op":"fa_prefill","params":{"b":1},"inputs":"i","outputs":"o","timing":{"warmup":1,"iterations":3}}"#;
    assert!(harness.is_valid(&serde_json::from_str(run).unwrap()));
    assert!(harness.is_valid(&serde_json::json!({"type": "shutdown"})));
}
