//! `pa_decode_int8`: the regimes hold on every seed (seen through what the write's faults change,
//! not through the generator's own check), the write touches exactly the mapped slots, the
//! result is the same for any thread count, the oracle writes the caches as the recipe does and
//! the recipe's attention stays close to the oracle's, and bad parameters or inputs are errors
//! naming what is wrong.

use crate::op_runs;
use conform_reference::formats::DType;
use conform_reference::ops::pa_decode_int8::{dequantise_one, quantise, C8Recipe};
use conform_reference::ops::{self, OpError, Regime, Tensor, TensorMap, ValueDist};
use conform_reference::parallel::Threads;
use serde_json::{json, Value};

const OP: &str = "pa_decode_int8";
const SEEDS: u64 = 12;
const BOTH: [Regime; 2] = [Regime::RoundingTies, Regime::KvInt8Edges];

fn generate(params: &Value, regimes: &[Regime], seed: u64) -> Result<TensorMap, OpError> {
    op_runs::generate(
        OP,
        params,
        regimes,
        seed,
        0xC8,
        ValueDist::Normal {
            mean: 0.0,
            std: 1.0,
        },
        "ascend_ifa_c8",
    )
}

fn run(params: &Value, recipe: &str, inputs: &TensorMap, threads: usize) -> TensorMap {
    op_runs::run(OP, params, recipe, inputs, threads)
}

fn with_fault(name: &str, params: &Value, inputs: &TensorMap) -> TensorMap {
    op_runs::with_fault(OP, name, params, "ascend_ifa_c8", inputs)
}

fn differing(a: &Tensor, b: &Tensor) -> usize {
    op_runs::differing(a, b)
}

