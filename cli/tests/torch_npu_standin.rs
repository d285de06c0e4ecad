//! The torch_npu worker end to end before it meets a device: the whole quick tier, every
//! suite, through the real worker code (argument building, layouts, block tables, actual
//! sequence lengths, FP4 unpacking, W4A16 re-encoding, cache writes, the MC2 and MoE rank
//! launches and their process groups, the timing path) on the CPU stand-in for torch / torch_npu
//! (`targets/torch_npu/standin`, switched on by CONFORM_TORCH_NPU_STANDIN=1). The stand-in is
//! written from the CANN / torch_npu documentation, not from conform: it models the documented
//! semantics (MC2's per-rank epilogue, FIA's row-invalid correction), rejections (as the aclnn
//! errors) and product lists (CONFORM_STANDIN_SOC), and leaves what the API does not write
//! poisoned. Every case must pass or be skipped with a documented reason — never an error —
//! and say that the stand-in ran it; the skips and their reasons are printed.
//!
//! The host the stand-in simulates has NNAL's ATB (a libatb.so on LD_LIBRARY_PATH, as
//! nnal/atb/set_env.sh leaves it) unless a run says otherwise: on a stock host without it every
//! ATB-based case (mla_decode, the BnBsH cache writes) is skipped with what to install, and
//! nothing errors. The quick tier runs on a simulated Atlas A2, A3 and Ascend950: no case ends
//! as an error on any of them.
//!
//! For each contradiction fixed in the worker, a scratch copy of the worker with the old line
//! put back runs on the stand-in and fails: MC2's bias on every rank, inner_precise 0 on fully
//! masked rows, an illegal TND shape sent to the kernel, padded query rows reported as the
//! kernel's result, MoE launches the A2 tiling refuses, ATB taken as loadable because the
//! attribute exists; and a MoE combine handed ones instead of the router's expert_scales fails
//! too, and so does an MLA decode without its rope term (one without query_rope, or with the
//! rope keys as query_rope, is rejected by the page's rules). Without the stand-in, a required
//! torch_npu that cannot be imported fails the run with the import error.
//!
//! The worker needs the Python venv (`ci/setup-targets.sh`): without it the trials are
//! ignored with the reason, unless CONFORM_REQUIRE_TARGETS names a CPU worker (CI), where they
//! fail.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../targets/tests/support/trials.rs"]
mod trials;
#[path = "support/venv.rs"]
mod venv;

#[path = "support/cli.rs"]
mod cli;
use cli::repo_canonical as repo;

/// `conform ARGS...` from the repository, on the stand-in or not, requiring `require`; the exit
/// code and everything printed.
fn conform_standin(args: &[&str], standin: bool, require: Option<&str>) -> (Option<i32>, String) {
    conform_env(args, standin, require, &[])
}

fn conform_env(
    args: &[&str],
    standin: bool,
    require: Option<&str>,
    env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_conform"));
    c.args(args).current_dir(repo()).env_remove("CI");
    c.env_remove("CONFORM_REQUIRE_TARGETS");
    c.env_remove("CONFORM_STANDIN_SOC");
    c.env_remove("CONFORM_STANDIN_DEVICES");
    if let Some(r) = require {
        c.env("CONFORM_REQUIRE_TARGETS", r);
    }
    if standin {
        c.env("CONFORM_TORCH_NPU_STANDIN", "1");
    } else {
        c.env_remove("CONFORM_TORCH_NPU_STANDIN");
    }
    // A host with NNAL's ATB set up, unless the caller says what LD_LIBRARY_PATH holds.
    c.env("LD_LIBRARY_PATH", atb_lib_dir());
    c.envs(env.iter().copied());
    let o = cli::output(c);
    (o.status.code(), cli::text(&o))
}

/// A directory holding a `libatb.so`, standing for the `lib/` of NNAL's ATB that
/// nnal/atb/set_env.sh puts on LD_LIBRARY_PATH (the stand-in loads nothing: it looks there).
fn atb_lib_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("libatb.so"), b"").unwrap();
        d
    })
    .path()
}

/// A stock host: no ATB on the library path.
const NO_ATB: (&str, &str) = ("LD_LIBRARY_PATH", "");

/// The skip reason of an ATB-based case where ATB does not load.
const ATB_MISSING: &str = "NNAL's ATB does not load";

