//! `mla_decode`: the write touches exactly the mapped slots (bit for bit), the recipe is the same
//! for any thread count, it stays close to the f64 oracle (whose keys are 576 wide and values
//! 512), the AMLA rescale differs from the classic one only in the last bits, every required
//! fault of the catalogue changes the outputs of the quick shapes, and bad parameters are errors naming
//! the field.

use crate::op_runs;
use conform_reference::faults;
use conform_reference::ops::{self, OpError, Regime, Tensor, TensorMap, ValueDist};
use conform_reference::parallel::Threads;
use serde_json::{json, Value};

const OP: &str = "mla_decode";

fn generate(params: &Value, seed: u64) -> Result<TensorMap, OpError> {
    generate_with(params, &[], seed)
}

fn generate_with(params: &Value, regimes: &[Regime], seed: u64) -> Result<TensorMap, OpError> {
    op_runs::generate(
        OP,
        params,
        regimes,
        seed,
        0x31,
        ValueDist::Normal {
            mean: 0.0,
            std: 1.0,
        },
        "ascend_mla",
    )
}

fn run(params: &Value, recipe: &str, inputs: &TensorMap, threads: usize) -> TensorMap {
    op_runs::run(OP, params, recipe, inputs, threads)
}

fn differing(a: &Tensor, b: &Tensor) -> usize {
    op_runs::differing(a, b)
}

fn cases() -> Vec<Value> {
    vec![
        json!({"dtype": "bf16", "batch": 3, "num_heads": 8, "block_size": 16,
            "actual_seq_lengths_kv": [600, 1, 48], "scale": 0.07216878364870322,
            "softmax_lse_flag": true}),
        json!({"dtype": "f16", "input_layout": "BSND", "batch": 2, "num_heads": 4,
            "block_size": 128, "actual_seq_lengths_kv": [1100, 256], "new_tokens": 2,
            "scale": 0.1352337788608801, "softmax_lse_flag": true}),
    ]
}

#[test]
fn mla_decode_write_copies_exactly_the_mapped_rows() {
    for p in cases() {
        let inputs = generate(&p, 1).unwrap();
        let out = run(&p, "ascend_mla", &inputs, 1);
        for (cache, rows) in [("kv_cache", "kv"), ("rope_cache", "k_rope")] {
            let before = inputs[&format!("{cache}_in")].bits16().unwrap();
            let after = out[&format!("{cache}_out")].bits16().unwrap();
            let new = inputs[rows].bits16().unwrap();
            let slots = inputs["slot_mapping"].to_i64_vec().unwrap();
            let width = new.len() / slots.len();
            let mut expected = before.clone();
            for (t, &s) in slots.iter().enumerate() {
                let s = s as usize;
                expected[s * width..(s + 1) * width]
                    .copy_from_slice(&new[t * width..(t + 1) * width]);
            }
            assert_eq!(after, expected, "{cache}");
            assert!(before != after, "{cache}: the write changed nothing");
        }
    }
}

#[test]
fn mla_decode_bits_do_not_depend_on_the_thread_count() {
    for p in cases() {
        let inputs = generate(&p, 2).unwrap();
        let one = run(&p, "ascend_mla", &inputs, 1);
        for t in [2, 7] {
            assert_eq!(run(&p, "ascend_mla", &inputs, t), one, "{t} threads");
        }
        let o1 = run(&p, "oracle", &inputs, 1);
        assert_eq!(run(&p, "oracle", &inputs, 3), o1);
    }
}

#[test]
fn mla_decode_recipe_stays_close_to_the_oracle() {
    for p in cases() {
        for seed in 0..3 {
            let inputs = generate(&p, seed).unwrap();
            let r = run(&p, "ascend_mla", &inputs, 2);
            let o = run(&p, "oracle", &inputs, 2);
            let got = r["attention_out"].to_f64_vec();
            let want = o["attention_out"].to_f64_vec();
            // Outputs are convex combinations of values of size ~1: a 16-bit result is within
            // a few units of 2^-8 (bf16) of the exact one.
            let worst = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f64, f64::max);
            assert!(worst < 0.05, "{p}: max |recipe - oracle| = {worst}");
            let mean = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .sum::<f64>()
                / got.len() as f64;
            assert!(mean < 4e-3, "{p}: mean |recipe - oracle| = {mean}");
            let lg = r["softmax_lse"].to_f64_vec();
            let lw = o["softmax_lse"].to_f64_vec();
            for (a, b) in lg.iter().zip(&lw) {
                assert!((a - b).abs() < 1e-3 * b.abs().max(1.0), "lse {a} vs {b}");
            }
            assert_eq!(
                r["kv_cache_out"].to_f64_vec(),
                o["kv_cache_out"].to_f64_vec()
            );
            assert_eq!(
                r["rope_cache_out"].to_f64_vec(),
                o["rope_cache_out"].to_f64_vec()
            );
        }
    }
}

