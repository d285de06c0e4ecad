//! The `conform` CLI's contract as snapshots: what it prints (stdout and stderr) and its exit
//! code (metadata/src/exit_code.rs) for the help, `list`, `explain`, a small `run` on the
//! reference, and the error paths (a malformed suite named by file:line:column, unknown names,
//! a damaged golden file).
//!
//! The expected texts live in tests/cmd/*.stdout and inline below; run with
//! `SNAPSHOTS=overwrite` to rewrite them after an intended change, then review the diff.
//! Paths are redacted to `[ROOT]` and per-case durations to `[MS]`; `[..]` matches within a
//! line. The small bad suites are in tests/cmd/*.toml.

use crate::cli;
use cli::repo;

use crate::copy_dir;
use copy_dir::copy_dir;

use crate::snap;
use snap::conform_snap as conform;

use conform_metadata::exit_code;
use snapbox::{file, str, IntoData};
use std::path::{Path, PathBuf};

/// The repository root without `..` components, as the tests pass it to `--root`.
fn root() -> PathBuf {
    repo().canonicalize().unwrap()
}

/// A scratch project whose only suite is the fixture tests/cmd/`fixture`.toml (written as
/// suites/paged_kv.toml), with an empty golden store.
fn project_with_fixture_suite(fixture: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let suite = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cmd")
        .join(format!("{fixture}.toml"));
    std::fs::create_dir_all(dir.path().join("suites")).unwrap();
    std::fs::create_dir_all(dir.path().join("golden")).unwrap();
    std::fs::copy(suite, dir.path().join("suites/paged_kv.toml")).unwrap();
    dir
}

/// A scratch project holding a copy of the repository's suites and golden store.
fn scratch_project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("suites"), &dir.path().join("suites"));
    copy_dir(&repo().join("golden"), &dir.path().join("golden"));
    dir
}

/// A scratch root path as conform prints it (the temporary directory, canonical).
fn scratch_root(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().canonicalize().unwrap()
}

#[test]
fn help_names_every_command_and_the_root_option() {
    conform(&root(), &["--help"])
        .code(exit_code::SUCCESS)
        .stdout_eq(file!["../cmd/help.stdout"])
        .stderr_eq(str![""]);
}

#[test]
fn run_help_names_every_run_option() {
    conform(&root(), &["run", "--help"])
        .code(exit_code::SUCCESS)
        .stdout_eq(file!["../cmd/run_help.stdout"])
        .stderr_eq(str![""]);
}

#[test]
fn list_of_a_suite_names_its_quick_cases_tier_and_recipe() {
    conform(&root(), &["list", "--suite", "w4a16_matmul"])
        .code(exit_code::SUCCESS)
        .stdout_eq(file!["../cmd/list_w4a16_matmul.stdout"])
        .stderr_eq(str![""]);
}

#[test]
fn explain_of_a_case_shows_its_definition_shapes_checks_and_golden_file() {
    conform(
        &root(),
        &["explain", "w4a16_matmul/mxfp4/m3-n8-k2048/mx_ocp"],
    )
    .code(exit_code::SUCCESS)
    .stdout_eq(file!["../cmd/explain_w4a16_mx_ocp.stdout"])
    .stderr_eq(str![""]);
}

/// The summary table on stdout, one line per case on stderr (in completion order, so the
/// comparison ignores their order), exit 0.
#[test]
fn run_of_a_small_quick_suite_on_the_reference_passes_every_case() {
    conform(&root(), &["run", "--suite", "w4a16_matmul"])
        .code(exit_code::SUCCESS)
        .stdout_eq(file!["../cmd/run_w4a16_matmul.stdout"])
        .stderr_eq(file!["../cmd/run_w4a16_matmul.stderr"].unordered());
}

