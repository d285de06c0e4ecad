//! `conform golden review`: the changes bless staged, decided case by case from the command
//! line (`--list`, `--accept`, `--reject`); without a terminal and without flags it lists and
//! exits 2 instead of waiting for an answer; refused under CI and for stale staged data.
//! (The interactive loop itself is unit-tested on scripted input in `golden::review`.)

use crate::cli;
use cli::{conform, repo, text};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::copy_dir;
use copy_dir::copy_dir;

const A: &str = "paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token";
const B: &str = "paged_kv/bf16/vllm/blocks4-bs16-hkv2-d64-t4-pad4/all-padding";
const C: &str = "paged_kv/bf16/BnBsH/blocks4-bs16-hkv2-d64-t37-pad5";

fn file(dir: &Path, id: &str) -> PathBuf {
    dir.join("golden").join(format!("{id}.safetensors"))
}

fn staged(dir: &Path, id: &str) -> PathBuf {
    dir.join("golden").join(format!("{id}.safetensors.new"))
}

/// A scratch copy of the project (suites and golden store) where cases A and B have new
/// seeds, so a bless changes both.
fn project_with_new_seeds_for_a_and_b() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("suites"), &dir.path().join("suites"));
    copy_dir(&repo().join("golden"), &dir.path().join("golden"));
    let suite = dir.path().join("suites/paged_kv.toml");
    let s = std::fs::read_to_string(&suite).unwrap();
    let s = s
        .replace(
            "description = \"edge: one decode token\"",
            "description = \"edge: one decode token\"\nseed = 7",
        )
        .replace(
            "description = \"edge: every slot is padding; the cache must not change\"",
            "description = \"edge: every slot is padding; the cache must not change\"\nseed = 9",
        );
    std::fs::write(&suite, s).unwrap();
    dir
}

