//! `conform fingerprint` at the CLI edge: the reference fingerprinted against its own claim
//! (exit 0, the JSON and the ledger diff written), a worker given by path with `--worker`, and
//! the subject required exactly once.

use crate::cli;
use cli::{conform_clean as conform, repo, text};

#[test]
fn the_reference_matches_its_claim_and_writes_the_json_and_the_ledger_diff() {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("fp.json");
    let diff = out.path().join("fp.md");
    let o = conform(
        &repo(),
        &[
            "fingerprint",
            "--target",
            "reference",
            "--suite",
            "quant_matmul",
            "--seed",
            "5",
            "--json",
            json.to_str().unwrap(),
            "--ledger-diff",
            diff.to_str().unwrap(),
        ],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("matches claim") && !t.contains("matches none"),
        "{t}"
    );
    assert!(t.contains("reproduce"), "{t}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["format"], "conform-fingerprint-v1", "{v}");
    let rows = std::fs::read_to_string(&diff).unwrap();
    assert!(
        rows.contains("qmm.") && rows.contains("the claimed value"),
        "{rows}"
    );
}

#[test]
fn a_worker_outside_targets_is_fingerprinted_by_path() {
    // A declared worker whose command does not exist: opened by path, it judges nothing and
    // says why (exit 4), as `conform run --worker` does.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("target.toml"),
        "description = \"a worker whose command is not installed\"\n\
         command = \"/nonexistent/conform-ghost-worker\"\nargs = []\ndevice_group = \"cpu\"\n",
    )
    .unwrap();
    let o = conform(
        &repo(),
        &[
            "fingerprint",
            "--worker",
            dir.path().to_str().unwrap(),
            "--suite",
            "paged_kv",
        ],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(4), "{t}");
    assert!(t.contains("conform-ghost-worker"), "{t}");
    assert!(!t.contains("panicked at"), "{t}");
}

#[test]
fn the_subject_is_required_once() {
    let o = conform(&repo(), &["fingerprint", "--suite", "paged_kv"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = conform(
        &repo(),
        &[
            "fingerprint",
            "--target",
            "reference",
            "--worker",
            "targets/numpy",
            "--suite",
            "paged_kv",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("cannot be used with"), "{}", text(&o));
}

#[test]
fn since_an_earlier_fingerprint_names_the_knobs_whose_value_changed() {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("night1.json");
    let fingerprint = |extra: &[&str]| {
        let mut args = vec![
            "fingerprint",
            "--target",
            "reference",
            "--suite",
            "quant_matmul",
            "--seed",
            "7",
        ];
        args.extend_from_slice(extra);
        conform(&repo(), &args)
    };
    let o = fingerprint(&["--json", json.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The same reference on another night: nothing changed.
    let o = fingerprint(&["--since", json.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("fingerprint unchanged since"), "{t}");
    // An earlier night whose first discriminated knob matched another value.
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let knob = v["knobs"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|k| k["verdict"]["verdict"] == "matches")
        .expect("a discriminated knob");
    let id = knob["knob"].as_str().unwrap().to_string();
    knob["verdict"]["value"] = serde_json::json!("an_older_rounding");
    knob["verdict"]["claimed"] = serde_json::json!(false);
    let older = out.path().join("older.json");
    std::fs::write(&older, serde_json::to_vec(&v).unwrap()).unwrap();
    let o = fingerprint(&["--since", older.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("fingerprint changed since"), "{t}");
    assert!(
        t.contains(&format!(
            "{id}: was matches an_older_rounding, now matches claim"
        )),
        "{t}"
    );
    // A file that is no fingerprint is refused before any case runs, naming it.
    std::fs::write(&older, b"{\"format\": \"something-else\"}").unwrap();
    let o = fingerprint(&["--since", older.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("older.json") && t.contains("something-else"),
        "{t}"
    );
}
