//! Property tests over conform's own readers of outside input: the suite loader, the golden
//! store's MANIFEST reader, the safetensors reader, a worker's `target.toml` reader, and the
//! perf and results readers. Inputs are arbitrary bytes and structured mutations of real files
//! (a line deleted or duplicated, a value replaced, bytes flipped, a file truncated). The
//! property: no panic, no hang, and every error is the reader's typed error naming its file.
//! The number of inputs each property tries is in docs/PERFORMANCE.md.

use conform_harness::golden::manifest::Manifest;
use conform_harness::golden::GoldenError;
use conform_harness::perf::{PerfError, PerfFile, PerfFileIo};
use conform_harness::report::ReportInputs;
use conform_harness::suite::load::parse_suite;
use conform_targets::tensor_file;
use conform_targets::worker::{ConfigError, WorkerConfig};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

use crate::repo;
use repo::repo;

/// Inputs per property: the same in every build (the parsers are cheap).
const CASES: u32 = 2000;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A structured mutation of `text`: delete, duplicate or replace the value of one line, or
/// insert a random token.
fn mutate_lines(text: &str, op: u8, at: usize, token: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        return token.to_string();
    }
    let i = at % lines.len();
    match op % 4 {
        0 => {
            lines.remove(i);
        }
        1 => {
            let l = lines[i].clone();
            lines.insert(i, l);
        }
        2 => {
            if let Some(eq) = lines[i].find('=') {
                lines[i] = format!("{}= {token}", &lines[i][..eq]);
            } else {
                lines[i] = token.to_string();
            }
        }
        _ => {
            let cut = at % (lines[i].len() + 1);
            let mut l = lines[i].clone();
            if l.is_char_boundary(cut) {
                l.insert_str(cut, token);
            }
            lines[i] = l;
        }
    }
    lines.join("\n")
}

fn suite_texts() -> Vec<(PathBuf, String)> {
    conform_harness::suite::select::suite_files(&repo().join("suites"))
        .unwrap()
        .into_iter()
        .map(|p| {
            let t = std::fs::read_to_string(&p).unwrap();
            (p, t)
        })
        .collect()
}

