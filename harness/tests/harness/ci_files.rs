//! The CI definitions under ci/ are real: every YAML file parses, the pipelines have the jobs
//! and commands they promise (CANN setup, torch_npu worker, sharded nextest, JUnit and report
//! artifacts, the nightly perf gate), every script they call exists, and the scripts' non-NPU
//! parts run with --dry-run.

use std::path::{Path, PathBuf};
use std::process::Command;
use yaml_rust2::{Yaml, YamlLoader};

use crate::repo;
use repo::repo;

fn files_under(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            files_under(&p, exts, out);
        } else if p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| exts.contains(&e))
        {
            out.push(p);
        }
    }
}

fn load(path: &Path) -> Yaml {
    let text = std::fs::read_to_string(path).unwrap();
    let mut docs = YamlLoader::load_from_str(&text)
        .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
    assert_eq!(docs.len(), 1, "{}: one document expected", path.display());
    docs.remove(0)
}

/// Every string anywhere under `y`, in document order.
fn strings(y: &Yaml, out: &mut Vec<String>) {
    match y {
        Yaml::String(s) => out.push(s.clone()),
        Yaml::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Yaml::Hash(h) => h.iter().for_each(|(k, v)| {
            strings(k, out);
            strings(v, out);
        }),
        _ => {}
    }
}

fn all_strings(y: &Yaml) -> Vec<String> {
    let mut v = Vec::new();
    strings(y, &mut v);
    v
}

fn any_contains(y: &Yaml, needle: &str) -> bool {
    all_strings(y).iter().any(|s| s.contains(needle))
}

#[test]
fn every_yaml_under_ci_parses() {
    let mut files = Vec::new();
    files_under(&repo().join("ci"), &["yml", "yaml"], &mut files);
    assert!(files.len() >= 2, "expected the Atlas pipelines under ci/");
    for f in files {
        let doc = load(&f);
        assert!(
            doc.as_hash().is_some_and(|h| !h.is_empty()),
            "{}: not a mapping",
            f.display()
        );
    }
}

#[test]
fn gitlab_pipeline_builds_once_shards_from_the_archive_requires_the_npu_and_checks_golden() {
    let doc = load(&repo().join("ci/atlas/gitlab-ci.yml"));
    // The NPU path is required: an unavailable torch_npu worker fails the job.
    let required = doc["variables"]["CONFORM_REQUIRE_TARGETS"]
        .as_str()
        .unwrap();
    assert!(required.split(',').any(|t| t == "torch_npu"), "{required}");
    // Toolchain at the MSRV and cargo-nextest before anything builds.
    assert!(any_contains(
        &doc["default"]["before_script"],
        "ci/atlas/setup-rust.sh"
    ));
    // CANN and ATB found under whichever layout the runner has, never one hard-coded path.
    let before = all_strings(&doc["default"]["before_script"]);
    assert!(
        before.contains(&"source ci/atlas/ascend-env.sh".to_string()),
        "{before:?}"
    );
    assert!(!any_contains(&doc, "ascend-toolkit/set_env.sh"));
    // The worker's environment file is sourced, then ATB again with the ABI it recorded.
    let tests_script = all_strings(&doc["tests"]["script"]);
    let env_file = tests_script
        .iter()
        .position(|l| l.contains("source npu.env"))
        .unwrap();
    assert_eq!(tests_script[env_file + 1], "source ci/atlas/ascend-env.sh");
    // One build; the test binaries archived once.
    let build = &doc["build"];
    assert!(any_contains(
        &build["script"],
        "cargo nextest archive --release --workspace --archive-file conform-tests.tar.zst"
    ));
    assert!(any_contains(
        &build["artifacts"]["paths"],
        "conform-tests.tar.zst"
    ));
    // Four shards run from the archive, each with the NPU worker set up.
    let tests = &doc["tests"];
    assert_eq!(tests["parallel"].as_i64(), Some(4));
    assert!(any_contains(
        &tests["script"],
        "--archive-file conform-tests.tar.zst"
    ));
    assert!(any_contains(
        &tests["script"],
        "--partition count:${CI_NODE_INDEX}/${CI_NODE_TOTAL}"
    ));
    assert!(any_contains(
        &tests["script"],
        "ci/atlas/setup-torch-npu.sh"
    ));
    assert!(
        !any_contains(&tests["script"], "cargo build"),
        "shards must not rebuild"
    );
    // The shards' JUnit merged and published.
    let junit = &doc["junit"];
    assert!(any_contains(
        &junit["script"],
        "ci/atlas/merge-junit.py junit.xml"
    ));
    assert_eq!(
        junit["artifacts"]["reports"]["junit"].as_str(),
        Some("junit.xml")
    );
    // Golden data verified on the aarch64 host.
    let golden = &doc["golden-aarch64"];
    assert!(any_contains(&golden["script"], "conform golden verify"));
    assert!(all_strings(&doc["default"]["tags"]).contains(&"arm64".to_string()));
    // The report as an artifact; the nightly gate on the schedule.
    assert!(all_strings(&doc["report"]["artifacts"]["paths"])
        .contains(&"report/index.html".to_string()));
    let nightly = &doc["nightly-perf"];
    assert!(any_contains(
        &nightly["rules"],
        "$CI_PIPELINE_SOURCE == \"schedule\""
    ));
    assert!(any_contains(&nightly["script"], "bash ci/nightly-perf.sh"));
    assert!(all_strings(&nightly["artifacts"]["paths"])
        .contains(&"nightly-out/report/index.html".to_string()));
}