/// Small shapes with the regimes of the quick cases, where the faults that live in a regime
/// show.
fn regime_cases() -> Vec<(Value, Regime)> {
    vec![
        (
            json!({"dtype": "bf16", "batch": 2, "num_heads": 2, "block_size": 16,
                "actual_seq_lengths_kv": [40, 300], "scale": 0.07216878364870322}),
            Regime::RoundingTies,
        ),
        (
            json!({"dtype": "f16", "input_layout": "BSND", "batch": 2, "num_heads": 4,
                "block_size": 128, "actual_seq_lengths_kv": [64, 530], "new_tokens": 2,
                "scale": 0.1352337788608801}),
            Regime::RoundingTies,
        ),
        (
            json!({"dtype": "bf16", "batch": 2, "num_heads": 2, "block_size": 16,
                "actual_seq_lengths_kv": [100, 37], "new_tokens": 1, "scale": 0.07216878364870322}),
            Regime::SubnormalOutputs,
        ),
        (
            json!({"dtype": "f16", "batch": 2, "num_heads": 2, "block_size": 128,
                "actual_seq_lengths_kv": [600, 300], "scale": 0.07216878364870322}),
            Regime::ModerateLateMax,
        ),
        (
            json!({"dtype": "bf16", "input_layout": "BSND", "batch": 2, "num_heads": 4,
                "block_size": 16, "actual_seq_lengths_kv": [560, 100], "new_tokens": 2,
                "scale": 0.1352337788608801}),
            Regime::ModerateEarlyMax,
        ),
    ]
}

#[test]
fn mla_decode_every_fault_changes_the_quick_shapes() {
    let fam = ops::find(OP).unwrap();
    let names: Vec<&str> = faults::catalogue()
        .into_iter()
        .filter(|f| f.family == "mla_decode" && f.requirement == faults::Requirement::Quick)
        .map(|f| f.name)
        .collect();
    assert!(names.len() >= 10, "{names:?}");
    let shapes: Vec<(Value, Vec<Regime>)> = cases()
        .into_iter()
        .map(|p| (p, vec![]))
        .chain(regime_cases().into_iter().map(|(p, r)| (p, vec![r])))
        .collect();
    for seed in 3..5 {
        let runs: Vec<(Value, TensorMap, TensorMap)> = shapes
            .iter()
            .map(|(p, r)| {
                let inputs = generate_with(p, r, seed).unwrap();
                let clean = run(p, "ascend_mla", &inputs, 1);
                (p.clone(), inputs, clean)
            })
            .collect();
        for name in &names {
            let f = faults::find(name).unwrap();
            let most = runs
                .iter()
                .map(|(p, inputs, clean)| {
                    match faults::run(f, fam, p, "ascend_mla", inputs, Threads(1)).unwrap() {
                        faults::FaultRun::Outputs(o) => {
                            clean.iter().map(|(k, t)| differing(t, &o[k])).sum()
                        }
                        faults::FaultRun::NotApplicable(why) => panic!("{name}: {why}"),
                    }
                })
                .max()
                .unwrap_or(0);
            assert!(
                most >= 8,
                "{name}, seed {seed}: {most} elements differ at most"
            );
        }
    }
}

#[test]
fn mla_decode_ties_split_every_cast_on_every_seed() {
    for (p, r) in regime_cases()
        .into_iter()
        .filter(|(_, r)| *r == Regime::RoundingTies)
    {
        for seed in 0..4 {
            let inputs = generate_with(&p, &[r], seed).unwrap();
            let clean = run(&p, "ascend_mla", &inputs, 1);
            for name in [
                "mla-p-ties-even",
                "mla-output-other-tie-rule",
                "mla-factor-ties-even",
            ] {
                let f = faults::find(name).unwrap();
                let fam = ops::find(OP).unwrap();
                let o = match faults::run(f, fam, &p, "ascend_mla", &inputs, Threads(1)).unwrap() {
                    faults::FaultRun::Outputs(o) => o,
                    faults::FaultRun::NotApplicable(why) => panic!("{name}: {why}"),
                };
                let d = differing(&clean["attention_out"], &o["attention_out"]);
                let floor = if name == "mla-output-other-tie-rule" {
                    16
                } else {
                    8
                };
                assert!(d >= floor, "{name} on {p}, seed {seed}: {d} outputs differ");
            }
        }
    }
}