/// Runs `args` (a `conform run`) with a results file; returns the exit code, the output and
/// the cases.
fn run_json(
    args: &[&str],
    env: &[(&str, &str)],
    root: Option<&Path>,
) -> (Option<i32>, String, Vec<serde_json::Value>) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut all: Vec<&str> = Vec::new();
    let root_s;
    if let Some(r) = root {
        root_s = r.to_str().unwrap().to_string();
        all.extend(["--root", &root_s]);
    }
    all.extend(args);
    all.extend(["--json", json.to_str().unwrap()]);
    let (code, text) = conform_env(&all, true, Some("torch_npu"), env);
    let cases = std::fs::read_to_string(&json)
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .map(|r| r["cases"].as_array().cloned().unwrap_or_default())
        .unwrap_or_default();
    (code, text, cases)
}

fn status<'a>(cases: &'a [serde_json::Value], id: &str) -> (&'a str, String) {
    let c = cases
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no case {id}"));
    (
        c["status"].as_str().unwrap(),
        c["message"].as_str().unwrap_or("").to_string(),
    )
}

/// Checks a stand-in run: every case passed (saying the stand-in ran it) or was skipped with a
/// reason; no error. Returns the suites with a passed case and the skips by reason.
fn check_cases(
    cases: &[serde_json::Value],
) -> (
    std::collections::BTreeSet<String>,
    std::collections::BTreeMap<String, Vec<String>>,
) {
    let mut passed = std::collections::BTreeSet::new();
    let mut skips: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for c in cases {
        let id = c["id"].as_str().unwrap();
        let msg = c["message"].as_str().unwrap_or("");
        match c["status"].as_str().unwrap() {
            "passed" => {
                passed.insert(c["suite"].as_str().unwrap().to_string());
                let notes = c["notes"].to_string();
                assert!(
                    notes.contains("conform CPU stand-in"),
                    "{id}: the results do not say the stand-in ran it: {notes}"
                );
            }
            "skipped" => {
                assert!(!msg.is_empty(), "{id}: skipped without a reason");
                skips
                    .entry(msg.to_string())
                    .or_default()
                    .push(id.to_string());
            }
            other => panic!("{id}: {other}: {msg}"),
        }
    }
    (passed, skips)
}

/// The stand-in made one dynamic-quant variant for every call (the other scale form where a
/// preset claims the reciprocal) is fingerprinted as that variant; left to its tiling it
/// matches every claim.
fn the_stand_in_as_the_other_scale_form_is_fingerprinted_as_that_form() {
    let args = [
        "fingerprint",
        "--target",
        "torch_npu",
        "--suite",
        "dynamic_quant",
        "--seed",
        "4",
    ];
    let (code, text) = conform_standin(&args, true, None);
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = conform_env(
        &args,
        true,
        None,
        &[("CONFORM_STANDIN_DQ_SCALE", "max_times_inverse")],
    );
    assert_eq!(code, Some(1), "{text}");
    let row = |knob: &str| {
        text.lines()
            .find(|l| l.starts_with(knob))
            .unwrap_or_else(|| panic!("no row {knob}: {text}"))
            .to_string()
    };
    // The variants that claim the reciprocal now match the other form ...
    for knob in [
        "dynq.a2_moe.scale ",
        "dynq.a2_plain.scale ",
        "dynq.a2_large_shape.scale ",
    ] {
        assert!(
            row(knob).contains("matches MaxTimesInverse"),
            "{}",
            row(knob)
        );
    }
    // ... and those that claim that form still match their claim.
    for knob in ["dynq.a2_multi_row.scale ", "dynq.a2_single_row.scale "] {
        assert!(row(knob).contains("matches claim"), "{}", row(knob));
    }
}

