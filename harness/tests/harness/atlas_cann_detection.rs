//! `ci/atlas/setup-torch-npu.sh` and `ci/atlas/ascend-env.sh` find CANN and NNAL's ATB on an
//! Atlas host and read the CANN release. Every version-file format they claim to read is
//! checked on fixtures of real releases (`ci/atlas/fixtures/cann/*`:
//! `ascend_toolkit_install.info`, `version.cfg` with its `[component:release]` field, component
//! `version.info` files whose `Version=` is NOT the release on CANN 8.x; RC, alpha and beta
//! builds read as the release they belong to); every install layout on fixtures of whole
//! Ascend trees (`ci/atlas/fixtures/ascend/*`: `ascend-toolkit/latest`, `cann` and
//! `cann-<release>`, `ASCEND_HOME_PATH` and `ASCEND_TOOLKIT_HOME` elsewhere, NNAL present or
//! not), found by `--detect` and sourced for real by `ascend-env.sh`; and the dry run picks
//! the table's torch_npu for every release it detects, and stops where torch_npu is required
//! without ATB.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::repo;
use repo::repo_canonical as repo;

fn script() -> PathBuf {
    repo().join("ci/atlas/setup-torch-npu.sh")
}

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let dir = repo().join("ci/atlas/fixtures").join(kind);
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    cases
}

/// A shell command with the host's CANN and ATB variables removed, and the Ascend bases set to
/// `bases` (so a real toolkit on the machine never takes part).
fn isolated(mut c: Command, cwd: &Path, bases: &str, env: &[(&str, &str)]) -> Output {
    c.current_dir(cwd);
    for v in [
        "BASH_ENV",
        "CONFORM_ASCEND_ENV",
        "ASCEND_HOME_PATH",
        "ASCEND_TOOLKIT_HOME",
        "ATB_HOME_PATH",
        "CANN_SET_ENV",
        "CANN_VERSION",
        "TORCH_NPU_VERSION",
        "CONFORM_REQUIRE_TARGETS",
        "CONFORM_ATB_CXX_ABI",
        "LD_LIBRARY_PATH",
        "PYTHONPATH",
    ] {
        c.env_remove(v);
    }
    c.env("ASCEND_BASES", bases)
        .envs(env.iter().copied())
        .output()
        .expect("bash runs")
}

fn run(args: &[&str], cwd: &Path, bases: &str, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new("bash");
    c.arg(script()).args(args);
    isolated(c, cwd, bases, env)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn every_fixture_release_is_detected_from_the_right_file() {
    let cases = fixtures("cann");
    assert!(cases.len() >= 14, "{cases:?}");
    let mut seen_formats = std::collections::BTreeSet::new();
    let mut builds = 0;
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let expected = std::fs::read_to_string(case.join("expected")).unwrap();
        let expected: Vec<&str> = expected.lines().collect();
        let root = case.join("root");
        let o = run(
            &["--detect-cann", "--cann-root", root.to_str().unwrap()],
            &repo(),
            "/nonexistent",
            &[],
        );
        let (out, err) = text(&o);
        if expected == ["none"] {
            assert_eq!(o.status.code(), Some(2), "{name}: {out}{err}");
            assert!(err.contains("no CANN release found"), "{name}: {err}");
            continue;
        }
        assert!(o.status.success(), "{name}: {out}{err}");
        let lines: Vec<&str> = out.lines().collect();
        let (release, file) = expected[0].split_once(' ').unwrap();
        let (got_release, got_file) = lines[0].split_once(' ').unwrap();
        assert_eq!(got_release, release, "{name}: {out}");
        let got_file = Path::new(got_file);
        assert!(
            got_file.ends_with(file) && got_file.starts_with(&root),
            "{name}: read from {}, expected {file}",
            got_file.display()
        );
        // A pre-release build says which one it is, after the release it belongs to.
        assert_eq!(&lines[1..], &expected[1..], "{name}: {out}");
        builds += usize::from(expected.len() > 1);
        seen_formats.insert(Path::new(file).file_name().unwrap().to_owned());
    }
    // Every format the script claims to read has a fixture, and so do alpha and beta builds.
    for f in ["ascend_toolkit_install.info", "version.cfg", "version.info"] {
        assert!(
            seen_formats.contains(std::ffi::OsStr::new(f)),
            "{seen_formats:?}"
        );
    }
    assert!(builds >= 4, "{builds} pre-release fixtures");
}