fn cases() -> Vec<Value> {
    let base = json!({"batch": 3, "num_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
        "block_size": 32, "actual_seq_lengths_kv": [70, 33, 45],
        "vector_cores": crate::attention_common::VECTOR_CORES});
    let with = |extra: Value| {
        let mut v = base.clone();
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    vec![
        with(json!({"dtype": "bf16", "new_tokens": 2, "antiquant_offset": true})),
        with(json!({"dtype": "f16", "antiquant_offset": true})),
        with(
            json!({"dtype": "bf16", "input_layout": "BNSD", "cache_layout": "BnNBsD",
            "key_antiquant_mode": 1, "value_antiquant_mode": 1, "antiquant_offset": true}),
        ),
        with(
            json!({"dtype": "f16", "input_layout": "BSH", "key_antiquant_mode": 0,
            "value_antiquant_mode": 1}),
        ),
        with(json!({"dtype": "bf16"})),
    ]
}

#[test]
fn regimes_hold_on_every_seed() {
    for p in cases() {
        for seed in 0..SEEDS {
            let ins = generate(&p, &BOTH, seed).unwrap();
            let base = run(&p, "ascend_ifa_c8", &ins, 2);
            // Ties: ties-away changes at least 8 written elements of each cache.
            let away = with_fault("c8-write-ties-away", &p, &ins);
            // Saturation: wrapping changes at least 16 of each (8 per sign).
            let wrap = with_fault("c8-write-no-saturation", &p, &ins);
            for cache in ["key_cache_out", "value_cache_out"] {
                let n = differing(&base[cache], &away[cache]);
                assert!(n >= 8, "{p} seed {seed}: {cache}: {n} ties");
                let n = differing(&base[cache], &wrap[cache]);
                assert!(n >= 16, "{p} seed {seed}: {cache}: {n} saturated");
            }
        }
    }
}

#[test]
fn the_write_touches_exactly_the_mapped_slots() {
    for p in cases() {
        let ins = generate(&p, &BOTH, 3).unwrap();
        let out = run(&p, "ascend_ifa_c8", &ins, 1);
        let rows = ins["slot_mapping"].to_i64_vec().unwrap().len();
        let kvh = p["num_key_value_heads"].as_u64().unwrap() as usize;
        let d = p["head_dim"].as_u64().unwrap() as usize;
        for (i, o) in [
            ("key_cache_in", "key_cache_out"),
            ("value_cache_in", "value_cache_out"),
        ] {
            // Every byte outside the written slots is the input's; at most rows * KV_N * D
            // bytes differ (a written value may equal the stale one).
            let n = differing(&ins[i], &out[o]);
            assert!(n <= rows * kvh * d && n > 0, "{p}: {o}: {n} bytes changed");
            let shifted = with_fault("c8-slot-off-by-one", &p, &ins);
            assert!(
                differing(&out[o], &shifted[o]) >= rows * kvh * d / 2,
                "{p}: {o}"
            );
        }
    }
}

#[test]
fn any_thread_count_gives_the_same_bits() {
    for p in cases() {
        let ins = generate(&p, &BOTH, 5).unwrap();
        for recipe in ["ascend_ifa_c8", "c8_dequant_in_dtype", "oracle"] {
            let one = run(&p, recipe, &ins, 1);
            for t in [2, 3, 7] {
                assert_eq!(one, run(&p, recipe, &ins, t), "{p} {recipe} threads {t}");
            }
        }
    }
}

#[test]
fn the_oracle_writes_as_the_recipe_and_stays_near_its_attention() {
    // The write is bit-defined (the torch ops), so the oracle's caches are the recipe's bit for
    // bit; only its dequantisation and attention are exact.
    for p in cases() {
        let ins = generate(&p, &BOTH, 7).unwrap();
        let r = run(&p, "ascend_ifa_c8", &ins, 2);
        let o = run(&p, "oracle", &ins, 2);
        for cache in ["key_cache_out", "value_cache_out"] {
            let got: Vec<f64> = r[cache].data.iter().map(|&b| b as i8 as f64).collect();
            assert_eq!(got, o[cache].to_f64_vec(), "{p}: {cache}");
        }
        let got = r["attention_out"].to_f64_vec();
        let exact = o["attention_out"].to_f64_vec();
        let scale = exact.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        for (g, e) in got.iter().zip(&exact) {
            assert!((g - e).abs() <= 0.05 * scale + 1e-3, "{p}: out {g} vs {e}");
        }
    }
}

#[test]
fn hand_computed_elements() {
    let r = C8Recipe::preset("ascend_ifa_c8").unwrap();
    // bf16, s = 3/64 (inv = fl_bf16(21.333..) = 21.375), o = 0.5: x = 2.0 -> 2 * 21.375 =
    // 42.75 (exact in bf16), minus 0.5 = 42.25 -> bf16 42.25 -> round 42.
    assert_eq!(quantise(DType::Bf16, 0, &r, 2.0, 3.0 / 64.0, 0.5), 42);
    // The exact quotient of the same element rounds alike: 2 / (3/64) - 0.5 = 42.1666.. -> 42.
    assert_eq!((2.0f64 / (3.0 / 64.0) - 0.5).round(), 42.0);
    // Per-token f32: x = 1.0, s = 0.1 (f32), o = -2: 1 * fl32(10) + 2 = 12.
    assert_eq!(quantise(DType::Bf16, 1, &r, 1.0, 0.1, -2.0), 12);
    // Dequantisation (42 + 0.5) * 3/64 = 1.9921875 exactly.
    assert_eq!(
        dequantise_one(DType::Bf16, &r, 42.0, 3.0 / 64.0, 0.5),
        1.9921875
    );
    let in_dtype = C8Recipe::preset("c8_dequant_in_dtype").unwrap();
    // 127 + 0.0625 = 127.0625 rounds to bf16 127 (8 bits), then * 1/32.
    assert_eq!(
        dequantise_one(DType::Bf16, &in_dtype, 127.0, 0.03125, 0.0625),
        127.0 * 0.03125
    );
    assert_eq!(
        dequantise_one(DType::Bf16, &r, 127.0, 0.03125, 0.0625),
        127.0625 * 0.03125
    );
}

fn err(params: Value) -> String {
    ops::find(OP)
        .unwrap()
        .describe(&params)
        .unwrap_err()
        .to_string()
}

#[test]
fn bad_parameters_and_inputs_are_named_errors() {
    let base = json!({"dtype": "bf16", "batch": 1, "num_heads": 2, "num_key_value_heads": 1,
        "head_dim": 32, "block_size": 32, "actual_seq_lengths_kv": [40], "vector_cores": crate::attention_common::VECTOR_CORES});
    let with = |k: &str, v: Value| {
        let mut p = base.clone();
        p[k] = v;
        p
    };
    assert!(err(with("block_size", json!(16))).contains("`block_size`"));
    assert!(err(with("key_antiquant_mode", json!(2))).contains("`key_antiquant_mode`"));
    let mut p = with("key_antiquant_mode", json!(1));
    p["value_antiquant_mode"] = json!(0);
    assert!(err(p).contains("`value_antiquant_mode`"));
    // Key per-channel with value per-token over INT8: f16 only.
    assert!(err(with("value_antiquant_mode", json!(1))).contains("`dtype`"));
    assert!(err(with("cache_layout", json!("BnNBsD"))).contains("`cache_layout`"));
    assert!(err(with("new_tokens", json!(41))).contains("actual_seq_lengths_kv[0]"));
    assert!(err(with("dtype", json!("f32"))).contains("`dtype`"));
    assert!(err(with("q_seq", json!(2))).contains("q_seq"));

    // Inputs: a zero scale and a slot outside the cache are named.
    let fam = ops::find(OP).unwrap();
    let mut ins = generate(&base, &[], 1).unwrap();
    let s = ins["key_antiquant_scale"].clone();
    let mut v = s.to_f64_vec();
    v[3] = 0.0;
    ins.insert(
        "key_antiquant_scale".into(),
        Tensor::round_values(
            s.dtype,
            s.shape.clone(),
            &v,
            conform_reference::formats::Rounding::RNE,
        ),
    );
    let e = fam
        .run(&base, "ascend_ifa_c8", &ins, Threads(1))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("key_antiquant_scale") && e.contains("element 3"),
        "{e}"
    );
    let mut ins = generate(&base, &[], 1).unwrap();
    ins.insert("slot_mapping".into(), Tensor::from_i32(vec![1], &[1 << 20]));
    let e = fam
        .run(&base, "ascend_ifa_c8", &ins, Threads(1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("slot_mapping") && e.contains("entry 0"), "{e}");
    // A shape that cannot hold kv_int8_edges names the regime.
    let e = generate(&base, &[Regime::KvInt8Edges], 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("kv_int8_edges"), "{e}");
}

/// A case of the attention-half regimes, on the Atlas 800I A2's 40 vector cores (the suite's).
fn half_case(extra: Value) -> Value {
    let mut v = json!({"vector_cores": 40});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// Attention elements (out of `attention_out`) a fault changes against the recipe.
fn moved(fault: &str, p: &Value, ins: &TensorMap) -> usize {
    let base = run(p, "ascend_ifa_c8", ins, 2);
    let bad = with_fault(fault, p, ins);
    differing(&base["attention_out"], &bad["attention_out"])
}

#[test]
fn attention_half_regimes_hold_on_every_seed() {
    let long = json!({"batch": 8, "num_heads": 20, "num_key_value_heads": 2, "head_dim": 16,
        "block_size": 128, "actual_seq_lengths_kv": [2100, 16, 40, 2060, 7, 64, 1, 100]});
    let short = json!({"batch": 3, "num_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
        "block_size": 32, "actual_seq_lengths_kv": [70, 33, 45]});
    let with = |base: &Value, extra: Value| {
        let mut v = half_case(base.clone());
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    // (regime, case, the faults it must show, elements each moves at least).
    let plan: Vec<(Regime, Value, Vec<&str>)> = vec![
        (
            Regime::ModerateLateMax,
            with(&long, json!({"dtype": "bf16", "antiquant_offset": true})),
            vec!["attn-o-rescale-lagged"],
        ),
        (
            Regime::ModerateEarlyMax,
            with(&long, json!({"dtype": "f16", "new_tokens": 1})),
            vec!["attn-running-max-falls"],
        ),
        (
            Regime::SubnormalOutputs,
            with(
                &short,
                json!({"dtype": "bf16", "new_tokens": 2, "antiquant_offset": true}),
            ),
            vec!["attn-subnormal-inputs-flushed"],
        ),
        (
            Regime::SubnormalOutputs,
            with(&short, json!({"dtype": "f16"})),
            vec!["attn-subnormal-inputs-flushed"],
        ),
        (
            Regime::AttentionTies,
            with(&short, json!({"dtype": "bf16", "antiquant_offset": true})),
            vec!["attn-p-rounding-swapped", "attn-output-rounding-swapped"],
        ),
        (
            Regime::AttentionTies,
            with(&short, json!({"dtype": "f16", "new_tokens": 2})),
            vec!["attn-p-rounding-swapped", "attn-output-rounding-swapped"],
        ),
    ];
    for (regime, p, faults) in &plan {
        for seed in 0..4 {
            let ins = generate(p, &[*regime], seed).unwrap();
            for f in faults {
                let n = moved(f, p, &ins);
                assert!(
                    n >= 8,
                    "{} seed {seed}: {f} moves {n} elements",
                    regime.name()
                );
            }
            if *regime == Regime::SubnormalOutputs {
                // Every output is finite, and the subnormal columns hold nonzero subnormals.
                let out = run(p, "ascend_ifa_c8", &ins, 1)["attention_out"].to_f64_vec();
                let tiny = out
                    .iter()
                    .filter(|v| **v != 0.0 && v.abs() < 6.2e-5)
                    .count();
                assert!(tiny >= 2 * 8, "seed {seed}: {tiny} subnormal outputs");
            }
        }
    }
}

#[test]
fn attention_half_regimes_refuse_what_they_cannot_hold() {
    let p = half_case(json!({"dtype": "bf16", "batch": 2, "num_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "block_size": 32,
        "actual_seq_lengths_kv": [70, 33], "key_antiquant_mode": 1, "value_antiquant_mode": 1}));
    for r in [Regime::ModerateLateMax, Regime::AttentionTies] {
        let e = generate(&p, &[r], 0).unwrap_err().to_string();
        assert!(
            e.contains(r.name()) && e.contains("key_antiquant_mode = 0"),
            "{e}"
        );
    }
    let e = generate(&p, &[Regime::SubnormalOutputs], 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("value_antiquant_mode = 0"), "{e}");
    let mut q = p.clone();
    q["key_antiquant_mode"] = json!(0);
    q["value_antiquant_mode"] = json!(0);
    let e = generate(&q, &[Regime::AttentionTies, Regime::RoundingTies], 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be combined with rounding_ties"), "{e}");
    // No key past the decode kernel's first tile.
    let e = generate(&q, &[Regime::ModerateEarlyMax], 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("both sides of key"), "{e}");
}