/// `conform validate` on the stand-in made the other scale form: the dynamic-quant cases whose
/// recipe claims the reciprocal fail bit for bit, and validate then fingerprints the op and says
/// which knobs the kernel's bits leave (the scale form of exactly those presets), writing the
/// fingerprint beside the report.
fn validate_names_the_knobs_a_failing_kernel_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let worker = repo().join("targets/torch_npu");
    let (code, text) = conform_env(
        &[
            "validate",
            "--worker",
            worker.to_str().unwrap(),
            "--suite",
            "dynamic_quant",
            "--tier",
            "quick",
            "--out",
            out.to_str().unwrap(),
        ],
        true,
        None,
        &[("CONFORM_STANDIN_DQ_SCALE", "max_times_inverse")],
    );
    assert_eq!(code, Some(1), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("fingerprint of `dynamic_quant`"))
        .unwrap_or_else(|| panic!("no fingerprint line: {text}"));
    assert!(line.contains("the kernel matches recipe"), "{line}");
    for knob in ["dynq.a2_moe.scale", "dynq.a2_plain.scale"] {
        assert!(
            line.contains(&format!("knob `{knob}` (its bits match `MaxTimesInverse")),
            "{knob}: {line}"
        );
    }
    for knob in ["dynq.a2_multi_row.scale", "dynq.a2_single_row.scale"] {
        assert!(!line.contains(knob), "{knob} keeps its claim: {line}");
    }
    let fp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("fingerprint.json")).unwrap()).unwrap();
    assert_eq!(fp["format"], "conform-fingerprint-v1");
    // Left to its tiling, the stand-in passes and nothing is fingerprinted.
    let (code, text) = conform_standin(
        &[
            "validate",
            "--worker",
            worker.to_str().unwrap(),
            "--suite",
            "dynamic_quant",
            "--tier",
            "quick",
            "--out",
            dir.path().join("clean").to_str().unwrap(),
        ],
        true,
        None,
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(!text.contains("fingerprint of"), "{text}");
}

fn print_skips(title: &str, skips: &std::collections::BTreeMap<String, Vec<String>>) {
    eprintln!("{title}: {} skip reasons", skips.len());
    for (why, ids) in skips {
        eprintln!("  {} case(s): {why}", ids.len());
    }
}