/// A layout fixture's `env` and `expected` lines with `{fixture}` replaced.
fn fixture_lines(case: &Path, file: &str) -> Vec<String> {
    let path = case.join(file);
    if !path.exists() {
        return Vec::new();
    }
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.replace("{fixture}", case.to_str().unwrap()))
        .collect()
}

fn fixture_env(case: &Path) -> Vec<(String, String)> {
    fixture_lines(case, "env")
        .into_iter()
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn every_layout_is_found_with_its_release_and_atb() {
    let cases = fixtures("ascend");
    assert!(cases.len() >= 5, "{cases:?}");
    let (mut with_atb, mut without_atb) = (0, 0);
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let env = fixture_env(&case);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let base = case.join("base");
        let o = run(
            &["--detect", "--ascend-base", base.to_str().unwrap()],
            &repo(),
            "/nonexistent",
            &env,
        );
        let (out, err) = text(&o);
        assert!(o.status.success(), "{name}: {out}{err}");
        let got: Vec<&str> = out.lines().collect();
        assert_eq!(got, fixture_lines(&case, "expected"), "{name}: {err}");
        if out.contains("atb_version=none") {
            without_atb += 1;
        } else {
            with_atb += 1;
        }
    }
    assert!(
        with_atb >= 2 && without_atb >= 2,
        "{with_atb} / {without_atb}"
    );
    // No toolkit anywhere: --detect says so and exits 2.
    let empty = tempfile::tempdir().unwrap();
    let o = run(
        &["--detect", "--ascend-base", empty.path().to_str().unwrap()],
        &repo(),
        "/nonexistent",
        &[],
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(
        out.contains("cann_root=none") && err.contains("no CANN toolkit"),
        "{err}"
    );
}

/// `source ci/atlas/ascend-env.sh` in a `set -eu` shell, then the variables it should have set.
fn sourced(case: &Path, extra: &[(&str, &str)]) -> (Output, Vec<String>) {
    let env = fixture_env(case);
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    env.extend_from_slice(extra);
    let code = "set -eu\nsource ci/atlas/ascend-env.sh\n\
        for v in CONFORM_CANN_SET_ENV CONFORM_CANN_RELEASE CONFORM_CANN_BUILD \
        CONFORM_ATB_VERSION ASCEND_HOME_PATH ATB_HOME_PATH LD_LIBRARY_PATH; do \
        echo \"$v=${!v:-unset}\"; done\necho \"options=$-\"\n";
    let mut c = Command::new("bash");
    c.args(["-c", code]);
    let base = case.join("base");
    let o = isolated(c, &repo(), base.to_str().unwrap(), &env);
    let lines = text(&o).0.lines().map(str::to_string).collect();
    (o, lines)
}

#[test]
fn sourcing_ascend_env_sources_cann_and_atb_and_keeps_the_shell_options() {
    let root = repo().join("ci/atlas/fixtures/ascend");
    // A stock CANN 8.5 host: the toolkit sourced (its set_env.sh extends unset variables, as
    // the real one does, in a `set -u` shell), ATB absent and said so.
    let stock = root.join("cann-8.5.0-stock");
    let (o, lines) = sourced(&stock, &[]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let cann = stock.join("base/cann");
    for want in [
        format!("CONFORM_CANN_SET_ENV={}/set_env.sh", cann.display()),
        "CONFORM_CANN_RELEASE=8.5.0".to_string(),
        format!("ASCEND_HOME_PATH={}", cann.display()),
        "CONFORM_ATB_VERSION=unset".to_string(),
        "ATB_HOME_PATH=unset".to_string(),
    ] {
        assert!(lines.contains(&want), "{want}: {out}");
    }
    assert!(err.contains("no NNAL ATB"), "{err}");
    let opts = lines.iter().find(|l| l.starts_with("options=")).unwrap();
    assert!(opts.contains('e') && opts.contains('u'), "{opts}");
    // NNAL present: ATB sourced too, libatb.so's directory for the ABI asked for on
    // LD_LIBRARY_PATH (ATB's default when not told: 1), the build's release recorded.
    let alpha = root.join("cann-8.5.0.alpha001-unlinked-with-nnal");
    for (abi, dir) in [(None, "cxx_abi_1"), (Some("0"), "cxx_abi_0")] {
        let extra: Vec<(&str, &str)> = abi
            .map(|a| ("CONFORM_ATB_CXX_ABI", a))
            .into_iter()
            .collect();
        let (o, lines) = sourced(&alpha, &extra);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{out}{err}");
        assert!(
            lines.contains(&"CONFORM_CANN_RELEASE=8.5.0".to_string()),
            "{out}"
        );
        assert!(
            lines.contains(&"CONFORM_CANN_BUILD=8.5.0.alpha001".to_string()),
            "{out}"
        );
        assert!(
            lines.contains(&"CONFORM_ATB_VERSION=8.5.0.alpha001".to_string()),
            "{out}"
        );
        let ld = lines
            .iter()
            .find(|l| l.starts_with("LD_LIBRARY_PATH="))
            .unwrap();
        let atb_lib = alpha.join(format!("base/nnal/atb/latest/atb/{dir}/lib"));
        assert!(
            ld.split(['=', ':']).any(|p| Path::new(p) == atb_lib),
            "{ld}"
        );
        assert!(atb_lib.join("libatb.so").is_file());
    }
}

/// A scratch Ascend base whose `cann` directory holds a version-file fixture's files and a
/// set_env.sh.
fn base_with(fixture_root: &Path) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let cann = tmp.path().join("cann");
    copy(fixture_root, &cann);
    std::fs::write(cann.join("set_env.sh"), "").unwrap();
    tmp
}

#[test]
fn the_dry_run_pins_the_table_pair_for_every_release_string() {
    // (fixture, the release it reads, the table's newest torch_npu for it): RC releases, an
    // RC's alpha and beta builds, a release's alpha build. Never the component version
    // (7.6.0.1.220) that a field-before-the-colon reading gives.
    for (fixture, release, torch_npu) in [
        ("8.0.RC1-install-info", "8.0.RC1", "2.2.0"),
        ("8.0.RC2.alpha001-version-cfg", "8.0.RC2", "2.3.1"),
        ("8.0.RC3-version-cfg", "8.0.RC3", "2.4.0"),
        ("8.0.RC3.beta1-install-info", "8.0.RC3", "2.4.0"),
        ("8.0.0-toolkit-latest", "8.0.0", "2.4.0.post2"),
        ("8.5.0.alpha001-install-info", "8.5.0", "2.9.0"),
        ("8.5.0-cann-install-info", "8.5.0", "2.9.0"),
    ] {
        let base = base_with(
            &repo()
                .join("ci/atlas/fixtures/cann")
                .join(fixture)
                .join("root"),
        );
        let work = tempfile::tempdir().unwrap();
        let o = run(
            &["--dry-run", "--venv", "v"],
            work.path(),
            base.path().to_str().unwrap(),
            &[],
        );
        let (out, err) = text(&o);
        assert!(o.status.success(), "{fixture}: {out}{err}");
        assert!(
            out.contains(&format!("CANN {release}\n")),
            "{fixture}: {out}"
        );
        assert!(
            out.contains(&format!("torch_npu=={torch_npu}\n"))
                && out.contains(&format!("CONFORM_CANN_RELEASE={release}\n"))
                && !out.contains("7.6.0.1.220"),
            "{fixture}: {out}"
        );
        assert!(!work.path().join("v").exists());
    }
}

#[test]
fn the_dry_run_of_a_toolkit_layout_installs_the_cpu_wheel() {
    // A CANN 8.0.0 toolkit laid out as installed: set_env.sh beside latest/, whose version.cfg
    // says [7.6.0.1.220:8.0.0]. On x86_64 the default index's torch is the CUDA build: the CPU
    // wheel comes from PyTorch's CPU index, as the torch_npu installation guide says.
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
        "/nonexistent",
        &[("CANN_SET_ENV", set_env.to_str().unwrap())],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(out.contains("CANN release 8.0.0 read from"), "{out}");
    if cfg!(target_arch = "x86_64") {
        assert!(
            out.contains("torch==2.4.0+cpu --index-url https://download.pytorch.org/whl/cpu"),
            "{out}"
        );
    }
}

#[test]
fn without_atb_a_required_torch_npu_stops_the_setup_saying_what_to_install() {
    let root = repo().join("ci/atlas/fixtures/ascend");
    let stock = root.join("cann-8.5.0-stock/base");
    let work = tempfile::tempdir().unwrap();
    let bases = stock.to_str().unwrap();
    // Not required: the ATB-based cases will be skipped, and the dry run goes on.
    let o = run(&["--dry-run", "--venv", "v"], work.path(), bases, &[]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.contains("NNAL ATB: not found; the ATB-based cases will be skipped"),
        "{out}"
    );
    assert!(!out.contains("CONFORM_ATB_VERSION"), "{out}");
    // Required: the real run stops before installing anything (exit 2), naming the package of
    // the same CANN release; the dry run says it would.
    let require = [("CONFORM_REQUIRE_TARGETS", "numpy,torch_npu")];
    let o = run(&["--venv", "v"], work.path(), bases, &require);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(
        err.contains("NNAL ATB is not installed and torch_npu is required")
            && err.contains("Ascend-cann-nnal_8.5.0_linux-")
            && err.contains("mla_decode"),
        "{err}"
    );
    assert!(!work.path().join("v").exists());
    let o = run(&["--dry-run", "--venv", "v"], work.path(), bases, &require);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.contains("a real run would stop here: install NNAL"),
        "{out}"
    );
    // With NNAL: its version recorded beside CANN's for the worker, with the ABI of its torch,
    // and libatb.so loaded as torch_npu will load it.
    let alpha = root.join("cann-8.5.0.alpha001-unlinked-with-nnal/base");
    let o = run(
        &["--dry-run", "--venv", "v"],
        work.path(),
        alpha.to_str().unwrap(),
        &require,
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    for want in [
        "NNAL ATB 8.5.0.alpha001: ",
        "CONFORM_CANN_RELEASE=8.5.0\n",
        "CONFORM_CANN_BUILD=8.5.0.alpha001\n",
        "CONFORM_ATB_VERSION=8.5.0.alpha001\n",
        "CONFORM_ATB_CXX_ABI=",
        "ctypes.CDLL(\"libatb.so\")",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
}

#[test]
fn the_compatibility_table_has_only_the_official_pairs() {
    // From Ascend/pytorch COMPATIBILITY.en.md (its TorchNPU version mapping table): CANN 8.0.0
    // and 9.1.0 have rows, and torch 2.10.0 is a 9.1.0 pair, not a 9.0.0 one; the older
    // 8.0.RC1..RC3 rows as the 6.0.0 release notes print them.
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
    assert!(has("8.0.RC1", "2.1.0.post3") && has("8.0.RC2", "2.2.0.post2"));
    assert!(has("8.0.RC3", "2.3.1.post2") && has("8.0.RC3", "2.1.0.post8"));
    for r in &rows {
        assert_eq!(r.len(), 5, "{r:?}");
    }
}
