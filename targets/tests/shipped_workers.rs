//! The workers shipped in targets/*/ through the registry: which are available here, and
//! end-to-end runs of the CPU workers. The worker tests need the venv (ci/setup-targets.sh);
//! without it they are ignored with the reason, unless CONFORM_REQUIRE_TARGETS is set (CI),
//! where they run and fail.

use conform_reference::ops::{ElemType, Tensor, TensorMap, TensorSpec};
use conform_reference::parallel::Threads;
use conform_targets::registry::{self, check_required, parse_required};
use conform_targets::{poison, Availability, ExecRequest, Target};
use serde_json::json;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

use conform_test_support::trials;

/// Why the worker tests cannot run here, or None (they run; in CI a missing venv then fails).
fn missing_venv() -> Option<String> {
    let absent = !repo().join(".venv/bin/python").exists();
    (absent && registry::required_targets().is_empty())
        .then(|| ".venv is absent: run ci/setup-targets.sh".to_string())
}

fn main() {
    let venv = missing_venv();
    trials::run(vec![
        trials::Test {
            name: "registry_lists_every_shipped_target",
            body: registry_lists_every_shipped_target,
            missing: None,
        },
        trials::Test {
            name: "shipped_workers_keep_the_search_paths_they_inherit",
            body: shipped_workers_keep_the_search_paths_they_inherit,
            missing: None,
        },
        trials::Test {
            name: "cpu_workers_are_available_and_torch_npu_says_why_it_is_not",
            body: cpu_workers_are_available_and_torch_npu_says_why_it_is_not,
            missing: venv.clone(),
        },
        trials::Test {
            name: "example_and_ml_dtypes_agree_bit_for_bit_on_mxfp4",
            body: example_and_ml_dtypes_agree_bit_for_bit_on_mxfp4,
            missing: venv.clone(),
        },
        trials::Test {
            name: "numpy_and_onnxruntime_agree_on_attention_and_skip_what_they_cannot_do",
            body: numpy_and_onnxruntime_agree_on_attention_and_skip_what_they_cannot_do,
            missing: venv,
        },
    ])
}

fn target(targets: &mut [Box<dyn Target>], name: &str) -> usize {
    targets.iter().position(|t| t.name() == name).unwrap()
}

fn registry_lists_every_shipped_target() {
    let targets = registry::discover(&repo(), Threads::ONE).unwrap();
    let names: Vec<String> = targets.iter().map(|t| t.name().to_string()).collect();
    for n in [
        "reference",
        "example",
        "ml_dtypes",
        "numpy",
        "onnxruntime",
        "torch",
        "torch_npu",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
    }
}

/// Every shipped worker puts the project's Python helpers before the `PYTHONPATH` it inherits
/// (where a toolkit's `set_env.sh` put its own packages) and sets no search path outright: a
/// replaced path would drop what the device runtime needs, on the host only.
fn shipped_workers_keep_the_search_paths_they_inherit() {
    use conform_targets::worker::env::EnvValue;
    use conform_targets::worker::WorkerConfig;
    let mut checked = 0;
    for entry in std::fs::read_dir(repo().join("targets")).unwrap() {
        let path = entry.unwrap().path().join("target.toml");
        if !path.is_file() {
            continue;
        }
        let cfg = WorkerConfig::load(&path).unwrap();
        match cfg.env.get("PYTHONPATH") {
            Some(EnvValue::Edit(e)) => assert_eq!(
                e.prepend.as_deref(),
                Some("${REPO}/targets/python"),
                "{}",
                path.display()
            ),
            other => panic!("{}: PYTHONPATH is {other:?}", path.display()),
        }
        for (name, value) in &cfg.env {
            let search_path = ["PATH", "PYTHONPATH", "LD_LIBRARY_PATH"].contains(&name.as_str())
                || name.starts_with("ASCEND_");
            assert!(
                !(search_path && matches!(value, EnvValue::Set(_))),
                "{}: {name} replaces the inherited value",
                path.display()
            );
        }
        checked += 1;
    }
    assert!(checked >= 6, "{checked} target.toml files");
}

fn cpu_workers_are_available_and_torch_npu_says_why_it_is_not() {
    let mut targets = registry::discover(&repo(), Threads::ONE).unwrap();
    let errors = check_required(
        &mut targets,
        &parse_required("reference,example,ml_dtypes,numpy,onnxruntime"),
    );
    assert!(errors.is_empty(), "{errors:?}");
    // torch_npu cannot run here: it must say why, cleanly.
    let i = target(&mut targets, "torch_npu");
    assert_eq!(targets[i].device_group(), "npu");
    assert_eq!(targets[0].device_group(), "cpu");
    match targets[i].availability() {
        Availability::Unavailable { reason } => assert!(!reason.is_empty()),
        Availability::Available { description, .. } => {
            eprintln!("torch_npu is available here: {description}")
        }
    }
}