fn target_texts() -> Vec<(PathBuf, String)> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(repo().join("targets")).unwrap() {
        let p = e.unwrap().path().join("target.toml");
        if let Ok(t) = std::fs::read_to_string(&p) {
            all.push((p, t));
        }
    }
    assert!(!all.is_empty(), "no targets/*/target.toml");
    all.sort();
    all
}

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("-1".to_string()),
        Just("1e400".to_string()),
        Just("nan".to_string()),
        Just("\"\"".to_string()),
        Just("[".to_string()),
        Just("{ policy = \"ulp\", max = -3 }".to_string()),
        Just("18446744073709551616".to_string()),
        "[ -~]{0,12}",
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_suite_loader_never_panics_and_names_the_file(
        which in any::<usize>(), op in any::<u8>(), at in any::<usize>(), tok in token(),
        raw in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let suites = suite_texts();
        let (path, text) = &suites[which % suites.len()];
        let mutated = mutate_lines(text, op, at, &tok);
        if let Err(e) = parse_suite(path, &mutated) {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            prop_assert!(e.to_string().contains(&name), "{e}");
        }
        let garbage = String::from_utf8_lossy(&raw).into_owned();
        if let Err(e) = parse_suite(Path::new("garbage.toml"), &garbage) {
            prop_assert!(e.to_string().contains("garbage.toml"), "{e}");
        }
    }

    #[test]
    fn the_target_toml_reader_never_panics_and_names_the_file(
        which in any::<usize>(), op in any::<u8>(), at in any::<usize>(), tok in token(),
        raw in "\\PC{0,200}",
    ) {
        let declarations = target_texts();
        let (path, text) = &declarations[which % declarations.len()];
        let mutated = mutate_lines(text, op, at, &tok);
        for (path, text) in [(path.as_path(), mutated.as_str()), (Path::new("raw/target.toml"), &raw)] {
            match WorkerConfig::parse(path, text) {
                Ok(_) => {}
                Err(e @ (ConfigError::Parse { .. } | ConfigError::Invalid { .. })) => {
                    prop_assert!(e.to_string().contains(&path.display().to_string()), "{e}");
                }
                Err(e) => prop_assert!(false, "parsing text gave {e:?}"),
            }
        }
    }

    #[test]
    fn the_safetensors_reader_never_panics_and_names_the_file(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in any::<usize>(),
        raw in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let path = repo().join(
            "golden/paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token.safetensors",
        );
        let mut bytes = std::fs::read(&path).unwrap();
        for (at, x) in &flips {
            let i = at % bytes.len();
            bytes[i] ^= x;
        }
        // Damage the header more often than the data: that is where the parsing happens.
        if cut % 3 == 0 {
            bytes.truncate(cut % bytes.len());
        }
        if let Err(e) = tensor_file::from_bytes(&path, &bytes) {
            prop_assert!(e.to_string().contains("single-token.safetensors"), "{e}");
        }
        if let Err(e) = tensor_file::from_bytes(Path::new("raw.safetensors"), &raw) {
            prop_assert!(e.to_string().contains("raw.safetensors"), "{e}");
        }
    }

    #[test]
    fn the_perf_reader_never_panics_and_names_the_file(
        op in any::<u8>(), at in any::<usize>(), tok in token(), raw in "\\PC{0,200}",
    ) {
        let fixture = repo().join("cli/tests/fixtures/perf/baseline.json");
        let text = std::fs::read_to_string(&fixture).unwrap();
        let mutated = mutate_lines(&text, op, at, &tok);
        for (path, text) in [(fixture.as_path(), mutated.as_str()), (Path::new("raw.json"), &raw)] {
            if let Err(e) = PerfFile::from_json(text, path) {
                let typed = matches!(
                    e,
                    PerfError::PerfJson { .. }
                        | PerfError::InvalidArgument { .. }
                        | PerfError::InvalidCase { .. }
                        | PerfError::DuplicateCase { .. }
                );
                prop_assert!(typed, "{e:?}");
                prop_assert!(e.to_string().contains(&path.display().to_string()), "{e}");
            }
        }
    }
}

proptest! {
    // Each case writes a file and reads it back through the report's loader: fewer inputs.
    #![proptest_config(ProptestConfig { cases: CASES / 4, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_results_reader_never_panics_and_names_the_file(
        op in any::<u8>(), at in any::<usize>(), tok in token(),
    ) {
        let sample = serde_json::json!({
            "schema_version": 1, "conform_version": "0.1.0", "started_at": "2026-11-24T00:00:00Z",
            "fresh_seeds": false,
            "cases": [{"id": "paged_kv/x", "suite": "paged_kv", "op": "paged_kv",
                       "target": "reference", "status": "passed", "message": "", "seed": 1,
                       "metrics": {}, "duration_ms": 1.0}]
        });
        let text = serde_json::to_string_pretty(&sample).unwrap();
        let mutated = mutate_lines(&text, op, at, &tok);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.json");
        std::fs::write(&path, mutated).unwrap();
        if let Err(e) = ReportInputs::load(&path, &[], None, None) {
            prop_assert!(e.to_string().contains("results.json"), "{e}");
        }
    }

    #[test]
    fn the_golden_manifest_reader_never_panics_and_names_the_file(
        op in any::<u8>(), at in any::<usize>(), tok in token(), raw in "\\PC{0,200}",
    ) {
        let text = std::fs::read_to_string(repo().join("golden/MANIFEST.toml")).unwrap();
        let mutated = mutate_lines(&text, op, at, &tok);
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [("MANIFEST.toml", mutated.as_str()), ("raw/MANIFEST.toml", &raw)] {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
            if let Err(e) = Manifest::read(&path, false) {
                prop_assert!(matches!(e, GoldenError::Manifest { .. }), "{e:?}");
                prop_assert!(e.to_string().contains(&path.display().to_string()), "{e}");
            }
        }
    }
}