fn quick_tier_on_the_standin_passes_or_skips_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let (code, text) = conform_standin(
        &[
            "run",
            "--target",
            "torch_npu",
            "--json",
            json.to_str().unwrap(),
            "--report",
            dir.path().join("report").to_str().unwrap(),
        ],
        true,
        Some("torch_npu"),
    );
    assert!(matches!(code, Some(0) | Some(1)), "{text}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // The results and the report say which module ran.
    let t = &r["targets"][0];
    assert_eq!(t["name"], "torch_npu");
    assert!(
        t["description"]
            .as_str()
            .unwrap()
            .contains("conform CPU stand-in")
            && t["versions"]["torch_npu"]
                .as_str()
                .unwrap()
                .contains("conform CPU stand-in"),
        "{t}"
    );
    let report = std::fs::read_to_string(dir.path().join("report/index.html")).unwrap();
    assert!(
        report.contains("target <b>torch_npu</b>: ") && report.contains("conform CPU stand-in"),
        "the report does not name the stand-in"
    );
    let cases = r["cases"].as_array().unwrap();
    let (passed, skips) = check_cases(cases);
    print_skips("quick tier on the stand-in (Ascend910B4, Atlas A2)", &skips);
    // Every path of the worker ran on the simulated Atlas A2: attention (FA, PA with block
    // tables), MC2 ranks, W4A16, the cache writes, the per-token INT8 quantisation, the decode
    // step over an INT8 cache, the W8A8 matmul. (The FP4 cast is Ascend950's: below.)
    for suite in [
        "fa_prefill",
        "pa_decode",
        "mc2_matmul_allreduce",
        "w4a16_matmul",
        "paged_kv",
        "dynamic_quant",
        "pa_decode_int8",
        "quant_matmul",
        "mla_decode",
    ] {
        assert!(passed.contains(suite), "no {suite} case passed: {passed:?}");
    }
    // The MoE kernels' A2 limits (ep_world_size in [16, 256] and a multiple of 8, no shared
    // experts): every quick case is a skip on the simulated A2 with the README's constraint;
    // on a simulated A3 the ones within its limits (H in [1024, 8192]) pass.
    let shared = "moe_dispatch_combine/w5-s1-e32-k3/bf16/h1024/int8-smooth/routing-ties";
    let (st, msg) = status(cases, shared);
    assert!(
        st == "skipped" && msg.contains("shared experts are Atlas A3 only"),
        "the shared-expert case on the simulated A2 is {st}: {msg:?}"
    );
    let (st, msg) = status(
        cases,
        "moe_dispatch_combine/w4-e32-k4/bf16/h7168/int8/deepseek-hidden",
    );
    assert!(
        st == "skipped"
            && msg.contains("ep_world_size 4: in [16, 256] and a multiple of 8")
            && msg.contains("MoeDistributeDispatchV2 / CombineV2 README, Atlas A2"),
        "the 4-rank case on the simulated A2 is {st}: {msg:?}"
    );
    let (code, text, cases_a3) = run_json(
        &[
            "run",
            "--target",
            "torch_npu",
            "--filter",
            "^moe_dispatch_combine/w(4-e32-k4/|5-s1-|8-s4-)",
        ],
        &[("CONFORM_STANDIN_SOC", "Ascend910_9392")],
        None,
    );
    assert_eq!(code, Some(0), "{text}");
    for c in &cases_a3 {
        assert_eq!(c["status"], "passed", "{c}");
    }
    assert_eq!(cases_a3.len(), 3);
    // The documented reasons, where the documentation rules a case out.
    let (st, msg) = status(cases, "fa_prefill/bf16/tnd-hq4-hkv2-d64/causal_br");
    assert!(
        st == "skipped" && msg.contains("TND needs head_dim 128 or 192"),
        "{msg}"
    );
    let (st, msg) = status(cases, "w4a16_matmul/nvfp4/m4-n16-k768/qwen3-moe-expert");
    assert!(
        st == "skipped" && msg.contains("a multiple of 32 in [32, k-1]"),
        "{msg}"
    );
    let (st, msg) = status(cases, "fp4_dequant/mxfp4/bf16/n4-k7168/low_first");
    assert!(
        st == "skipped" && msg.contains("Ascend910B4 (Atlas A2)") && msg.contains("Ascend950 only"),
        "{msg}"
    );
    // The FP4 cast on a simulated Ascend950, where its test runs; attention and MC2 are then
    // skipped with their product lists.
    let (code, text, cases) = run_json(
        &[
            "run",
            "--target",
            "torch_npu",
            "--suite",
            "fp4_dequant",
            "--suite",
            "mc2_matmul_allreduce",
            "--filter",
            "mxfp4|r1-m1",
        ],
        &[("CONFORM_STANDIN_SOC", "Ascend950PR")],
        None,
    );
    assert_eq!(code, Some(0), "{text}");
    let (passed, skips) = check_cases(&cases);
    print_skips("FP4 and MC2 on the stand-in simulating Ascend950PR", &skips);
    assert!(passed.contains("fp4_dequant"), "{passed:?}");
    let (st, msg) = status(
        &cases,
        "mc2_matmul_allreduce/bf16/r1-m1-k8-n16/single-rank-single-row",
    );
    assert!(st == "skipped" && msg.contains("Atlas A2 only"), "{msg}");
    // More ranks than devices: a skip with the count, not a hang or an error.
    let (code, text, cases) = run_json(
        &[
            "run",
            "--target",
            "torch_npu",
            "--filter",
            "^mc2_matmul_allreduce/f16/r8-m7-k33-n17/odd-shapes$",
            "--allow-skips",
        ],
        &[("CONFORM_STANDIN_DEVICES", "4")],
        None,
    );
    assert_eq!(code, Some(0), "{text}");
    let (st, msg) = status(&cases, "mc2_matmul_allreduce/f16/r8-m7-k33-n17/odd-shapes");
    assert!(
        st == "skipped" && msg.contains("needs 8 NPUs") && msg.contains("has 4"),
        "{msg}"
    );
    // The timing path: device events around each call; MC2's ranks each time their own call.
    let (code, text, cases) = run_json(
        &[
            "run",
            "--target",
            "torch_npu",
            "--perf",
            "--filter",
            "^(fa_prefill/bf16/b1-s20-hq4-hkv1-d64/band-pre8-next0|mc2_matmul_allreduce/f16/r2-m24-k64-n96/rank_order)$",
            "--iterations",
            "3",
        ],
        &[],
        None,
    );
    assert_eq!(code, Some(0), "{text}");
    let mc2 = cases
        .iter()
        .find(|c| c["suite"] == "mc2_matmul_allreduce")
        .unwrap();
    assert!(
        mc2["notes"]
            .to_string()
            .contains("largest over the 2 ranks of the NPU-event time"),
        "{mc2}"
    );
}