#[test]
fn mla_decode_subnormal_latent_columns_give_subnormal_outputs() {
    let (p, r) = regime_cases()
        .into_iter()
        .find(|(_, r)| *r == Regime::SubnormalOutputs)
        .unwrap();
    for seed in 0..4 {
        let inputs = generate_with(&p, &[r], seed).unwrap();
        let out = run(&p, "ascend_mla", &inputs, 1)["attention_out"].to_f64_vec();
        // bf16's smallest normal is f32's.
        let min_normal = f32::MIN_POSITIVE as f64;
        let mut columns = [0usize; 512];
        for row in out.chunks(512) {
            for (c, &x) in row.iter().enumerate() {
                if x != 0.0 && x.abs() < min_normal {
                    columns[c] += 1;
                }
            }
        }
        let rows = out.len() / 512;
        let full = columns.iter().filter(|&&n| n == rows).count();
        assert_eq!(full, 2, "seed {seed}: {columns:?}");
    }
    let long = json!({"dtype": "bf16", "batch": 1, "num_heads": 2, "block_size": 16,
        "actual_seq_lengths_kv": [600], "scale": 0.07});
    assert!(matches!(
        generate_with(&long, &[Regime::SubnormalOutputs], 0),
        Err(OpError::Regime { .. })
    ));
}

#[test]
fn mla_decode_moderate_maxima_hold_on_many_seeds() {
    // The quick cases' shapes, among them f16 at DeepSeek's scale, whose scores spread over
    // about 3.2 (the later steps' own keys come close to the first step's largest).
    let shapes = [
        (
            json!({"dtype": "f16", "input_layout": "BSND", "batch": 2, "num_heads": 4,
                "block_size": 16, "actual_seq_lengths_kv": [530, 700], "new_tokens": 2,
                "scale": 0.1352337788608801, "softmax_lse_flag": true}),
            Regime::ModerateLateMax,
        ),
        (
            json!({"dtype": "bf16", "input_layout": "BSND", "batch": 2, "num_heads": 4,
                "block_size": 16, "actual_seq_lengths_kv": [560, 100],
                "scale": 0.1352337788608801}),
            Regime::ModerateEarlyMax,
        ),
    ];
    for (p, r) in shapes {
        for seed in 0..40 {
            if let Err(e) = generate_with(&p, &[r], seed) {
                panic!("{} on {p}, seed {seed}: {e}", r.name());
            }
        }
    }
}

