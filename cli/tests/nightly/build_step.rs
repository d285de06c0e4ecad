//! Which conform the nightly script times when `CONFORM` is not set (issue 46, item 8): the
//! binary cargo says it built, wherever that is (`CARGO_TARGET_DIR` honoured), and never a
//! binary it merely finds. Before, the script built with cargo and then timed
//! `<repo>/target/release/conform` whatever cargo had built: under `CARGO_TARGET_DIR` it said
//! no conform exists after a six-minute build, or — with an older binary left in `target/` —
//! timed that one without a word; without cargo it timed a stale binary silently.
//!
//! A stand-in `cargo` on PATH plays the build: it checks the script asked for the conform
//! binary in JSON messages and answers with one artifact line naming
//! `$CARGO_TARGET_DIR/release/conform` (a link to the conform under test).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The stand-in for `cargo build --message-format=json...`.
const FAKE_CARGO: &str = r#"#!/bin/sh
case "$*" in
  *"--bin conform"*"--message-format=json"*) ;;
  *) echo "fake cargo: unexpected arguments: $*" >&2; exit 97 ;;
esac
echo '{"reason":"compiler-artifact","target":{"name":"conform_cli","kind":["lib"]},"executable":null}'
echo '{"reason":"compiler-artifact","target":{"name":"conform","kind":["bin"]},"executable":"'"$CARGO_TARGET_DIR"'/release/conform"}'
echo '{"reason":"build-finished","success":true}'
"#;

fn night(repo: &Path, dir: &Path, path: &str, target_dir: Option<&Path>) -> (Option<i32>, String) {
    let root = dir.join("project");
    let mut c = Command::new("bash");
    c.arg(repo.join("ci/nightly-perf.sh"))
        .args([
            "--target",
            "reference",
            "--hardware",
            "this-cpu",
            "--tier",
            "quick",
        ])
        .args([
            "--suite",
            "fp4_dequant",
            "--filter",
            "mxfp4/bf16/n4-k7168/low_first",
        ])
        .arg("--no-control")
        .arg("--history")
        .arg(dir.join("history"))
        .arg("--out")
        .arg(dir.join("out"))
        .env_remove("CONFORM")
        .env_remove("CARGO_TARGET_DIR")
        .env("CONFORM_ROOT", &root)
        .env("PATH", path)
        .env_remove("CI");
    if let Some(t) = target_dir {
        c.env("CARGO_TARGET_DIR", t);
    }
    let o = c.output().unwrap();
    (
        o.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

pub fn the_night_times_the_binary_cargo_built_under_cargo_target_dir() {
    let (repo, dir, _) = crate::scratch_project();
    let bin = dir.path().join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let cargo = bin.join("cargo");
    std::fs::write(&cargo, FAKE_CARGO).unwrap();
    let mut perms = std::fs::metadata(&cargo).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&cargo, perms).unwrap();
    let target_dir: PathBuf = dir.path().join("elsewhere");
    std::fs::create_dir_all(target_dir.join("release")).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_conform"),
        target_dir.join("release/conform"),
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let (code, text) = night(&repo, dir.path(), &path, Some(&target_dir));
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains(&format!(
            "timing with {}",
            target_dir.join("release/conform").display()
        )),
        "the night did not time the binary cargo built under CARGO_TARGET_DIR: {text}"
    );
}

/// Why a PATH without cargo cannot be made here (cargo installed beside the system's tools).
pub fn cargo_in_system_path() -> Option<String> {
    ["/usr/bin/cargo", "/bin/cargo"]
        .iter()
        .find(|p| Path::new(p).exists())
        .map(|p| format!("{p} exists: no PATH without cargo can be made for this trial"))
}

pub fn without_cargo_and_without_conform_the_night_refuses_to_start() {
    let (repo, dir, _) = crate::scratch_project();
    let (code, text) = night(&repo, dir.path(), "/usr/bin:/bin", None);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("no conform to time") && text.contains("set CONFORM"),
        "{text}"
    );
    assert!(!dir.path().join("out/perf.json").exists(), "{text}");
}