fn a_stock_host_without_atb_skips_every_atb_case_and_nothing_errors() {
    // With NNAL set up, the cases that write through ATB say so in their notes (the worker
    // names _npu_reshape_and_cache): every mla_decode case, the f16/bf16 BnBsH cache writes.
    let suites = "^(mla_decode|paged_kv|pa_decode_int8)/";
    let (code, text, cases) = run_json(
        &["run", "--target", "torch_npu", "--filter", suites],
        &[],
        None,
    );
    assert_eq!(code, Some(0), "{text}");
    let mut through_atb = std::collections::BTreeSet::new();
    for c in &cases {
        if c["notes"].to_string().contains("_npu_reshape_and_cache") {
            assert_eq!(c["status"], "passed", "{c}");
            through_atb.insert(c["id"].as_str().unwrap().to_string());
        }
    }
    for suite in ["mla_decode/", "paged_kv/", "pa_decode_int8/"] {
        assert!(
            through_atb.iter().any(|id| id.starts_with(suite)),
            "{suite}: {through_atb:?}"
        );
    }
    // A stock CANN host without NNAL: the worker's handshake loads ATB (one tiny
    // _npu_reshape_and_cache), the stand-in raises torch_npu's OSError, and exactly those
    // cases are skipped with it and what to install; the others run as before.
    let (code, text, cases) = run_json(
        &["run", "--target", "torch_npu", "--filter", suites],
        &[NO_ATB],
        None,
    );
    assert_eq!(code, Some(0), "{text}");
    let (passed, skips) = check_cases(&cases);
    print_skips("ATB-based suites on a stock host (no NNAL)", &skips);
    for c in &cases {
        let id = c["id"].as_str().unwrap();
        let msg = c["message"].as_str().unwrap_or("");
        if through_atb.contains(id) {
            assert!(
                c["status"] == "skipped"
                    && msg.contains(ATB_MISSING)
                    && msg.contains("Please check that the nnal package is installed")
                    && msg.contains("Ascend-cann-nnal_"),
                "{id}: {msg}"
            );
        } else {
            assert!(!msg.contains(ATB_MISSING), "{id}: {msg}");
        }
    }
    assert!(
        passed.contains("paged_kv") && passed.contains("pa_decode_int8"),
        "{passed:?}"
    );
}

fn the_quick_tier_never_errors_on_any_documented_soc() {
    // Atlas A2 runs in the test above; here Atlas A3 and Ascend950 (the SoC names
    // torch.npu.get_device_name gives): every case passes or is skipped with a reason.
    for soc in ["Ascend910_9392", "Ascend950PR"] {
        let (code, text, cases) = run_json(
            &["run", "--target", "torch_npu"],
            &[("CONFORM_STANDIN_SOC", soc)],
            None,
        );
        assert!(matches!(code, Some(0) | Some(1)), "{soc}: {text}");
        let (passed, skips) = check_cases(&cases);
        print_skips(
            &format!("quick tier on the stand-in simulating {soc}"),
            &skips,
        );
        assert!(!passed.is_empty(), "{soc}: nothing passed");
    }
}

