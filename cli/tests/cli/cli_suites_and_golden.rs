//! The `conform` binary's contract for suites and the golden store: errors name the file,
//! line and key; a damaged golden file names its case; golden data changes only through
//! bless (never under CI) and accept; documented exit codes.
//!
//! Deterministic outputs are compared as snapshots (snap.rs: `[ROOT]` for the project
//! root, `[MS]` for durations; `SNAPSHOTS=overwrite` rewrites them after an intended change).

use crate::cli;
use cli::{conform, repo, text};

use crate::snap;
use snap::{conform_snap, conform_snap_with};

use conform_metadata::exit_code;
use snapbox::{str, IntoData};
use std::path::PathBuf;

use crate::copy_dir;
use copy_dir::copy_dir;

/// A scratch project whose only suite is `suite` (as suites/paged_kv.toml), golden store empty.
fn project_with_paged_kv_suite(suite: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("suites")).unwrap();
    std::fs::create_dir_all(dir.path().join("golden")).unwrap();
    std::fs::write(dir.path().join("suites/paged_kv.toml"), suite).unwrap();
    dir
}

/// The canonical path of a scratch project, as conform prints it (the snapshots redact it).
fn root_of(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().canonicalize().unwrap()
}

/// A scratch project holding a copy of the repository's suites and golden store.
fn scratch_project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("suites"), &dir.path().join("suites"));
    copy_dir(&repo().join("golden"), &dir.path().join("golden"));
    dir
}