#[test]
fn github_workflow_builds_once_shards_from_the_archive_requires_the_npu_and_checks_golden() {
    let doc = load(&repo().join("ci/atlas/github-actions.yml"));
    let on = &doc["on"];
    assert!(on["pull_request"].as_hash().is_some() || !on["pull_request"].is_badvalue());
    assert!(any_contains(&on["schedule"], "0 2 * * *"));
    assert!(!on["workflow_dispatch"].is_badvalue());
    // Every step sources the layout-independent environment script, never one layout's
    // set_env.sh (CANN 8.5 installs under <base>/cann, earlier releases under ascend-toolkit).
    assert_eq!(
        doc["env"]["BASH_ENV"].as_str(),
        Some("${{ github.workspace }}/ci/atlas/ascend-env.sh")
    );
    assert!(!any_contains(&doc, "ascend-toolkit/set_env.sh"));
    assert!(repo().join("ci/atlas/ascend-env.sh").is_file());
    let required = doc["env"]["CONFORM_REQUIRE_TARGETS"].as_str().unwrap();
    assert!(required.split(',').any(|t| t == "torch_npu"), "{required}");
    let jobs = &doc["jobs"];
    for name in [
        "build",
        "tests",
        "junit",
        "golden-aarch64",
        "report",
        "nightly-perf",
    ] {
        let job = &jobs[name];
        assert!(job.as_hash().is_some(), "job {name} missing");
        let labels = all_strings(&job["runs-on"]);
        for l in ["self-hosted", "linux", "arm64", "atlas-a2"] {
            assert!(
                labels.contains(&l.to_string()),
                "job {name}: runs-on lacks {l}"
            );
        }
        let steps = job["steps"].as_vec().expect("steps");
        assert_eq!(steps[0]["uses"].as_str(), Some("actions/checkout@v4"));
    }
    // Jobs that talk to the NPU set up CANN and the worker; those that build install Rust.
    for name in ["tests", "report", "nightly-perf"] {
        let steps = &jobs[name]["steps"];
        assert!(
            any_contains(steps, "ci/atlas/setup-torch-npu.sh --detect"),
            "{name}"
        );
        assert!(any_contains(steps, "ci/atlas/setup-torch-npu.sh"), "{name}");
    }
    for name in ["build", "tests", "nightly-perf"] {
        assert!(
            any_contains(&jobs[name]["steps"], "ci/atlas/setup-rust.sh"),
            "{name}"
        );
    }
    // One build, archived; the shards run from the archive and never rebuild.
    assert!(any_contains(
        &jobs["build"]["steps"],
        "cargo nextest archive --release --workspace --archive-file conform-tests.tar.zst"
    ));
    let tests = &jobs["tests"];
    assert_eq!(
        tests["strategy"]["matrix"]["shard"].as_vec().map(Vec::len),
        Some(4)
    );
    assert!(any_contains(
        &tests["steps"],
        "cargo nextest run --archive-file conform-tests.tar.zst --workspace-remap . --profile ci --partition count:${{ matrix.shard }}/${SHARDS}"
    ));
    assert!(!any_contains(&tests["steps"], "cargo build"));
    assert!(any_contains(&tests["steps"], "target/nextest/ci/junit.xml"));
    // JUnit merged and published; golden verified on aarch64; artifacts uploaded always.
    assert!(any_contains(
        &jobs["junit"]["steps"],
        "ci/atlas/merge-junit.py junit.xml"
    ));
    assert!(any_contains(
        &jobs["golden-aarch64"]["steps"],
        "conform golden verify"
    ));
    for name in ["tests", "junit", "report", "nightly-perf"] {
        let steps = jobs[name]["steps"].as_vec().unwrap();
        assert!(
            steps
                .iter()
                .any(|s| s["uses"].as_str() == Some("actions/upload-artifact@v4")
                    && s["if"].as_str() == Some("always()")),
            "{name}: no artifact upload that runs always"
        );
    }
    assert!(any_contains(&jobs["report"]["steps"], "--report report"));
    let nightly = &jobs["nightly-perf"];
    assert!(nightly["if"]
        .as_str()
        .is_some_and(|s| s.contains("schedule")));
    assert!(any_contains(&nightly["steps"], "bash ci/nightly-perf.sh"));
}