/// A scratch project root whose torch_npu worker is a copy of this one with `patches` (file
/// under targets/torch_npu, the exact text, its replacement) applied; suites, golden data and
/// the shared Python helpers are the repository's.
fn scratch_worker(patches: &[(&str, &str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let r = repo();
    std::fs::create_dir(root.join("targets")).unwrap();
    for (link, to) in [
        ("suites", r.join("suites")),
        ("golden", r.join("golden")),
        (".venv", r.join(".venv")),
        ("targets/python", r.join("targets/python")),
    ] {
        std::os::unix::fs::symlink(to, root.join(link)).unwrap();
    }
    copy_dir(
        &r.join("targets/torch_npu"),
        &root.join("targets/torch_npu"),
    );
    for (file, old, new) in patches {
        let path = root.join("targets/torch_npu").join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text.matches(old).count(),
            1,
            "{file} no longer holds exactly one `{old}`: update this test"
        );
        std::fs::write(&path, text.replace(old, new)).unwrap();
    }
    tmp
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == "__pycache__" {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(&name));
        } else {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}

/// Runs the cases matching `filter` on a patched worker; returns their statuses and messages.
fn run_patched(patches: &[(&str, &str, &str)], filter: &str) -> Vec<(String, String, String)> {
    run_patched_on(patches, filter, &[])
}

/// [`run_patched`] with the stand-in's host set by `env`.
fn run_patched_on(
    patches: &[(&str, &str, &str)],
    filter: &str,
    env: &[(&str, &str)],
) -> Vec<(String, String, String)> {
    let root = scratch_worker(patches);
    let (code, text, cases) = run_json(
        &["run", "--target", "torch_npu", "--filter", filter],
        env,
        Some(root.path()),
    );
    assert!(!cases.is_empty(), "exit {code:?}, no results: {text}");
    cases
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
                c["message"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The mla_decode cases the stand-in trials run (both layouts, both dtypes, LSE).
const MLA_CASES: &str = "^mla_decode/";

const MC2_BIAS_CASES: &str =
    "^mc2_matmul_allreduce/(bf16/r4-m16-k32-n64/binary-tree-bias-x3|f16/r8-m20-k64-n32/rank-order-bits)$";

fn the_stand_in_catches_the_old_worker_lines() {
    // The fixed worker passes these cases (bias and x3 on rank 0 only).
    for (id, st, msg) in run_patched(&[], MC2_BIAS_CASES) {
        assert_eq!(st, "passed", "{id}: {msg}");
    }
    // MC2 with bias and x3 passed on every rank: CANN adds them on every rank, R copies.
    let got = run_patched(
        &[(
            "mc2_rank.py",
            "epilogue_rank = rank == 0",
            "epilogue_rank = True",
        )],
        MC2_BIAS_CASES,
    );
    assert_eq!(got.len(), 2);
    for (id, st, msg) in got {
        assert_eq!(st, "failed", "bias on every rank: {id} {st} {msg}");
    }
    // inner_precise 0 with fully masked rows: without the row-invalid correction the rows are
    // not the documented 0.
    let masked = "^fa_prefill/bf16/b2-s16-hq2-hkv2-d64/explicit-mask-with-empty-rows$";
    assert_eq!(run_patched(&[], masked)[0].1, "passed");
    let got = run_patched(
        &[(
            "fia_args.py",
            "return 2  # row-invalid correction",
            "return 0",
        )],
        masked,
    );
    assert_eq!(got[0].1, "failed", "inner_precise 0: {got:?}");
    // An illegal TND shape sent to the kernel ends as an error (the kernel rejects it); the
    // fixed worker skips it with the documented reason (checked above).
    let tnd = "^fa_prefill/bf16/tnd-hq4-hkv2-d64/causal_br$";
    let got = run_patched(
        &[(
            "fia_args.py",
            "        tnd_check(p, heads, kv_heads, d, sparse, explicit)\n",
            "",
        )],
        tnd,
    );
    assert_eq!(got[0].1, "error", "TND unchecked: {got:?}");
    assert!(
        got[0].2.contains("aclnnFusedInferAttentionScoreV4"),
        "{got:?}"
    );
    // Padded query rows read back as the kernel's result: the API leaves them unwritten
    // (poisoned on the stand-in), so the case fails.
    let varlen = "^fa_prefill/bf16/b2-s24-hq4-hkv2-d64/varlen-lse$";
    assert_eq!(run_patched(&[], varlen)[0].1, "passed");
    let got = run_patched(
        &[(
            "worker.py",
            "    padded = fa.padded_rows(case.params)\n",
            "    padded = []\n",
        )],
        varlen,
    );
    assert_eq!(got[0].1, "failed", "padded rows from the kernel: {got:?}");
    // npu_dynamic_quant without its smooth_scales: the smooth cases fail bit for bit (the
    // MoE case's group_index then has no smooth rows to select: the call is rejected).
    let smooth = "^dynamic_quant/a2/bf16/t(24-h5120/qwen3-32b-smooth|32-h2048/moe-e4)/edges-ties$";
    for (id, st, msg) in run_patched(&[], smooth) {
        assert_eq!(st, "passed", "{id}: {msg}");
    }
    let got = run_patched(
        &[(
            "worker.py",
            "    if p.get(\"smooth\"):\n        kwargs[\"smooth_scales\"]",
            "    if False:\n        kwargs[\"smooth_scales\"]",
        )],
        smooth,
    );
    assert_eq!(got.len(), 2, "{got:?}");
    for (id, st, msg) in got {
        assert!(
            st == "failed" || st == "error",
            "smooth dropped: {id} {st} {msg}"
        );
    }
    // FIA over the INT8 cache without the antiquant offsets: the cases with offsets fail (the
    // write subtracted them, so the dequantised K and V are off by offset * scale).
    let offsets = "^pa_decode_int8/(bf16/b3-hq8-hkv2-d64-bs32/(channel-offset-new2|token-offset-BnNBsD)|f16/b2-hq4-hkv2-d128-bs64/key-channel-value-token)$";
    for (id, st, msg) in run_patched(&[], offsets) {
        assert_eq!(st, "passed", "{id}: {msg}");
    }
    let got = run_patched(
        &[(
            "worker.py",
            "    if p.get(\"antiquant_offset\"):\n        kw[\"key_antiquant_offset\"]",
            "    if False:\n        kw[\"key_antiquant_offset\"]",
        )],
        offsets,
    );
    assert_eq!(got.len(), 3, "{got:?}");
    for (id, st, msg) in got {
        assert_eq!(st, "failed", "offsets dropped: {id} {st} {msg}");
    }
    // npu_quant_matmul without its pertoken_scale: every per-token case fails bit for bit (or
    // is rejected where the page needs the scale: an f16 output with an f32 scale).
    let pertoken = "^quant_matmul/a2/(bf16|f16)/(f32|bf16)-scale-pertoken";
    let clean = run_patched(&[], pertoken);
    for (id, st, msg) in &clean {
        assert_eq!(st, "passed", "{id}: {msg}");
    }
    let got = run_patched(
        &[(
            "worker.py",
            "    if p.get(\"pertoken\"):\n        kwargs[\"pertoken_scale\"]",
            "    if False:\n        kwargs[\"pertoken_scale\"]",
        )],
        pertoken,
    );
    // Every per-token quick case (the small-M opt kernel's and the large-M kernel's).
    assert_eq!(got.len(), clean.len(), "{got:?}");
    assert!(clean.len() >= 5, "{clean:?}");
    for (id, st, msg) in got {
        assert!(
            st == "failed" || st == "error",
            "pertoken_scale dropped: {id} {st} {msg}"
        );
    }
    // The f32 scale handed over without npu_trans_quant_param: the f16 output then needs the
    // packed scale, and the call is rejected as the page says.
    let packed = "^quant_matmul/a2/f16/packed-scale-i32-bias/";
    let got = run_patched(
        &[(
            "worker.py",
            "        scale = torch_npu.npu_trans_quant_param(scale, kwargs.get(\"offset\"))\n",
            "        pass\n",
        )],
        packed,
    );
    // Every quick case of that form (the ties case, the subnormal outputs case).
    assert!(got.len() >= 2, "{got:?}");
    for (id, st, msg) in &got {
        assert_eq!(st, "error", "{id}: {msg}");
        assert!(msg.contains("npu_trans_quant_param"), "{id}: {msg}");
    }
    // The MoE combine handed ones instead of the router's expert_scales: the weighted sum is
    // wrong on every case whose weights are not all 1.
    // (On a simulated A3: the quick cases within its limits.)
    let moe = "^moe_dispatch_combine/w(4-e32-k4/|5-s1-|8-s4-)";
    let a3 = [("CONFORM_STANDIN_SOC", "Ascend910_9392")];
    for (id, st, msg) in run_patched_on(&[], moe, &a3) {
        assert_eq!(st, "passed", "{id}: {msg}");
    }
    let got = run_patched_on(
        &[(
            "moe_rank.py",
            "    combine_scales = ws\n",
            "    combine_scales = dev(np.ones_like(shard_w), \"F32\")\n",
        )],
        moe,
        &a3,
    );
    assert_eq!(got.len(), 3, "{got:?}");
    for (id, st, msg) in got {
        assert_eq!(st, "failed", "expert_scales dropped: {id} {st} {msg}");
    }
    // The A2 limits unchecked: the 4-rank launches reach the kernel, whose A2 tiling refuses
    // them (epWorldSize a multiple of 8): errors, where the worker skips them.
    let a2_moe = "^moe_dispatch_combine/w4-e32-k3/";
    let got = run_patched(
        &[(
            "worker.py",
            "    why = fa.moe_unsupported(p, torch.npu.get_device_name(0), fa.moe_hierarchy(os.environ))\n",
            "    why = None\n",
        )],
        a2_moe,
    );
    assert_eq!(got.len(), 2, "{got:?}");
    for (id, st, msg) in got {
        assert_eq!(st, "error", "MoE A2 limits unchecked: {id} {st} {msg}");
    }
    // ATB taken as loadable because _npu_reshape_and_cache exists (the old probe): on a host
    // without NNAL every ATB-based case errors at the call, where the worker skips it.
    let got = run_patched_on(
        &[(
            "worker.py",
            "        ATB_REASON = atb_check()\n",
            "        ATB_REASON = None\n",
        )],
        MLA_CASES,
        &[NO_ATB],
    );
    assert!(!got.is_empty());
    for (id, st, msg) in got {
        assert!(
            st == "error" && msg.contains("nnal package"),
            "ATB unprobed: {id} {st} {msg}"
        );
    }
    // MLA without its rope term: a worker that hands FIA neither query_rope nor key_rope runs
    // plain attention over the latent cache, and every case fails (or, with 128 query heads
    // over one KV head, is rejected: the plain path takes a group of at most 64).
    let mla = MLA_CASES;
    for (id, st, msg) in run_patched(&[], mla) {
        assert_eq!(st, "passed", "{id}: {msg}");
    }
    let got = run_patched(
        &[(
            "worker.py",
            "    kw[\"query_rope\"] = to_device(case.inputs[\"query_rope\"], dt)\n    kw[\"key_rope\"] = k_pe\n",
            "",
        )],
        mla,
    );
    assert!(!got.is_empty());
    assert!(got.iter().any(|(_, st, _)| st == "failed"), "{got:?}");
    for (id, st, msg) in got {
        assert!(
            st == "failed" || (st == "error" && msg.contains("numHeads / numKeyValueHeads")),
            "rope dropped: {id} {st} {msg}"
        );
    }
    // query_rope left out with key_rope kept, or the rope keys handed over as query_rope: the
    // page rejects both calls (the pair is given together; queryRope is shaped as the query).
    for (new, why) in [
        ("", "queryRope is null, but keyRope exists"),
        ("    kw[\"query_rope\"] = k_pe\n", "queryRope shape"),
    ] {
        let got = run_patched(
            &[(
                "worker.py",
                "    kw[\"query_rope\"] = to_device(case.inputs[\"query_rope\"], dt)\n",
                new,
            )],
            mla,
        );
        assert!(!got.is_empty());
        for (id, st, msg) in got {
            assert!(st == "error" && msg.contains(why), "{why}: {id} {st} {msg}");
        }
    }
    // The int8 output with the offset left out of the packed word (passed only as offset=):
    // the requantised values miss it and the case fails bit for bit.
    let int8 = "^quant_matmul/a2/int8/packed-scale-offset-i32-bias/";
    for (id, st, msg) in run_patched(&[], int8) {
        assert_eq!(st, "passed", "{id}: {msg}");
    }
    let got = run_patched(
        &[(
            "worker.py",
            "npu_trans_quant_param(scale, kwargs.get(\"offset\"))",
            "npu_trans_quant_param(scale)",
        )],
        int8,
    );
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].1, "failed", "{got:?}");
}

fn without_torch_npu_a_required_target_fails_with_the_import_error() {
    let (code, text) = conform_standin(
        &["run", "--target", "torch_npu", "--suite", "fa_prefill"],
        false,
        Some("torch_npu"),
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("import failed") && text.contains("No module named 'torch"),
        "{text}"
    );
}

/// The interpreter the worker runs under (as the target declaration resolves it).
fn python() -> PathBuf {
    std::env::var_os("CONFORM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv/bin/python"))
}

