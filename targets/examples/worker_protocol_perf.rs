//! Measures the worker protocol: per-case overhead with tiny tensors, and tensor transfer
//! with a 256 MiB input and a 256 MiB output, through the Python helper (`copy` op of
//! targets/tests/workers/helper_double.py). Needs the venv (ci/setup-targets.sh).
//!
//! `cargo run --release -p conform-targets --example worker_protocol_perf [-- MiB]`
//! Figures are recorded in docs/PERFORMANCE.md ("Targets: worker protocol").

use conform_reference::ops::{ElemType, Tensor, TensorMap, TensorSpec};
use conform_targets::worker::config::{python_interpreter, Limits, ResolvedConfig, Timeouts};
use conform_targets::{ExecRequest, Target, WorkerTarget};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

fn request(n: usize) -> ExecRequest {
    let mut inputs = TensorMap::new();
    let data: Vec<u8> = (0..n * 4).map(|i| (i % 251) as u8 & 0x3F).collect();
    inputs.insert(
        "x".into(),
        Tensor::new(ElemType::F32, vec![n], data).expect("length matches"),
    );
    ExecRequest {
        case_id: "perf/copy".into(),
        input_set: 0,
        op: "copy".into(),
        params: serde_json::json!({"n": n}),
        recipe: None,
        inputs,
        expected_outputs: vec![TensorSpec::new("y", ElemType::F32, vec![n], &["i"])],
        timing: None,
        poison: Default::default(),
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut env = BTreeMap::new();
    env.insert(
        "PYTHONPATH".to_string(),
        repo.join("targets/python").into_os_string(),
    );
    let cfg = ResolvedConfig {
        description: "perf".into(),
        command: python_interpreter(repo),
        args: vec![repo
            .join("targets/tests/workers/helper_double.py")
            .to_string_lossy()
            .into_owned()],
        env,
        working_dir: repo.to_path_buf(),
        device_group: "cpu".into(),
        timeouts: Timeouts::default(),
        limits: Limits::default(),
        nondeterministic: None,
    };
    let mut w = WorkerTarget::new("perf", cfg);
    let a = w.availability();
    println!("worker: {a}");
    println!(
        "scratch: {}",
        conform_targets::worker::default_scratch_root().display()
    );
    if !a.is_available() {
        std::process::exit(2);
    }

    // Per-case overhead: 4-element tensors.
    let tiny = request(4);
    for _ in 0..50 {
        w.execute(&tiny).expect("tiny case");
    }
    let mut t: Vec<f64> = (0..500)
        .map(|_| {
            let s = Instant::now();
            w.execute(&tiny).expect("tiny case");
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let mean = t.iter().sum::<f64>() / t.len() as f64;
    println!(
        "tiny case (4 x f32 in, 4 x f32 out): median {:.3} ms, mean {:.3} ms over 500",
        median(&mut t),
        mean
    );

    // Transfer: `mib` MiB in, `mib` MiB out.
    let n = mib * (1 << 20) / 4;
    let big = request(n);
    // The pieces on their own: file write and read on the scratch filesystem, poison fill.
    let scratch = tempfile::tempdir_in(conform_targets::worker::default_scratch_root()).unwrap();
    let path = scratch.path().join("x.safetensors");
    let meta = conform_targets::tensor_file::Metadata::new();
    for _ in 0..3 {
        let s = Instant::now();
        conform_targets::tensor_file::write(&path, &big.inputs, &meta).unwrap();
        let w = s.elapsed().as_secs_f64();
        let s = Instant::now();
        let back = conform_targets::tensor_file::read(
            &path,
            conform_targets::input_file::Limit::GOLDEN_TENSORS,
        )
        .unwrap();
        let r = s.elapsed().as_secs_f64();
        let s = Instant::now();
        let p = conform_targets::poison::poisoned(ElemType::F32, vec![n]).unwrap();
        let f = s.elapsed().as_secs_f64();
        drop((back, p));
        println!(
            "pieces: write {:.1} ms ({:.2} GB/s), read {:.1} ms ({:.2} GB/s), poison fill {:.1} ms",
            w * 1e3,
            (n * 4) as f64 / w / 1e9,
            r * 1e3,
            (n * 4) as f64 / r / 1e9,
            f * 1e3
        );
    }
    w.execute(&big).expect("big case");
    let reps: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            let e = w.execute(&big).expect("big case");
            let secs = s.elapsed().as_secs_f64();
            assert_eq!(e.outputs["y"].data, big.inputs["x"].data);
            println!("  {mib} MiB case: {:.1} ms", secs * 1e3);
            secs
        })
        .collect();
    let best = t.iter().cloned().fold(f64::INFINITY, f64::min);
    let secs = median(&mut t);
    println!(
        "best {:.1} ms: {:.2} GB/s counting input + output",
        best * 1e3,
        2.0 * (n * 4) as f64 / best / 1e9
    );
    let bytes = (n * 4) as f64;
    println!(
        "{mib} MiB in + {mib} MiB out: median {:.1} ms per case; {:.2} GB/s counting input + output, {:.2} GB/s counting the input only",
        secs * 1e3,
        2.0 * bytes / secs / 1e9,
        bytes / secs / 1e9
    );
}