#[test]
fn setup_rust_and_merge_junit_work_here() {
    let cwd = tempfile::tempdir().unwrap();
    let o = bash(
        &[
            repo().join("ci/atlas/setup-rust.sh").to_str().unwrap(),
            "--dry-run",
        ],
        cwd.path(),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("MSRV"), "{out}");
    // Two shard files merge into one with the totals summed.
    let shard = |n: u32, fail: u32| {
        format!(
            "<?xml version=\"1.0\"?><testsuites><testsuite name=\"s{n}\" tests=\"2\" \
             failures=\"{fail}\" errors=\"0\" skipped=\"0\"><testcase name=\"a\"/>\
             <testcase name=\"b\"/></testsuite></testsuites>"
        )
    };
    let (a, b) = (cwd.path().join("a.xml"), cwd.path().join("b.xml"));
    std::fs::write(&a, shard(1, 0)).unwrap();
    std::fs::write(&b, shard(2, 1)).unwrap();
    let merged = cwd.path().join("junit.xml");
    let o = Command::new("python3")
        .arg(repo().join("ci/atlas/merge-junit.py"))
        .args([&merged, &a, &b])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&merged).unwrap();
    assert!(
        text.contains("tests=\"4\"") && text.contains("failures=\"1\""),
        "{text}"
    );
    assert!(
        text.contains("name=\"s1\"") && text.contains("name=\"s2\""),
        "{text}"
    );
    // A file that is not JUnit is named.
    std::fs::write(&b, "not xml").unwrap();
    let o = Command::new("python3")
        .arg(repo().join("ci/atlas/merge-junit.py"))
        .args([&merged, &a, &b])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("b.xml"));
}

#[test]
fn scripts_named_by_the_pipelines_exist() {
    let mut yamls = Vec::new();
    files_under(&repo().join("ci"), &["yml", "yaml"], &mut yamls);
    let mut named = 0;
    for y in yamls {
        for s in all_strings(&load(&y)) {
            for word in s.split_whitespace() {
                let word = word.trim_matches(|c| c == '"' || c == '\'');
                if word.starts_with("ci/") && word.ends_with(".sh") {
                    named += 1;
                    assert!(
                        repo().join(word).is_file(),
                        "{} names {word}, which does not exist",
                        y.display()
                    );
                }
            }
        }
    }
    assert!(named >= 4);
}

fn bash(args: &[&str], cwd: &Path) -> std::process::Output {
    Command::new("bash")
        .args(args)
        .current_dir(cwd)
        .env_remove("CONFORM_TARGET")
        .env_remove("CONFORM_HARDWARE")
        .output()
        .expect("bash runs")
}

