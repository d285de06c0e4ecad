//! `conform run --keep-outputs DIR`: every executed input set's tensors are written under DIR
//! and listed in DIR/index.json, equal to what the harness regenerates; a DIR that cannot be
//! used is refused before any case runs (exit 2, naming it), never with a panic.

use conform_harness::case_data::{generate_inputs, reference_outputs};
use conform_harness::suite::select::load_all;
use conform_reference::parallel::Threads;
use conform_targets::tensor_file;
use std::path::Path;
use std::process::Output;

use crate::cli;
use cli::{repo, text};

fn keep_run(dir: &Path) -> Output {
    cli::conform_clean(
        &repo(),
        &[
            "run",
            "--keep-outputs",
            dir.to_str().unwrap(),
            "--filter",
            "special-scales",
        ],
    )
}

#[test]
fn kept_tensors_equal_the_regenerated_inputs_and_expectation() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("kept");
    let o = keep_run(&dir);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("kept the tensors of 2 input set(s)"),
        "{}",
        text(&o)
    );

    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["schema_version"], 1);
    let entries = index["entries"].as_array().unwrap();
    let cases: Vec<_> = load_all(&repo().join("suites"))
        .unwrap()
        .into_iter()
        .filter(|c| c.id.contains("special-scales"))
        .collect();
    assert_eq!(cases.len(), 2);
    assert_eq!(entries.len(), cases.len(), "{index:#}");
    for case in &cases {
        let e = entries
            .iter()
            .find(|e| e["id"] == case.id.as_str())
            .unwrap_or_else(|| panic!("{} not in the index: {index:#}", case.id));
        assert_eq!(e["target"], "reference");
        assert_eq!(e["set"], 0);
        assert_eq!(e["seed"], case.seed);
        assert_eq!(e["status"], "passed");
        let rel = format!("{}/reference/set0", case.id);
        assert_eq!(e["path"], rel.as_str());
        let files: Vec<&str> = e["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        // Bitwise checks need no oracle.
        assert_eq!(
            files,
            [
                "inputs.safetensors",
                "outputs.safetensors",
                "expected.safetensors"
            ]
        );
        let set = dir.join(&rel);
        assert!(!set.join("oracle.safetensors").exists());

        let inputs = generate_inputs(case, case.seed).unwrap();
        let expected = reference_outputs(case, &case.recipe, &inputs, Threads(1)).unwrap();
        let read = |f: &str| {
            tensor_file::read(
                &set.join(f),
                conform_targets::input_file::Limit::GOLDEN_TENSORS,
            )
            .unwrap()
        };
        let (i, x, out) = (
            read("inputs.safetensors"),
            read("expected.safetensors"),
            read("outputs.safetensors"),
        );
        assert_eq!(i.tensors, inputs, "{}", case.id);
        assert_eq!(x.tensors, expected, "{}", case.id);
        // The reference target is judged bit for bit: its outputs are the expectation.
        assert_eq!(out.tensors, expected, "{}", case.id);
        for (f, role) in [(&i, "inputs"), (&x, "expected"), (&out, "outputs")] {
            let m = &f.metadata;
            assert_eq!(m["role"], role);
            assert_eq!(m["case_id"], case.id);
            assert_eq!(m["target"], "reference");
            assert_eq!(m["input_set"], "0");
            assert_eq!(m["seed"], case.seed.to_string());
            assert_eq!(m["recipe"], case.recipe);
        }
    }

    // A second run into the same directory (an earlier --keep-outputs one) is accepted and
    // rewrites it.
    let o = keep_run(&dir);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn an_unusable_keep_outputs_dir_is_refused_before_any_case_runs() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let full = d.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("precious.txt"), b"keep me").unwrap();
    for bad in [file.clone(), full.clone(), file.join("sub")] {
        let o = keep_run(&bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", text(&o));
        let out = text(&o);
        assert!(out.contains(bad.to_str().unwrap()), "{out}");
        assert!(out.contains("error:"), "{out}");
        // Nothing ran: no case line, no summary table.
        assert!(!out.contains("PASSED") && !out.contains("total"), "{out}");
    }
    // The refused directory was left alone.
    assert_eq!(
        std::fs::read(full.join("precious.txt")).unwrap(),
        b"keep me"
    );
    assert_eq!(std::fs::read_dir(&full).unwrap().count(), 1);
}