#[test]
fn mla_decode_moderate_maxima_refuse_the_oracle_and_short_shapes() {
    let (p, r) = regime_cases()
        .into_iter()
        .find(|(_, r)| *r == Regime::ModerateLateMax)
        .unwrap();
    let via_oracle = op_runs::generate(
        OP,
        &p,
        &[r],
        0,
        0x31,
        ValueDist::Normal {
            mean: 0.0,
            std: 1.0,
        },
        "oracle",
    );
    assert!(matches!(via_oracle, Err(OpError::Regime { .. })));
    let short = json!({"dtype": "bf16", "batch": 2, "num_heads": 4, "block_size": 16,
        "actual_seq_lengths_kv": [514, 40], "scale": 0.07});
    for r in [Regime::ModerateLateMax, Regime::ModerateEarlyMax] {
        match generate_with(&short, &[r], 0) {
            Err(OpError::Regime { regime, .. }) => assert_eq!(regime, r.name()),
            other => panic!("{:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn mla_decode_bad_parameters_name_the_field() {
    let fam = ops::find(OP).unwrap();
    let base = cases()[0].clone();
    let bad = |key: &str, v: Value| {
        let mut p = base.clone();
        p[key] = v;
        match fam.describe(&p) {
            Err(OpError::InvalidParam { param, .. }) => param,
            other => panic!("{key}: {other:?}"),
        }
    };
    assert_eq!(bad("num_heads", json!(3)), "num_heads");
    assert_eq!(bad("block_size", json!(32)), "block_size");
    assert_eq!(bad("input_layout", json!("TND")), "input_layout");
    assert_eq!(bad("dtype", json!("f32")), "dtype");
    assert_eq!(bad("scale", json!(0.0)), "scale");
    assert_eq!(
        bad("actual_seq_lengths_kv", json!([600, 0, 48])),
        "actual_seq_lengths_kv[1]"
    );
    // Unknown keys (KV heads, widths, q_seq) are refused by the parameter parser.
    for key in ["num_key_value_heads", "kv_lora_rank", "q_seq"] {
        assert_eq!(bad(key, json!(2)), "params", "{key}");
    }
}

/// Scores (f64, scaled) of head `h` of batch entry `b` over its valid keys, read back from the
/// generated inputs: latent + rope, and the latent part alone.
fn scores(p: &Value, inputs: &TensorMap, b: usize, h: usize) -> Vec<(f64, f64)> {
    let n = p["num_heads"].as_u64().unwrap() as usize;
    let bs = p["block_size"].as_u64().unwrap() as usize;
    let lk = p["actual_seq_lengths_kv"][b].as_u64().unwrap() as usize;
    let new = p.get("new_tokens").and_then(Value::as_u64).unwrap_or(1) as usize;
    let scale = p["scale"].as_f64().unwrap() as f32 as f64;
    let q = inputs["query"].to_f64_vec();
    let qr = inputs["query_rope"].to_f64_vec();
    let (q, qr) = (
        &q[(b * n + h) * 512..(b * n + h + 1) * 512],
        &qr[(b * n + h) * 64..(b * n + h + 1) * 64],
    );
    let cache = inputs["kv_cache_in"].to_f64_vec();
    let rope = inputs["rope_cache_in"].to_f64_vec();
    let kv = inputs["kv"].to_f64_vec();
    let kr = inputs["k_rope"].to_f64_vec();
    let table = inputs["block_table"].to_i64_vec().unwrap();
    let width = table.len() / p["batch"].as_u64().unwrap() as usize;
    (0..lk)
        .map(|j| {
            let (lat, rp): (&[f64], &[f64]) = if j >= lk - new {
                let t = b * new + (j - (lk - new));
                (&kv[t * 512..(t + 1) * 512], &kr[t * 64..(t + 1) * 64])
            } else {
                let row = table[b * width + j / bs] as usize * bs + j % bs;
                (
                    &cache[row * 512..(row + 1) * 512],
                    &rope[row * 64..(row + 1) * 64],
                )
            };
            let nope: f64 = q.iter().zip(lat).map(|(a, b)| a * b).sum();
            let r: f64 = qr.iter().zip(rp).map(|(a, b)| a * b).sum();
            (scale * (nope + r), scale * nope)
        })
        .collect()
}

#[test]
fn mla_decode_rope_late_max_holds_on_every_seed() {
    let regimes = [Regime::MlaRopeLateMax];
    for p in cases() {
        let n = p["num_heads"].as_u64().unwrap() as usize;
        for seed in 0..6 {
            let inputs = generate_with(&p, &regimes, seed).unwrap();
            // Entry 0 is long enough in both shapes: every head up to 8 has its late key.
            for h in 0..n.min(8) {
                let s = scores(&p, &inputs, 0, h);
                let m1 = s[..512]
                    .iter()
                    .map(|x| x.0)
                    .fold(f64::NEG_INFINITY, f64::max);
                let (j, &(top, nope)) = s
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
                    .unwrap();
                assert!(j >= 512, "seed {seed} head {h}: the maximum is at key {j}");
                let lead = top - m1;
                assert!(
                    (2.9..6.1).contains(&lead),
                    "seed {seed} head {h}: lead {lead}"
                );
                assert!(
                    nope < m1 - 1.0,
                    "seed {seed} head {h}: without the rope {nope} vs {m1}"
                );
            }
            // The clean recipe and the oracle still agree (the construction stays in range).
            let r = run(&p, "ascend_mla", &inputs, 1);
            let o = run(&p, "oracle", &inputs, 1);
            let worst = r["attention_out"]
                .to_f64_vec()
                .iter()
                .zip(&o["attention_out"].to_f64_vec())
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f64, f64::max);
            assert!(worst < 0.05, "seed {seed}: {worst}");
        }
    }
    // A shape that cannot hold it is refused, naming the regime.
    let short = json!({"dtype": "bf16", "batch": 2, "num_heads": 4, "block_size": 16,
        "actual_seq_lengths_kv": [500, 40], "scale": 0.07});
    match generate_with(&short, &regimes, 0) {
        Err(OpError::Regime { regime, .. }) => assert_eq!(regime, "mla_rope_late_max"),
        other => panic!("{:?}", other.map(|_| ())),
    }
    let one_head = json!({"dtype": "bf16", "batch": 2, "num_heads": 1, "block_size": 16,
        "actual_seq_lengths_kv": [600, 40], "scale": 0.07});
    assert!(matches!(
        generate_with(&one_head, &regimes, 0),
        Err(OpError::Regime { .. })
    ));
}