#[test]
fn an_unknown_suite_key_is_a_usage_error_at_file_line_column() {
    let dir = project_with_fixture_suite("unknown_key");
    conform(&scratch_root(&dir), &["list"])
        .code(exit_code::USAGE)
        .stdout_eq(str![""])
        .stderr_eq(str![[r#"
error: [ROOT]/suites/paged_kv.toml:7:1: unknown field `chek`, expected one of `name`, `op`, `params`, `recipe`, `recipe_hardware`, `tier`, `inputs`, `check`, `checks`, `checks_without_recipe`, `perf`, `budget`, `seed`, `axes`, `only`, `exclude`, `description`, `discriminates`, `regimes`

"#]]);
}

#[test]
fn a_toml_syntax_error_is_a_usage_error_at_file_line_column() {
    let dir = project_with_fixture_suite("unclosed_table");
    conform(&scratch_root(&dir), &["run"])
        .code(exit_code::USAGE)
        .stdout_eq(str![""])
        .stderr_eq(str![[r#"
error: [ROOT]/suites/paged_kv.toml:5:10: unclosed table, expected `]`

"#]]);
}

#[test]
fn an_unknown_suite_is_a_usage_error() {
    conform(&root(), &["run", "--suite", "no_such_suite"])
        .code(exit_code::USAGE)
        .stdout_eq(str![""])
        .stderr_eq(str![[r#"
error: unknown suite(s): no_such_suite (see `conform list`)

"#]]);
}

#[test]
fn an_unknown_target_is_a_usage_error_listing_the_known_ones() {
    conform(&root(), &["run", "--suite", "paged_kv", "--target", "no_such_target"])
        .code(exit_code::USAGE)
        .stdout_eq(str![""])
        .stderr_eq(str![[r#"
error: unknown target `no_such_target` (known: reference, example, ml_dtypes, numpy, onnxruntime, torch, torch_npu)

"#]]);
}

#[test]
fn an_unknown_case_is_a_usage_error() {
    conform(&root(), &["explain", "no/such/case"])
        .code(exit_code::USAGE)
        .stdout_eq(str![""])
        .stderr_eq(str![[r#"
error: no case `no/such/case` (see `conform list`)

"#]]);
}

#[test]
fn a_filter_matching_no_case_judges_nothing() {
    conform(&root(), &["run", "--filter", "^no-such-case$"])
        .code(exit_code::NOTHING_JUDGED)
        .stdout_eq(str![])
        .stderr_eq(str![[r#"
error: no case matches the selection (check --suite, --filter and --tier; `conform list` shows every case)

"#]]);
}

/// A truncated golden file: `golden verify` reports the store damaged (exit 2) and `run` ends
/// that case as an error (exit 1), both naming the file; the other cases still pass.
#[test]
fn a_truncated_golden_file_is_named_by_verify_and_by_run() {
    let dir = scratch_project();
    let id = "paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token";
    let file = dir.path().join("golden").join(format!("{id}.safetensors"));
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let root = scratch_root(&dir);
    conform(
        &root,
        &["golden", "verify", "--suite", "paged_kv", "--tier", "quick"],
    )
    .code(exit_code::USAGE)
    .stdout_eq(str![[r#"
ERROR  paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token: [ROOT]/golden/paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token.safetensors: corrupt or truncated safetensors file: 32506 bytes of data, the header's offsets span 66052
golden verify: 10 cases checked, 0 drifted, 1 store errors

"#]])
    .stderr_eq(str![[r#"
[1/10] paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token
[2/10] paged_kv/bf16/vllm/blocks4-bs16-hkv2-d64-t4-pad4/all-padding
[3/10] paged_kv/bf16/BnNBsD/blocks5-bs16-hkv3-d32-t29-pad3
[4/10] paged_kv/f16/vllm/blocks3-bs32-hkv5-d16-t41-pad2
[5/10] paged_kv/bf16/BnBsH/blocks4-bs16-hkv2-d64-t37-pad5
[6/10] paged_kv/bf16/BnNBsD/blocks4-bs16-hkv2-d64-t37-pad5
[7/10] paged_kv/bf16/vllm/blocks4-bs16-hkv2-d64-t37-pad5
[8/10] paged_kv/f16/BnBsH/blocks4-bs16-hkv2-d64-t37-pad5
[9/10] paged_kv/f16/BnNBsD/blocks4-bs16-hkv2-d64-t37-pad5
[10/10] paged_kv/f16/vllm/blocks4-bs16-hkv2-d64-t37-pad5

"#]]);
    conform(&root, &["run", "--suite", "paged_kv"])
        .code(exit_code::FAILURE)
        .stdout_eq(str![[r#"
suite                    target          passed  failed skipped   error timeout crashed
paged_kv                 reference            9       0       0       1       0       0
total                                         9       0       0       1       0       0
golden: 18 output tensor(s) of 9 case(s) verified bit for bit against the golden store (1 other reference trial(s) not compared: full tier or another seed)

ERROR paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token [reference]
  [ROOT]/golden/paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token.safetensors: corrupt or truncated safetensors file: 32506 bytes of data, the header's offsets span 66052
  replay: conform run --tier all --filter '^paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token$' --seed 0 --target reference --root [ROOT]

"#]])
        .stderr_eq(str![[r#"
PASSED   paged_kv/bf16/vllm/blocks4-bs16-hkv2-d64-t4-pad4/all-padding [reference] ([MS] ms)
PASSED   paged_kv/bf16/BnBsH/blocks4-bs16-hkv2-d64-t37-pad5 [reference] ([MS] ms)
PASSED   paged_kv/bf16/BnNBsD/blocks4-bs16-hkv2-d64-t37-pad5 [reference] ([MS] ms)
PASSED   paged_kv/bf16/vllm/blocks4-bs16-hkv2-d64-t37-pad5 [reference] ([MS] ms)
PASSED   paged_kv/f16/BnBsH/blocks4-bs16-hkv2-d64-t37-pad5 [reference] ([MS] ms)
PASSED   paged_kv/f16/BnNBsD/blocks4-bs16-hkv2-d64-t37-pad5 [reference] ([MS] ms)
PASSED   paged_kv/f16/vllm/blocks4-bs16-hkv2-d64-t37-pad5 [reference] ([MS] ms)
ERROR    paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token [reference] ([MS] ms) — [ROOT]/golden/paged_kv/f32/BnBsH/blocks2-bs32-hkv1-d64-t1-pad0/single-token.safetensors: corrupt or truncated safetensors file: 32506 bytes of data, the header's offsets span 66052
PASSED   paged_kv/bf16/BnNBsD/blocks5-bs16-hkv3-d32-t29-pad3 [reference] ([MS] ms)
PASSED   paged_kv/f16/vllm/blocks3-bs32-hkv5-d16-t41-pad2 [reference] ([MS] ms)

"#]].unordered());
}