#[test]
fn a_case_timed_with_zero_iterations_is_a_suite_error_naming_file_and_case() {
    let suite = "[suite]\nname = \"paged_kv\"\nop = \"paged_kv\"\n[defaults]\nrecipe = \"reference\"\ncheck = { policy = \"bitwise\" }\n[[case]]\nname = \"x\"\nperf = { iterations = 0 }\nparams = { dtype = \"bf16\", layout = \"BnBsH\", num_blocks = 2, block_size = 16,\n  num_key_value_heads = 1, head_dim = 16, num_tokens = 3 }\n";
    let dir = project_with_paged_kv_suite(suite);
    conform_snap(&root_of(&dir), &["list"])
        .code(exit_code::USAGE)
        .stdout_eq(str![""])
        .stderr_eq(str![[r#"
error: [ROOT]/suites/paged_kv.toml: case `paged_kv/x`: `perf.iterations = 0`: a timed case needs at least 1 iteration

"#]]);
}

#[test]
fn an_unknown_op_parameter_is_located_in_the_file() {
    let suite = "[suite]\nname = \"paged_kv\"\nop = \"paged_kv\"\n[defaults]\nrecipe = \"reference\"\ncheck = { policy = \"bitwise\" }\n[[case]]\nname = \"x\"\nparams = { dtype = \"bf16\", layout = \"BnBsH\", num_blocks = 2, block_size = 16,\n  num_key_value_heads = 1, head_dim = 16, num_tokns = 3 }\n";
    let dir = project_with_paged_kv_suite(suite);
    conform_snap(&root_of(&dir), &["list"])
        .code(exit_code::USAGE)
        .stdout_eq(str![""])
        .stderr_eq(str![[r#"
error: [ROOT]/suites/paged_kv.toml:10:43: case `paged_kv/x`: unknown parameter `num_tokns`: op `paged_kv`: parameter `params`: unknown field `num_tokns`, expected one of `dtype`, `layout`, `num_blocks`, `block_size`, `num_key_value_heads`, `head_dim`, `num_tokens`, `padding`, `slot_mapping_dtype`

"#]]);
}

#[test]
fn a_bad_check_is_a_suite_error_at_load_naming_file_case_output_and_field() {
    // list and explain read every case's checks when the suites load, as run does: a check
    // with a misspelt parameter stops them all with one error naming where it is written.
    let suite = "[suite]\nname = \"paged_kv\"\nop = \"paged_kv\"\n[defaults]\nrecipe = \"reference\"\ncheck = { policy = \"bitwise\" }\n[[case]]\nname = \"x\"\ntier = \"full\"\nchecks = { key_cache_out = { policy = \"ulp\", mx = 1 } }\nparams = { dtype = \"bf16\", layout = \"BnBsH\", num_blocks = 2, block_size = 16,\n  num_key_value_heads = 1, head_dim = 16, num_tokens = 3 }\n";
    let dir = project_with_paged_kv_suite(suite);
    let root = root_of(&dir);
    conform_snap(&root, &["list"])
        .code(exit_code::USAGE)
        .stdout_eq(str![""])
        .stderr_eq(str![[r#"
error: [ROOT]/suites/paged_kv.toml: case `paged_kv/x`: check of output `key_cache_out` (`checks.key_cache_out`): check policy `ulp`: unknown field `mx`, expected `max`

"#]]);
    conform_snap(&root, &["explain", "paged_kv/x"])
        .code(exit_code::USAGE)
        .stdout_eq(str![""])
        .stderr_eq(str![[r#"
error: [ROOT]/suites/paged_kv.toml: case `paged_kv/x`: check of output `key_cache_out` (`checks.key_cache_out`): check policy `ulp`: unknown field `mx`, expected `max`

"#]]);
    conform_snap(&root, &["run"])
        .code(exit_code::USAGE)
        .stdout_eq(str![""])
        .stderr_eq(str![[r#"
error: [ROOT]/suites/paged_kv.toml: case `paged_kv/x`: check of output `key_cache_out` (`checks.key_cache_out`): check policy `ulp`: unknown field `mx`, expected `max`

"#]]);
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
    let root = root_of(&dir);
    conform_snap(
        &root,
        &[
            "golden",
            "verify",
            "--suite",
            "mc2_matmul_allreduce",
            "--tier",
            "quick",
        ],
    )
    .code(exit_code::USAGE)
    .stdout_eq(str![[r#"
ERROR  mc2_matmul_allreduce/f16/r8-m7-k33-n17/odd-shapes: [ROOT]/golden/mc2_matmul_allreduce/f16/r8-m7-k33-n17/odd-shapes.safetensors: golden store corruption: tensor(s) out.out do not match their MANIFEST.toml digests (the file changed after `conform golden accept`; restore it from version control, or bless and review)
golden verify: 22 cases checked, 0 drifted, 1 store errors

"#]])
    .stderr_eq(str![[r#"
[1/22] mc2_matmul_allreduce/f16/r8-m32-k64-n64/ring-tiled
[2/22] mc2_matmul_allreduce/f16/r4-m37-k32-n48/ring-tail-tile
[3/22] mc2_matmul_allreduce/bf16/r4-m16-k32-n64/binary-tree-bias-x3
[4/22] mc2_matmul_allreduce/f16/r8-m20-k64-n32/rank-order-bits
[5/22] mc2_matmul_allreduce/bf16/r4-m16-k32-n64/ring-bias-x3-bits
[6/22] mc2_matmul_allreduce/f16/r8-m16-k32-n32/binary-tree-bits
[7/22] mc2_matmul_allreduce/bf16/r4-m6-k5-n24/rank-order-witnesses
[8/22] mc2_matmul_allreduce/bf16/r8-m9-k7-n40/ring-tiled-witnesses
[9/22] mc2_matmul_allreduce/f16/r8-m5-k6-n17/binary-tree-witnesses
[10/22] mc2_matmul_allreduce/f16/r4-m7-k9-n33/ring-witnesses
[11/22] mc2_matmul_allreduce/f16/r2-m8-k16-n32/high-precision-golden
[12/22] mc2_matmul_allreduce/f16/r2-m8-k16-n32/cann-outliers
[13/22] mc2_matmul_allreduce/bf16/r1-m1-k8-n16/single-rank-single-row
[14/22] mc2_matmul_allreduce/f16/r8-m7-k33-n17/odd-shapes
[15/22] mc2_matmul_allreduce/f16/r4-m8-k32-n32/range
[16/22] mc2_matmul_allreduce/bf16/r2-m8-k32-n32/range-bias-x3
[17/22] mc2_matmul_allreduce/bf16/r2-m9-k25-n41/high-precision-golden
[18/22] mc2_matmul_allreduce/f16/r4-m23-k40-n24/ring-uneven-tiles
[19/22] mc2_matmul_allreduce/f16/r2-m24-k64-n96/rank_order
[20/22] mc2_matmul_allreduce/f16/r8-m24-k64-n96/rank_order
[21/22] mc2_matmul_allreduce/bf16/r2-m24-k64-n96/rank_order
[22/22] mc2_matmul_allreduce/bf16/r8-m24-k64-n96/rank_order

"#]]);
    // The main job also catches it, as corruption of the store (naming file and tensor),
    // never as drift of the reference.
    conform_snap(&root, &["run", "--suite", "mc2_matmul_allreduce"])
        .code(exit_code::FAILURE)
        .stdout_eq(str![[r#"
suite                    target          passed  failed skipped   error timeout crashed
mc2_matmul_allreduce     reference           21       0       0       1       0       0
total                                        21       0       0       1       0       0
golden: 21 output tensor(s) of 21 case(s) verified bit for bit against the golden store (1 other reference trial(s) not compared: full tier or another seed)

ERROR mc2_matmul_allreduce/f16/r8-m7-k33-n17/odd-shapes [reference]
  [ROOT]/golden/mc2_matmul_allreduce/f16/r8-m7-k33-n17/odd-shapes.safetensors: golden store corruption: tensor(s) out.out do not match their MANIFEST.toml digests (the file changed after `conform golden accept`; restore it from version control, or bless and review)
  replay: conform run --tier all --filter '^mc2_matmul_allreduce/f16/r8-m7-k33-n17/odd-shapes$' --seed 0 --target reference --root [ROOT]

"#]])
        .stderr_eq(str![[r#"
PASSED   mc2_matmul_allreduce/f16/r8-m32-k64-n64/ring-tiled [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/f16/r4-m37-k32-n48/ring-tail-tile [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/bf16/r4-m16-k32-n64/binary-tree-bias-x3 [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/f16/r8-m20-k64-n32/rank-order-bits [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/f16/r2-m8-k16-n32/high-precision-golden [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/bf16/r1-m1-k8-n16/single-rank-single-row [reference] ([MS] ms)
ERROR    mc2_matmul_allreduce/f16/r8-m7-k33-n17/odd-shapes [reference] ([MS] ms) — [ROOT]/golden/mc2_matmul_allreduce/f16/r8-m7-k33-n17/odd-shapes.safetensors: golden store corruption: tensor(s) out.out do not match their MANIFEST.toml digests (the file changed after `conform golden accept`; restore it from version control, or bless and review)
PASSED   mc2_matmul_allreduce/f16/r2-m24-k64-n96/rank_order [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/f16/r8-m24-k64-n96/rank_order [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/bf16/r2-m24-k64-n96/rank_order [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/bf16/r8-m24-k64-n96/rank_order [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/f16/r2-m8-k16-n32/cann-outliers [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/f16/r4-m8-k32-n32/range [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/bf16/r2-m8-k32-n32/range-bias-x3 [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/bf16/r4-m16-k32-n64/ring-bias-x3-bits [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/f16/r8-m16-k32-n32/binary-tree-bits [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/bf16/r2-m9-k25-n41/high-precision-golden [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/f16/r4-m23-k40-n24/ring-uneven-tiles [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/bf16/r4-m6-k5-n24/rank-order-witnesses [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/bf16/r8-m9-k7-n40/ring-tiled-witnesses [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/f16/r8-m5-k6-n17/binary-tree-witnesses [reference] ([MS] ms)
PASSED   mc2_matmul_allreduce/f16/r4-m7-k9-n33/ring-witnesses [reference] ([MS] ms)

"#]].unordered());
}

#[test]
fn the_main_job_refuses_a_missing_or_malformed_manifest_before_running() {
    let dir = scratch_project();
    let manifest = dir.path().join("golden/MANIFEST.toml");
    let good = std::fs::read_to_string(&manifest).unwrap();
    let root = root_of(&dir);
    let run = || conform_snap(&root, &["run", "--suite", "paged_kv"]);
    // No case runs: the snapshots hold no PASSED line.
    std::fs::write(&manifest, "this is = not [ a manifest").unwrap();
    run()
        .code(exit_code::USAGE)
        .stdout_eq(str![""])
        .stderr_eq(str![[r#"
error: [ROOT]/golden/MANIFEST.toml: malformed manifest: TOML parse error at line 1, column 6   | 1 | this is = not [ a manifest   |      ^ key with no value, expected `=` 

"#]]);
    std::fs::write(&manifest, "format = 99\n").unwrap();
    run()
        .code(exit_code::USAGE)
        .stdout_eq(str![""])
        .stderr_eq(str![[r#"
error: [ROOT]/golden/MANIFEST.toml: malformed manifest: format 99 is not the supported 1

"#]]);
    std::fs::remove_file(&manifest).unwrap();
    run()
        .code(exit_code::USAGE)
        .stdout_eq(str![""])
        .stderr_eq(str![[r#"
error: [ROOT]/golden/MANIFEST.toml: No such file or directory (os error 2)

"#]]);
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
    run()
        .code(exit_code::FAILURE)
        .stdout_eq(str![[r#"
suite                    target          passed  failed skipped   error timeout crashed
paged_kv                 reference            9       0       0       1       0       0
total                                         9       0       0       1       0       0
golden: 18 output tensor(s) of 9 case(s) verified bit for bit against the golden store (1 other reference trial(s) not compared: full tier or another seed)

ERROR paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token [reference]
  [ROOT]/golden/paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token.safetensors: golden store corruption: tensor(s) out.key_cache_out do not match their MANIFEST.toml digests (the file changed after `conform golden accept`; restore it from version control, or bless and review)
  replay: conform run --tier all --filter '^paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token$' --seed 0 --target reference --root [ROOT]

"#]])
        .stderr_eq(str![[r#"
ERROR    paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token [reference] ([MS] ms) — [ROOT]/golden/paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token.safetensors: golden store corruption: tensor(s) out.key_cache_out do not match their MANIFEST.toml digests (the file changed after `conform golden accept`; restore it from version control, or bless and review)
PASSED   paged_kv/bf16/vllm/blocks4-bs16-hkv2-d64-t4-pad4/all-padding [reference] ([MS] ms)
PASSED   paged_kv/bf16/BnBsH/blocks4-bs16-hkv2-d64-t37-pad5 [reference] ([MS] ms)
PASSED   paged_kv/bf16/BnNBsD/blocks4-bs16-hkv2-d64-t37-pad5 [reference] ([MS] ms)
PASSED   paged_kv/bf16/vllm/blocks4-bs16-hkv2-d64-t37-pad5 [reference] ([MS] ms)
PASSED   paged_kv/f16/BnBsH/blocks4-bs16-hkv2-d64-t37-pad5 [reference] ([MS] ms)
PASSED   paged_kv/f16/BnNBsD/blocks4-bs16-hkv2-d64-t37-pad5 [reference] ([MS] ms)
PASSED   paged_kv/f16/vllm/blocks4-bs16-hkv2-d64-t37-pad5 [reference] ([MS] ms)
PASSED   paged_kv/bf16/BnNBsD/blocks5-bs16-hkv3-d32-t29-pad3 [reference] ([MS] ms)
PASSED   paged_kv/f16/vllm/blocks3-bs32-hkv5-d16-t41-pad2 [reference] ([MS] ms)

"#]].unordered());
}

#[test]
fn accept_refuses_staged_data_of_a_case_that_changed_after_bless() {
    // The quick tier holds the changed case; the full tier's two large cases would only make
    // the bless and verify slower (every-tier defaults have their own test below).
    let dir = scratch_project();
    let suite = dir.path().join("suites/paged_kv.toml");
    let original = std::fs::read_to_string(&suite).unwrap();
    let changed = original.replace(
        "description = \"edge: one decode token\"",
        "description = \"edge: one decode token\"\nseed = 7",
    );
    std::fs::write(&suite, &changed).unwrap();
    let o = conform(
        dir.path(),
        &["golden", "bless", "--suite", "paged_kv", "--tier", "quick"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The suite change is reverted before accept: the staged data is stale.
    std::fs::write(&suite, &original).unwrap();
    conform_snap(&root_of(&dir), &["golden", "accept"])
        .code(exit_code::USAGE)
        .stdout_eq(str![])
        .stderr_eq(str![[r#"
error: refusing to accept: the staged golden data no longer matches the suites for paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token (the case changed or disappeared after `conform golden bless`); run `conform golden bless` again and review

"#]]);
    // Nothing moved: the store still verifies.
    let o = conform(
        dir.path(),
        &["golden", "verify", "--suite", "paged_kv", "--tier", "quick"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn bless_stages_changes_for_review_and_accept_moves_them_in() {
    // On the quick tier, which holds the changed case (as in the test above).
    let dir = scratch_project();
    // Change one case's seed: its golden data must change, and nothing else.
    let suite = dir.path().join("suites/paged_kv.toml");
    let s = std::fs::read_to_string(&suite).unwrap();
    let s = s.replace(
        "description = \"edge: one decode token\"",
        "description = \"edge: one decode token\"\nseed = 7",
    );
    std::fs::write(&suite, s).unwrap();
    let o = conform(
        dir.path(),
        &["golden", "verify", "--suite", "paged_kv", "--tier", "quick"],
    );
    assert_eq!(o.status.code(), Some(1), "definition drift: {}", text(&o));
    conform_snap(&root_of(&dir), &["golden", "bless", "--suite", "paged_kv", "--tier", "quick"])
        .code(exit_code::SUCCESS)
        .stdout_eq(str![[r#"
changed    paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token: definition changed; in.key: max 2142472936 ulp; in.key_cache_in: NaN where a number was (or the reverse); in.slot_mapping: 1 bytes differ; in.value: max 2139329201 ulp; in.value_cache_in: NaN where a number was (or the reverse); out.key_cache_out: NaN where a number was (or the reverse); out.value_cache_out: NaN where a number was (or the reverse)
9 unchanged, 1 to review
staged 2 file(s) as .new next to the golden data; review them, then run `conform golden review` (case by case) or `conform golden accept` (all)

"#]])
        .stderr_eq(str![]);
    let staged = dir.path().join(
        "golden/paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token.safetensors.new",
    );
    assert!(staged.exists());
    assert!(dir.path().join("golden/MANIFEST.toml.new").exists());
    // Nothing was overwritten yet: verify still reports the drift.
    assert_eq!(
        conform(
            dir.path(),
            &["golden", "verify", "--suite", "paged_kv", "--tier", "quick"]
        )
        .status
        .code(),
        Some(1)
    );
    let o = conform(dir.path(), &["golden", "accept"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!staged.exists());
    let o = conform(
        dir.path(),
        &["golden", "verify", "--suite", "paged_kv", "--tier", "quick"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn bless_refuses_to_run_under_ci() {
    let dir = scratch_project();
    conform_snap_with(
        &root_of(&dir),
        &["golden", "bless", "--suite", "paged_kv"],
        &[("CI", "true")],
    )
    .code(exit_code::USAGE)
    .stdout_eq(str![])
    .stderr_eq(str![[r#"
error: refusing to bless golden data with CI set: golden files change only through a reviewed `conform golden bless` + `conform golden accept` on a developer machine

"#]]);
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
    conform_snap(
        &root_of(&dir),
        &["golden", "verify", "--suite", "w4a16_matmul"],
    )
    .code(exit_code::USAGE)
    .stdout_eq(str![[r#"
ERROR  [ROOT]/golden/stray.safetensors: unlisted file in the golden store (not in MANIFEST.toml)
golden verify: 20 cases checked, 0 drifted, 1 store errors

"#]])
    .stderr_eq(str![[r#"
[1/20] w4a16_matmul/mxfp4/m3-n8-k2048/mx_ocp
[2/20] w4a16_matmul/nvfp4/m1-n5-k16/single-token-one-group
[3/20] w4a16_matmul/nvfp4/m2-n4-k768/f16-out
[4/20] w4a16_matmul/nvfp4/m2-n8-k768/f16-range
[5/20] w4a16_matmul/mxfp4/m2-n8-k256/bf16-subnormal
[6/20] w4a16_matmul/nvfp4/m2-n8-k64/bf16-ties
[7/20] w4a16_matmul/mxfp4/m3-n6-k96/bf16-ties
[8/20] w4a16_matmul/nvfp4/m2-n9-k48/f16-ties
[9/20] w4a16_matmul/mxfp4/m2-n5-k64/f16-ties
[10/20] w4a16_matmul/nvfp4/m3-n7-k272/f16-overflow-odd-groups
[11/20] w4a16_matmul/mxfp4/m2-n5-k288/odd-groups
[12/20] w4a16_matmul/mxfp4/m8-n5-k64/format-extremes
[13/20] w4a16_matmul/mxfp4/m8-n4-k96/e1m2-format-extremes
[14/20] w4a16_matmul/nvfp4/m8-n4-k64/format-extremes
[15/20] w4a16_matmul/nvfp4/vllm_nvfp4/m8-n4-k64/order-witness
[16/20] w4a16_matmul/nvfp4/m8-n3-k80/order-witness
[17/20] w4a16_matmul/nvfp4/m4-n16-k768/qwen3-moe-expert
[18/20] w4a16_matmul/nvfp4/m2-n8-k7168/deepseek-v3-expert
[19/20] w4a16_matmul/nvfp4/m64-n2048-k7168/deepseek-v3-expert-gate
[20/20] w4a16_matmul/nvfp4/m32-n4096-k14336/llama3-8b-down

"#]]);
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
    let filter = cli::exact_filter(c["id"].as_str().unwrap());
    let o = conform(&repo(), &["run", "--filter", &filter, "--seed", &seed]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// `golden verify --help` says what the command does with no --tier (every tier, since the
/// store holds full-tier digests too), and the command shows its progress case by case
/// instead of staying silent for minutes.
#[test]
fn golden_verify_checks_every_tier_by_default_as_its_help_says_and_shows_progress() {
    let root = repo();
    // The help says it: "Checks every tier unless --tier", "all for the golden commands".
    conform_snap(&root.canonicalize().unwrap(), &["golden", "verify", "--help"])
        .code(exit_code::SUCCESS)
        .stdout_eq(str![[r#"
Recompute golden tensors with the reference and compare digests (exit 1 on drift, 2 on a damaged store). Checks every tier unless --tier says otherwise

Usage: conform golden verify [OPTIONS]

Options:
      --root <ROOT>        The project root holding suites/, golden/ and targets/ (default: the nearest ancestor of the current directory that has suites/ and golden/) [env: CONFORM_ROOT=]
      --suite <SUITES>     Only these suites (repeatable), e.g. `--suite fa_prefill`
      --filter <FILTER>    Only cases whose id matches this regular expression
      --tier <TIER>        Tier to select: quick, full, or all (default: quick for list and run; all for the golden commands, whose store holds every tier) [possible values: quick, full, all]
      --threads <THREADS>  Threads for the reference, from 1 to 4 per available core (default: every core; results never depend on it)
  -h, --help               Print help

"#]])
        .stderr_eq(str![""]);

    // The cases of every tier, as `list --tier all` names them (a suite whose full tier is
    // small: the default, not the work, is under test).
    let list = conform(
        &root,
        &["list", "--suite", "pa_decode_int8", "--tier", "all"],
    );
    assert_eq!(list.status.code(), Some(0), "{}", text(&list));
    let all: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|l| l.starts_with("pa_decode_int8/"))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    assert!(
        String::from_utf8_lossy(&list.stdout).contains("[full]"),
        "the suite has no full-tier case to tell the default apart: {}",
        text(&list)
    );

    let o = conform(&root, &["golden", "verify", "--suite", "pa_decode_int8"]);
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