fn mxfp4_request(seed: u64, out: ElemType) -> ExecRequest {
    let (n, k) = (4usize, 64usize);
    let mut s = seed;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let weight: Vec<u8> = (0..n * k / 2).map(|_| next() as u8).collect();
    // Scales around 2^0, plus one NaN group.
    let mut scale: Vec<u8> = (0..n * k / 32).map(|_| 120 + (next() % 16) as u8).collect();
    scale[3] = 255;
    let mut inputs = TensorMap::new();
    inputs.insert("weight".into(), Tensor::from_u8(vec![n, k / 2], weight));
    inputs.insert("scale".into(), Tensor::from_u8(vec![n, k / 32], scale));
    ExecRequest {
        case_id: "mxfp4_dequant/test".into(),
        input_set: 0,
        op: "mxfp4_dequant".into(),
        params: json!({"dtype": out.name().to_lowercase(), "n": n, "k": k}),
        recipe: None,
        inputs,
        expected_outputs: vec![TensorSpec::new("out", out, vec![n, k], &["n", "k"])],
        timing: None,
        poison: Default::default(),
    }
}

fn example_and_ml_dtypes_agree_bit_for_bit_on_mxfp4() {
    let mut targets = registry::discover(&repo(), Threads::ONE).unwrap();
    let e = target(&mut targets, "example");
    let m = target(&mut targets, "ml_dtypes");
    for (seed, dt) in [
        (1u64, ElemType::Bf16),
        (2, ElemType::F16),
        (3, ElemType::F32),
    ] {
        let r = mxfp4_request(seed, dt);
        let a = targets[e].execute(&r).unwrap();
        let b = targets[m].execute(&r).unwrap();
        let out = &a.outputs["out"];
        assert_eq!(out.dtype, dt);
        assert_eq!(poison::count_unwritten(out), 0);
        assert_eq!(a.outputs, b.outputs, "{dt:?}");
        // The NaN group (scale index 3: row 1, elements 32..64) is NaN, the rest finite.
        let v = out.to_f64_vec();
        assert!(v[64 + 32..128].iter().all(|x| x.is_nan()));
        assert!(v[..64].iter().all(|x| x.is_finite()));
    }
}

fn numpy_and_onnxruntime_agree_on_attention_and_skip_what_they_cannot_do() {
    let mut targets = registry::discover(&repo(), Threads::ONE).unwrap();
    let (b, s, n, d) = (1usize, 4usize, 2usize, 8usize);
    let params = json!({"dtype": "f32", "input_layout": "BSND", "batch": b, "q_seq": s,
        "kv_seq": s, "num_heads": n, "num_key_value_heads": 1, "head_dim": d, "sparse_mode": 3});
    let mut inputs = TensorMap::new();
    for (i, name) in ["query", "key", "value"].iter().enumerate() {
        let kvn = if i == 0 { n } else { 1 };
        let v: Vec<f32> = (0..b * s * kvn * d)
            .map(|j| (((j * 7 + i * 3) % 11) as f32 - 5.0) / 8.0)
            .collect();
        inputs.insert(name.to_string(), Tensor::from_f32(vec![b, s, kvn, d], &v));
    }
    let r = ExecRequest {
        case_id: "fa_prefill/test".into(),
        input_set: 0,
        op: "fa_prefill".into(),
        params: params.clone(),
        recipe: None,
        inputs,
        expected_outputs: vec![TensorSpec::new(
            "attention_out",
            ElemType::F32,
            vec![b, s, n, d],
            &["b", "s", "n", "d"],
        )],
        timing: None,
        poison: Default::default(),
    };
    let np_i = target(&mut targets, "numpy");
    let ort_i = target(&mut targets, "onnxruntime");
    let a = targets[np_i].execute(&r).unwrap();
    let o = targets[ort_i].execute(&r).unwrap();
    let (x, y) = (
        a.outputs["attention_out"].to_f64_vec(),
        o.outputs["attention_out"].to_f64_vec(),
    );
    for (p, q) in x.iter().zip(&y) {
        approx::assert_abs_diff_eq!(p, q, epsilon = 1e-5);
    }
    // The first query row attends only to key 0 (bottom-right causal, S = L): out = v[0].
    let v0: Vec<f64> = r.inputs["value"].to_f64_vec()[..d].to_vec();
    for (p, q) in x[..d].iter().zip(&v0) {
        approx::assert_abs_diff_eq!(p, q, epsilon = 1e-6);
    }
    let bf16 = json!({"dtype": "bf16"});
    let skip = targets[ort_i].supports("fa_prefill", &bf16).unwrap_err();
    assert!(skip.0.contains("bf16"), "{skip}");
    assert!(targets[ort_i]
        .supports("mxfp4_dequant", &json!({}))
        .is_err());
}