/// A scratch copy of the project where bless has staged changes for A and B (new seeds) and C
/// (its manifest digest edited, so bless restores it).
fn project_with_three_staged_cases() -> tempfile::TempDir {
    let dir = project_with_new_seeds_for_a_and_b();
    let manifest = dir.path().join("golden/MANIFEST.toml");
    let m = std::fs::read_to_string(&manifest).unwrap();
    let c_digest = "1e182507b5f02df163c63d28be3676a899e5f36b37b66aa6ce7a96742daafca4";
    assert_eq!(
        m.matches(c_digest).count(),
        1,
        "C's out.key_cache_out digest"
    );
    std::fs::write(&manifest, m.replace(c_digest, &"0".repeat(64))).unwrap();
    let o = conform(
        dir.path(),
        &["golden", "bless", "--suite", "paged_kv", "--tier", "quick"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("3 to review"), "{}", text(&o));
    for id in [A, B, C] {
        assert!(staged(dir.path(), id).exists(), "{id} staged");
    }
    dir
}

#[test]
fn review_lists_accepts_rejects_and_leaves_the_rest_pending() {
    let dir = project_with_three_staged_cases();
    let root = dir.path();

    let o = conform(root, &["golden", "review", "--list"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains(&format!("changed    {A}: definition changed")),
        "{t}"
    );
    assert!(
        t.contains(&format!("changed    {B}: definition changed")),
        "{t}"
    );
    assert!(
        t.contains(&format!("changed    {C}: out.key_cache_out: max 0 ulp")),
        "{t}"
    );
    assert!(t.contains("3 case(s) pending review"), "{t}");

    // Without a terminal and without flags: the list, and exit 2 naming the flags.
    let o = conform(root, &["golden", "review"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains(A) && text(&o).contains("--accept"),
        "{}",
        text(&o)
    );

    // An argument that matches no pending case is an error and decides nothing.
    let o = conform(
        root,
        &[
            "golden",
            "review",
            "--accept",
            A,
            "--reject",
            "no-such-case",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("`no-such-case` matches no pending case"),
        "{}",
        text(&o)
    );
    assert!(staged(root, A).exists());

    let (a_before, b_before) = (
        std::fs::read(file(root, A)).unwrap(),
        std::fs::read(file(root, B)).unwrap(),
    );
    let a_staged = std::fs::read(staged(root, A)).unwrap();
    // A by its id, B by a regex.
    let o = conform(
        root,
        &[
            "golden",
            "review",
            "--accept",
            A,
            "--reject",
            "all-padding$",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("1 accepted, 1 rejected, 1 skipped; 1 still pending"),
        "{}",
        text(&o)
    );
    assert!(!staged(root, A).exists() && !staged(root, B).exists());
    let a_after = std::fs::read(file(root, A)).unwrap();
    assert_ne!(a_after, a_before, "A's golden data changed");
    assert_eq!(a_after, a_staged, "A's staged data moved in");
    assert_eq!(
        std::fs::read(file(root, B)).unwrap(),
        b_before,
        "B unchanged"
    );
    assert!(staged(root, C).exists(), "C still pending");
    assert!(root.join("golden/MANIFEST.toml.new").exists());

    let o = conform(root, &["golden", "review", "--list"]);
    let t = text(&o);
    assert!(t.contains(C) && !t.contains(A) && !t.contains(B), "{t}");
    assert!(t.contains("1 case(s) pending review"), "{t}");

    // The accepted case verifies.
    let filter = format!("^{}$", A.replace('.', "\\."));
    let o = conform(root, &["golden", "verify", "--filter", &filter]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("1 cases checked, 0 drifted"),
        "{}",
        text(&o)
    );

    // Deciding the last case ends the staging.
    let o = conform(root, &["golden", "review", "--accept", C]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!root.join("golden/MANIFEST.toml.new").exists());
    let o = conform(root, &["golden", "review", "--list"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("nothing to review"), "{}", text(&o));
}

#[test]
fn review_is_refused_under_ci_and_for_staged_data_of_a_changed_case() {
    let dir = project_with_three_staged_cases();
    let root = dir.path();
    let o = Command::new(env!("CARGO_BIN_EXE_conform"))
        .arg("--root")
        .arg(root)
        .args(["golden", "review", "--accept", A])
        .env("CI", "true")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("refusing to review"), "{}", text(&o));
    assert!(staged(root, A).exists());

    // A's seed change is reverted after bless: its staged data matches no case any more.
    let suite = root.join("suites/paged_kv.toml");
    let s = std::fs::read_to_string(&suite).unwrap();
    std::fs::write(&suite, s.replace("\nseed = 7", "")).unwrap();
    let o = conform(root, &["golden", "review", "--accept", B]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("refusing to accept") && t.contains(A), "{t}");
    assert!(staged(root, B).exists(), "nothing decided");
}

/// Two blesses of different cases before any accept: the second keeps what the first staged
/// (its manifest entries and its `.new` files), so accepting after both moves in both.
#[test]
fn a_second_bless_keeps_what_the_first_staged() {
    let dir = project_with_new_seeds_for_a_and_b();
    let root = dir.path();
    for id in [A, B] {
        let o = conform(
            root,
            &[
                "golden",
                "bless",
                "--suite",
                "paged_kv",
                "--filter",
                &cli::exact_filter(id),
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(text(&o).contains("1 to review"), "{}", text(&o));
    }
    let o = conform(root, &["golden", "review", "--list"]);
    let t = text(&o);
    for id in [A, B] {
        assert!(
            t.contains(&format!("changed    {id}: definition changed")),
            "{t}"
        );
    }
    let o = conform(root, &["golden", "accept"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A and B are quick-tier cases; the full tier's large cases add only time here.
    let o = conform(
        root,
        &["golden", "verify", "--suite", "paged_kv", "--tier", "quick"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for id in [A, B] {
        assert!(
            !staged(root, id).exists() && file(root, id).exists(),
            "{id}"
        );
    }
}