#[test]
fn every_script_is_valid_bash() {
    let mut scripts = Vec::new();
    files_under(&repo().join("ci"), &["sh"], &mut scripts);
    assert!(scripts.len() >= 2);
    for s in scripts {
        let o = bash(&["-n", s.to_str().unwrap()], &repo());
        assert!(
            o.status.success(),
            "{}: {}",
            s.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn setup_torch_npu_dry_run_plans_the_worker_environment() {
    let cwd = tempfile::tempdir().unwrap();
    let script = repo().join("ci/atlas/setup-torch-npu.sh");
    let o = bash(
        &[script.to_str().unwrap(), "--dry-run", "--venv", "venv-x"],
        cwd.path(),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("-m venv"), "{out}");
    assert!(out.contains("torch_npu=="), "{out}");
    assert!(out.contains("torch.npu.is_available()"), "{out}");
    let venv = cwd.path().join("venv-x");
    assert!(
        out.contains(&format!("CONFORM_PYTHON={}/bin/python", venv.display())),
        "{out}"
    );
    // Nothing was created.
    assert!(!venv.exists());
    // The compatibility check is planned too, and the pinned requirements file is used.
    assert!(out.contains("torch-npu-compat.tsv"), "{out}");
    assert!(out.contains("requirements-npu.txt"), "{out}");
    // Misuse is a usage error, not a half-run.
    let o = bash(&[script.to_str().unwrap(), "--no-such-flag"], cwd.path());
    assert_eq!(o.status.code(), Some(2));
}

fn bash_with(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> std::process::Output {
    Command::new("bash")
        .args(args)
        .current_dir(cwd)
        .envs(env.iter().copied())
        .output()
        .expect("bash runs")
}

#[test]
fn setup_torch_npu_checks_cann_against_the_compatibility_table_before_installing() {
    let cwd = tempfile::tempdir().unwrap();
    let script = repo().join("ci/atlas/setup-torch-npu.sh");
    let s = script.to_str().unwrap();
    // A CANN release the table lists: its newest pair is chosen.
    let o = bash_with(
        &[s, "--dry-run"],
        cwd.path(),
        &[("CANN_VERSION", "8.2.RC1")],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    // torch (the CPU wheel from PyTorch's CPU index on x86_64), then torch_npu.
    assert!(
        out.contains("torch==2.6.0") && out.contains("torch_npu==2.6.0"),
        "{out}"
    );
    // A CANN release outside the table: exit 2 with the table's rows, nothing planned.
    let o = bash_with(&[s, "--dry-run"], cwd.path(), &[("CANN_VERSION", "7.0.0")]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("CANN 7.0.0 is not in"), "{err}");
    assert!(err.contains("8.1.RC1\t2.5.1\t2.5.1"), "{err}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("-m venv"));
    // A torch_npu pin that was not built for the installed CANN: exit 2 with that CANN's rows.
    let o = bash_with(
        &[s, "--dry-run"],
        cwd.path(),
        &[("CANN_VERSION", "8.2.RC1"), ("TORCH_NPU_VERSION", "2.5.1")],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("8.2.RC1\t2.5.1\t2.5.1.post1"), "{err}");
    assert!(!err.contains("8.1.RC1"), "{err}");
}

#[test]
fn nightly_perf_dry_run_plans_record_compare_report() {
    let cwd = tempfile::tempdir().unwrap();
    let script = repo().join("ci/nightly-perf.sh");
    let o = bash(
        &[
            script.to_str().unwrap(),
            "--dry-run",
            "--suite",
            "fa_prefill",
            "--threshold",
            "0.05",
            "--baseline",
            "base.json",
        ],
        cwd.path(),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    // The plan names the binary cargo builds (the script times what cargo says it built).
    assert!(out.contains("<the conform binary cargo builds>"), "{out}");
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let pos = |needle: &str| {
        out.find(needle)
            .unwrap_or_else(|| panic!("dry run lacks `{needle}`:\n{out}"))
    };
    let record = pos("perf record --out nightly-out/perf.json");
    let compare = pos("perf compare --baseline base.json");
    let report = pos(" report --input nightly-out/results.json");
    assert!(record < compare && compare < report);
    assert!(out.contains("--suite fa_prefill"));
    assert!(out.contains("--threshold 0.05"));
    assert!(out.contains("--json nightly-out/results.json"));
    assert!(!cwd.path().join("nightly-out").exists());
    // Without a hand-kept baseline the plan gates against the history store, then adds
    // tonight to it, and draws the report's trend from it.
    let o = bash(&[script.to_str().unwrap(), "--dry-run"], cwd.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(!out.contains("perf compare"), "{out}");
    let gate = pos_in(
        &out,
        "perf history gate --db perf-history/perf-history.sqlite --candidate nightly-out/perf.json",
    );
    let ingest = pos_in(
        &out,
        "perf history ingest --db perf-history/perf-history.sqlite nightly-out/perf.json",
    );
    let report = pos_in(&out, "--history perf-history/perf-history.sqlite");
    assert!(gate < ingest && ingest < report, "{out}");
    let o = bash(
        &[script.to_str().unwrap(), "--dry-run", "--threshold", "x"],
        cwd.path(),
    );
    assert_eq!(o.status.code(), Some(2));
}

fn pos_in(out: &str, needle: &str) -> usize {
    out.find(needle)
        .unwrap_or_else(|| panic!("dry run lacks `{needle}`:\n{out}"))
}

#[test]
fn contribution_guide_gives_the_one_command() {
    let text = std::fs::read_to_string(repo().join("ci/contribution.md")).unwrap();
    assert!(text.contains("validate --worker path/to/target.toml"));
    assert!(text.contains("fresh seeds"));
    assert!(text.contains("conform report --input"));
}

/// The regexes of `.config/nextest.toml`'s overrides into the `device` test group, per profile.
fn nextest_device_regexes() -> Vec<(String, regex::Regex)> {
    let path = repo().join(".config/nextest.toml");
    let config: toml::Value = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut found = Vec::new();
    for (profile, body) in config["profile"].as_table().unwrap() {
        let overrides = body.get("overrides").and_then(|o| o.as_array());
        for o in overrides.into_iter().flatten() {
            if o.get("test-group").and_then(|g| g.as_str()) != Some("device") {
                continue;
            }
            let filter = o["filter"].as_str().unwrap();
            let re = filter
                .split_once("test(/")
                .and_then(|(_, rest)| rest.split_once("/)"))
                .map(|(re, _)| re)
                .unwrap_or_else(|| panic!("{profile}: `{filter}` has no test(/regex/)"));
            assert!(
                filter.contains("binary(conformance)"),
                "{profile}: {filter}"
            );
            found.push((profile.clone(), regex::Regex::new(re).unwrap()));
        }
    }
    found
}

/// Every shipped worker's trials land in nextest's one-at-a-time `device` group exactly when
/// its `device_group` is not `cpu`, through the trial kind the conformance target gives them
/// (no list of worker names to keep by hand).
#[test]
fn nextest_serialises_exactly_the_device_groups_trials() {
    use conform_harness::runner::device::trial_kind;
    let regexes = nextest_device_regexes();
    let profiles: Vec<&str> = regexes.iter().map(|(p, _)| p.as_str()).collect();
    assert!(
        profiles.contains(&"default") && profiles.contains(&"ci"),
        "{profiles:?}"
    );
    let mut device_targets = 0;
    for entry in std::fs::read_dir(repo().join("targets")).unwrap() {
        let toml_path = entry.unwrap().path().join("target.toml");
        if !toml_path.is_file() {
            continue;
        }
        let target = toml_path.parent().unwrap().file_name().unwrap();
        let config = conform_targets::worker::WorkerConfig::load(&toml_path).unwrap();
        let bare = format!("{}::fa_prefill.case", target.to_str().unwrap());
        let kind = trial_kind(&config.device_group);
        device_targets += usize::from(kind.is_some());
        // The name nextest sees: libtest prints `[kind] ` before it.
        let listed = kind.map_or(bare.clone(), |k| format!("[{k}] {bare}"));
        for (profile, re) in &regexes {
            assert_eq!(
                re.is_match(&listed),
                config.device_group != "cpu",
                "{profile}: `{listed}` (device_group `{}`)",
                config.device_group
            );
        }
    }
    assert!(
        device_targets >= 2,
        "torch and torch_npu are device targets"
    );
}
