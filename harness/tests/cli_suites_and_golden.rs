//! The `conform` binary's contract for suites and the golden store: errors name the file,
//! line and key; a damaged golden file names its case; golden data changes only through
//! bless (never under CI) and accept; documented exit codes.

#[path = "support/cli.rs"]
mod cli;
use cli::{conform, repo, text};
use std::process::Command;

#[path = "support/copy_dir.rs"]
mod copy_dir;
use copy_dir::copy_dir;

/// A scratch project whose only suite is `suite` (as suites/paged_kv.toml), golden store empty.
fn project_with_paged_kv_suite(suite: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("suites")).unwrap();
    std::fs::create_dir_all(dir.path().join("golden")).unwrap();
    std::fs::write(dir.path().join("suites/paged_kv.toml"), suite).unwrap();
    dir
}

/// A scratch project holding a copy of the repository's suites and golden store.
fn scratch_project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("suites"), &dir.path().join("suites"));
    copy_dir(&repo().join("golden"), &dir.path().join("golden"));
    dir
}

#[test]
fn a_typo_in_a_suite_key_exits_2_naming_file_line_and_key() {
    let suite = "[suite]\nname = \"paged_kv\"\nop = \"paged_kv\"\n\n[defaults]\nrecipe = \"reference\"\nchek = { policy = \"bitwise\" }\n";
    let dir = project_with_paged_kv_suite(suite);
    let o = conform(dir.path(), &["list"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("paged_kv.toml:7:1"), "{t}");
    assert!(t.contains("chek"), "{t}");
}

#[test]
fn a_case_timed_with_zero_iterations_is_a_suite_error_naming_file_and_case() {
    let suite = "[suite]\nname = \"paged_kv\"\nop = \"paged_kv\"\n[defaults]\nrecipe = \"reference\"\ncheck = { policy = \"bitwise\" }\n[[case]]\nname = \"x\"\nperf = { iterations = 0 }\nparams = { dtype = \"bf16\", layout = \"BnBsH\", num_blocks = 2, block_size = 16,\n  num_key_value_heads = 1, head_dim = 16, num_tokens = 3 }\n";
    let dir = project_with_paged_kv_suite(suite);
    let o = conform(dir.path(), &["list"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("paged_kv.toml") && t.contains("perf.iterations = 0") && t.contains("/x"),
        "{t}"
    );
}

#[test]
fn an_unknown_op_parameter_is_located_in_the_file() {
    let suite = "[suite]\nname = \"paged_kv\"\nop = \"paged_kv\"\n[defaults]\nrecipe = \"reference\"\ncheck = { policy = \"bitwise\" }\n[[case]]\nname = \"x\"\nparams = { dtype = \"bf16\", layout = \"BnBsH\", num_blocks = 2, block_size = 16,\n  num_key_value_heads = 1, head_dim = 16, num_tokns = 3 }\n";
    let dir = project_with_paged_kv_suite(suite);
    let o = conform(dir.path(), &["list"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("paged_kv.toml:10:") && t.contains("num_tokns"),
        "{t}"
    );
}

#[test]
fn a_bad_check_is_a_suite_error_at_load_naming_file_case_output_and_field() {
    // list and explain read every case's checks when the suites load, as run does: a check
    // with a misspelt parameter stops them all with one error naming where it is written.
    let suite = "[suite]\nname = \"paged_kv\"\nop = \"paged_kv\"\n[defaults]\nrecipe = \"reference\"\ncheck = { policy = \"bitwise\" }\n[[case]]\nname = \"x\"\ntier = \"full\"\nchecks = { key_cache_out = { policy = \"ulp\", mx = 1 } }\nparams = { dtype = \"bf16\", layout = \"BnBsH\", num_blocks = 2, block_size = 16,\n  num_key_value_heads = 1, head_dim = 16, num_tokens = 3 }\n";
    let dir = project_with_paged_kv_suite(suite);
    for args in [&["list"][..], &["explain", "paged_kv/x"], &["run"]] {
        let o = conform(dir.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let t = text(&o);
        assert!(
            t.contains("paged_kv.toml")
                && t.contains("paged_kv/x")
                && t.contains("`checks.key_cache_out`")
                && t.contains("mx"),
            "{args:?}: {t}"
        );
        assert_eq!(t.matches("mx").count(), 1, "{args:?}: reported once: {t}");
    }
}

#[test]
fn flipping_one_byte_of_a_golden_output_is_reported_with_its_case() {
    let dir = scratch_project();
    let id = "mc2_matmul_allreduce/f16/r8-m7-k33-n17/odd-shapes";
    let file = dir.path().join("golden").join(format!("{id}.safetensors"));
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0x01; // in the last tensor's data: `out.out`
    std::fs::write(&file, bytes).unwrap();
    let o = conform(
        dir.path(),
        &[
            "golden",
            "verify",
            "--suite",
            "mc2_matmul_allreduce",
            "--tier",
            "quick",
        ],
    );
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains(id), "{}", text(&o));
    // The main job also catches it, as corruption of the store (naming file and tensor),
    // never as drift of the reference.
    let o = conform(dir.path(), &["run", "--suite", "mc2_matmul_allreduce"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains(id) && t.contains("golden store corruption"),
        "{t}"
    );
    assert!(t.contains("out.out"), "{t}");
    assert!(!t.contains("drift"), "{t}");
}

#[test]
fn the_main_job_refuses_a_missing_or_malformed_manifest_before_running() {
    let dir = scratch_project();
    let manifest = dir.path().join("golden/MANIFEST.toml");
    let good = std::fs::read_to_string(&manifest).unwrap();
    for (what, content) in [
        ("garbage", Some("this is = not [ a manifest")),
        ("unknown format", Some("format = 99\n")),
        ("missing", None),
    ] {
        match content {
            Some(c) => std::fs::write(&manifest, c).unwrap(),
            None => std::fs::remove_file(&manifest).unwrap(),
        }
        let o = conform(dir.path(), &["run", "--suite", "paged_kv"]);
        assert_eq!(o.status.code(), Some(2), "{what}: {}", text(&o));
        let t = text(&o);
        assert!(t.contains("MANIFEST.toml"), "{what}: {t}");
        assert!(!t.contains("PASSED"), "{what}: a case ran: {t}");
    }
    // A wrong digest for one tensor is corruption of that case, named.
    let id = "paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token";
    let start = good.find(&format!("id = \"{id}\"")).unwrap();
    let digest_at = start + good[start..].find("\"out.").unwrap();
    let value_at = digest_at + good[digest_at..].find("= \"").unwrap() + 3;
    let mut damaged = good.clone();
    let flipped = if &good[value_at..value_at + 1] == "0" {
        "1"
    } else {
        "0"
    };
    damaged.replace_range(value_at..value_at + 1, flipped);
    std::fs::write(&manifest, damaged).unwrap();
    let o = conform(dir.path(), &["run", "--suite", "paged_kv"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains(id) && t.contains("golden store corruption"),
        "{t}"
    );
}

#[test]
fn accept_refuses_staged_data_of_a_case_that_changed_after_bless() {
    let dir = scratch_project();
    let suite = dir.path().join("suites/paged_kv.toml");
    let original = std::fs::read_to_string(&suite).unwrap();
    let changed = original.replace(
        "description = \"edge: one decode token\"",
        "description = \"edge: one decode token\"\nseed = 7",
    );
    std::fs::write(&suite, &changed).unwrap();
    let o = conform(dir.path(), &["golden", "bless", "--suite", "paged_kv"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The suite change is reverted before accept: the staged data is stale.
    std::fs::write(&suite, &original).unwrap();
    let o = conform(dir.path(), &["golden", "accept"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("refusing to accept") && t.contains("single-token"),
        "{t}"
    );
    // Nothing moved: the store still verifies.
    let o = conform(dir.path(), &["golden", "verify", "--suite", "paged_kv"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn a_truncated_golden_file_is_a_store_error_naming_it() {
    let dir = scratch_project();
    let id = "paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token";
    let file = dir.path().join("golden").join(format!("{id}.safetensors"));
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let o = conform(dir.path(), &["golden", "verify", "--suite", "paged_kv"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("single-token.safetensors"),
        "{}",
        text(&o)
    );
}

#[test]
fn bless_stages_changes_for_review_and_accept_moves_them_in() {
    let dir = scratch_project();
    // Change one case's seed: its golden data must change, and nothing else.
    let suite = dir.path().join("suites/paged_kv.toml");
    let s = std::fs::read_to_string(&suite).unwrap();
    let s = s.replace(
        "description = \"edge: one decode token\"",
        "description = \"edge: one decode token\"\nseed = 7",
    );
    std::fs::write(&suite, s).unwrap();
    let o = conform(dir.path(), &["golden", "verify", "--suite", "paged_kv"]);
    assert_eq!(o.status.code(), Some(1), "definition drift: {}", text(&o));
    let o = conform(dir.path(), &["golden", "bless", "--suite", "paged_kv"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("changed    paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token"),
        "{t}"
    );
    assert!(t.contains("1 to review"), "{t}");
    let staged = dir.path().join(
        "golden/paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token.safetensors.new",
    );
    assert!(staged.exists());
    assert!(dir.path().join("golden/MANIFEST.toml.new").exists());
    // Nothing was overwritten yet: verify still reports the drift.
    assert_eq!(
        conform(dir.path(), &["golden", "verify", "--suite", "paged_kv"])
            .status
            .code(),
        Some(1)
    );
    let o = conform(dir.path(), &["golden", "accept"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!staged.exists());
    let o = conform(dir.path(), &["golden", "verify", "--suite", "paged_kv"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn bless_refuses_to_run_under_ci() {
    let dir = scratch_project();
    let o = Command::new(env!("CARGO_BIN_EXE_conform"))
        .arg("--root")
        .arg(dir.path())
        .args(["golden", "bless", "--suite", "paged_kv"])
        .env("CI", "true")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("refusing to bless"), "{}", text(&o));
    assert!(!dir.path().join("golden/MANIFEST.toml.new").exists());
}

#[test]
fn an_unlisted_golden_file_is_a_store_error() {
    let dir = scratch_project();
    std::fs::write(
        dir.path().join("golden/stray.safetensors"),
        b"not a tensor file",
    )
    .unwrap();
    let o = conform(dir.path(), &["golden", "verify", "--suite", "w4a16_matmul"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("stray.safetensors"), "{}", text(&o));
}

#[test]
fn exit_codes_for_empty_selections_and_unknown_names() {
    let root = repo();
    assert_eq!(
        conform(&root, &["run", "--filter", "^no-such-case$"])
            .status
            .code(),
        Some(4)
    );
    assert_eq!(
        conform(&root, &["run", "--suite", "no_such_suite"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        conform(
            &root,
            &["run", "--suite", "paged_kv", "--target", "no_such_target"]
        )
        .status
        .code(),
        Some(2)
    );
    assert_eq!(
        conform(&root, &["explain", "no/such/case"]).status.code(),
        Some(2)
    );
}

#[test]
fn run_writes_results_json_and_junit_and_replays_a_seed() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let xml = dir.path().join("r.xml");
    let o = conform(
        &repo(),
        &[
            "run",
            "--suite",
            "w4a16_matmul",
            "--json",
            json.to_str().unwrap(),
            "--junit",
            xml.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let cases = r["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    assert!(cases
        .iter()
        .all(|c| c["status"] == "passed" && c["target"] == "reference"));
    let x = std::fs::read_to_string(&xml).unwrap();
    assert!(
        x.starts_with("<?xml") && x.contains("<testsuites") && x.contains("w4a16_matmul/"),
        "{x}"
    );
    // A fresh-seeds run reports its seeds; replaying one of them reproduces the case.
    let o = conform(
        &repo(),
        &[
            "run",
            "--suite",
            "w4a16_matmul",
            "--fresh-seeds",
            "--no-golden",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let c = &r["cases"][0];
    assert_eq!(r["fresh_seeds"], true);
    let seed = c["seed"].as_u64().unwrap().to_string();
    let filter = format!("^{}$", regex_escape(c["id"].as_str().unwrap()));
    let o = conform(&repo(), &["run", "--filter", &filter, "--seed", &seed]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                vec!['\\', c]
            } else {
                vec![c]
            }
        })
        .collect()
}

/// `golden verify --help` says what the command does with no --tier (every tier, since the
/// store holds full-tier digests too), and the command shows its progress case by case
/// instead of staying silent for minutes.
#[test]
fn golden_verify_checks_every_tier_by_default_as_its_help_says_and_shows_progress() {
    let root = repo();
    let help = conform(&root, &["golden", "verify", "--help"]);
    assert_eq!(help.status.code(), Some(0), "{}", text(&help));
    let h = String::from_utf8_lossy(&help.stdout);
    assert!(h.contains("Checks every tier unless --tier"), "{h}");
    assert!(h.contains("all for the golden commands"), "{h}");

    // The cases of every tier, as `list --tier all` names them.
    let list = conform(&root, &["list", "--suite", "paged_kv", "--tier", "all"]);
    assert_eq!(list.status.code(), Some(0), "{}", text(&list));
    let all: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|l| l.starts_with("paged_kv/"))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    assert!(
        String::from_utf8_lossy(&list.stdout).contains("[full]"),
        "the suite has no full-tier case to tell the default apart: {}",
        text(&list)
    );

    let o = conform(&root, &["golden", "verify", "--suite", "paged_kv"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let n = all.len();
    let progress: Vec<&str> = err.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(progress.len(), n, "one progress line per case: {err}");
    for (i, line) in progress.iter().enumerate() {
        assert!(line.starts_with(&format!("[{}/{n}] ", i + 1)), "{line}");
        let id = line.split_once("] ").unwrap().1;
        assert!(all.iter().any(|a| a == id), "{id} is not a listed case");
    }
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("{n} cases checked")),
        "{}",
        text(&o)
    );
    assert!(!text(&o).contains("panicked at"), "{}", text(&o));
}
