//! `ci/atlas/setup-torch-npu.sh` reads the CANN release from the installed toolkit's version
//! files. Every format it claims to read is checked on fixtures of real releases
//! (`ci/atlas/fixtures/cann/*`: `ascend_toolkit_install.info`, `version.cfg` with its
//! `[component:release]` field, component `version.info` files whose `Version=` is NOT the
//! release on CANN 8.x), and the whole dry run picks the table's torch_npu for the release it
//! detects.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::repo;
use repo::repo_canonical as repo;

fn script() -> PathBuf {
    repo().join("ci/atlas/setup-torch-npu.sh")
}

/// The script with the host's CANN variables removed (the fixtures are the only roots).
fn run(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Output {
    Command::new("bash")
        .arg(script())
        .args(args)
        .current_dir(cwd)
        .env_remove("ASCEND_HOME_PATH")
        .env_remove("ASCEND_TOOLKIT_HOME")
        .env_remove("CANN_VERSION")
        .env_remove("TORCH_NPU_VERSION")
        .envs(env.iter().copied())
        .output()
        .expect("bash runs")
}

#[test]
fn every_fixture_release_is_detected_from_the_right_file() {
    let dir = repo().join("ci/atlas/fixtures/cann");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 8, "{cases:?}");
    let mut seen_formats = std::collections::BTreeSet::new();
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let expected = std::fs::read_to_string(case.join("expected")).unwrap();
        let expected = expected.trim();
        let root = case.join("root");
        let o = run(
            &["--detect-cann", "--cann-root", root.to_str().unwrap()],
            &repo(),
            &[],
        );
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        if expected == "none" {
            assert_eq!(o.status.code(), Some(2), "{name}: {out}{err}");
            assert!(err.contains("no CANN release found"), "{name}: {err}");
            continue;
        }
        assert!(o.status.success(), "{name}: {out}{err}");
        let (release, file) = expected.split_once(' ').unwrap();
        let line = out.trim();
        let (got_release, got_file) = line.split_once(' ').unwrap();
        assert_eq!(got_release, release, "{name}: {line}");
        let got_file = Path::new(got_file);
        assert!(
            got_file.ends_with(file) && got_file.starts_with(&root),
            "{name}: read from {}, expected {file}",
            got_file.display()
        );
        seen_formats.insert(Path::new(file).file_name().unwrap().to_owned());
    }
    // Every format the script claims to read has a fixture.
    for f in ["ascend_toolkit_install.info", "version.cfg", "version.info"] {
        assert!(
            seen_formats.contains(std::ffi::OsStr::new(f)),
            "{seen_formats:?}"
        );
    }
}

#[test]
fn the_dry_run_pins_the_table_pair_for_the_detected_release() {
    // A CANN 8.0.0 toolkit laid out as installed: set_env.sh beside latest/, whose version.cfg
    // says [7.6.0.1.220:8.0.0] and compiler/version.info Version=7.6.0.1.220. The release is
    // 8.0.0 (the table's newest pair for it: torch 2.4.0, torch_npu 2.4.0.post2), never the
    // component version 7.6.0.1.220 that a field-before-the-colon reading gives.
    let tmp = tempfile::tempdir().unwrap();
    let toolkit = tmp.path().join("Ascend/ascend-toolkit");
    let latest = toolkit.join("latest");
    let fixture = repo().join("ci/atlas/fixtures/cann/8.0.0-toolkit-latest/root");
    std::fs::create_dir_all(latest.join("compiler")).unwrap();
    for f in ["version.cfg", "compiler/version.info"] {
        std::fs::copy(fixture.join(f), latest.join(f)).unwrap();
    }
    std::fs::write(toolkit.join("set_env.sh"), "").unwrap();
    let set_env = toolkit.join("set_env.sh");
    let o = run(
        &["--dry-run", "--venv", "v"],
        tmp.path(),
        &[("CANN_SET_ENV", set_env.to_str().unwrap())],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}{err}");
    assert!(out.contains("CANN release 8.0.0 read from"), "{out}");
    assert!(
        out.contains("torch_npu==2.4.0.post2") && !out.contains("7.6.0.1.220"),
        "{out}"
    );
    // On x86_64 the default index's torch is the CUDA build: the CPU wheel comes from
    // PyTorch's CPU index, as the torch_npu installation guide says.
    if cfg!(target_arch = "x86_64") {
        assert!(
            out.contains("torch==2.4.0+cpu --index-url https://download.pytorch.org/whl/cpu"),
            "{out}"
        );
    }
    assert!(!tmp.path().join("v").exists());
}

#[test]
fn the_compatibility_table_has_only_the_official_pairs() {
    // From Ascend/pytorch COMPATIBILITY.en.md (its TorchNPU version mapping table): CANN 8.0.0
    // and 9.1.0 have rows, and torch 2.10.0 is a 9.1.0 pair, not a 9.0.0 one.
    let table = std::fs::read_to_string(repo().join("ci/atlas/torch-npu-compat.tsv")).unwrap();
    let rows: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split('\t').collect())
        .collect();
    let has = |cann: &str, torch_npu: &str| rows.iter().any(|r| r[0] == cann && r[2] == torch_npu);
    assert!(has("8.0.0", "2.4.0.post2") && has("8.0.0", "2.1.0.post10"));
    assert!(has("9.1.0", "2.12.0") && has("9.1.0", "2.10.0.post4"));
    assert!(!rows.iter().any(|r| r[0] == "9.0.0" && r[1] == "2.10.0"));
    for r in &rows {
        assert_eq!(r.len(), 5, "{r:?}");
    }
}