/// Where a real torch or torch_npu is importable, the stand-in refuses to load (by design) and
/// the device run replaces these trials.
fn real_torch_here() -> bool {
    Command::new(python())
        .args([
            "-c",
            "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torch') \
             or importlib.util.find_spec('torch_npu') else 1)",
        ])
        .status()
        .is_ok_and(|s| s.success())
}

fn main() {
    let missing = if let Some(why) = venv::missing(&repo()) {
        Some(why)
    } else if python().exists() && real_torch_here() {
        Some(
            "a real torch / torch_npu is importable here: the stand-in refuses to load, and the \
             device run takes its place"
                .to_string(),
        )
    } else {
        None
    };
    trials::run(vec![
        trials::Test {
            name: "quick_tier_on_the_standin_passes_or_skips_with_reasons",
            body: quick_tier_on_the_standin_passes_or_skips_with_reasons,
            missing: missing.clone(),
        },
        trials::Test {
            name: "the_stand_in_catches_the_old_worker_lines",
            body: the_stand_in_catches_the_old_worker_lines,
            missing: missing.clone(),
        },
        trials::Test {
            name: "a_stock_host_without_atb_skips_every_atb_case_and_nothing_errors",
            body: a_stock_host_without_atb_skips_every_atb_case_and_nothing_errors,
            missing: missing.clone(),
        },
        trials::Test {
            name: "the_quick_tier_never_errors_on_any_documented_soc",
            body: the_quick_tier_never_errors_on_any_documented_soc,
            missing: missing.clone(),
        },
        trials::Test {
            name: "the_stand_in_as_the_other_scale_form_is_fingerprinted_as_that_form",
            body: the_stand_in_as_the_other_scale_form_is_fingerprinted_as_that_form,
            missing: missing.clone(),
        },
        trials::Test {
            name: "validate_names_the_knobs_a_failing_kernel_leaves",
            body: validate_names_the_knobs_a_failing_kernel_leaves,
            missing: missing.clone(),
        },
        trials::Test {
            name: "without_torch_npu_a_required_target_fails_with_the_import_error",
            body: without_torch_npu_a_required_target_fails_with_the_import_error,
            missing,
        },
    ])
}
