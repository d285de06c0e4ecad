//! `quant_matmul`: the regimes hold on every seed (checked on the inputs with an independent
//! integer and f32 sum, and on what the recipe and its faults produce), the result is the same
//! for any thread count, the kernel recipe stays within one output step of the exact oracle, a
//! hand-computed case comes out as computed by hand, and bad parameters or inputs are errors
//! naming what is wrong.

use crate::op_runs;
use conform_reference::formats::{bf16, f16, Rounding, RoundingMode};
use conform_reference::ops::{self, ElemType, OpError, Regime, Tensor, TensorMap, ValueDist};
use conform_reference::parallel::Threads;
use serde_json::{json, Value};

const SEEDS: u64 = 12;
const BOTH: [Regime; 2] = [Regime::RoundingTies, Regime::IntMatmulEdges];

fn generate(params: &Value, regimes: &[Regime], seed: u64) -> Result<TensorMap, OpError> {
    op_runs::generate(
        "quant_matmul",
        params,
        regimes,
        seed,
        0x5A,
        ValueDist::default(),
        "ascend_a2",
    )
}

fn run(params: &Value, recipe: &str, inputs: &TensorMap, threads: usize) -> TensorMap {
    op_runs::run("quant_matmul", params, recipe, inputs, threads)
}

fn with_fault(name: &str, params: &Value, inputs: &TensorMap) -> TensorMap {
    op_runs::with_fault("quant_matmul", name, params, "ascend_a2", inputs)
}

fn differing(a: &Tensor, b: &Tensor) -> usize {
    op_runs::differing(a, b)
}

fn i8s(t: &Tensor) -> Vec<i8> {
    t.data.iter().map(|&b| b as i8).collect()
}

fn cases() -> Vec<Value> {
    vec![
        json!({"m": 24, "k": 3200, "n": 48, "out": "bf16", "scale": "f32", "pertoken": true, "bias": "i32"}),
        json!({"m": 24, "k": 3100, "n": 40, "out": "bf16", "scale": "bf16", "pertoken": true, "bias": "bf16"}),
        json!({"m": 8, "k": 3300, "n": 40, "out": "f16", "scale": "packed", "bias": "i32"}),
        json!({"m": 20, "k": 3081, "n": 36, "out": "f16", "scale": "f32", "pertoken": true, "bias": "f32"}),
        json!({"m": 6, "k": 3500, "n": 30, "out": "bf16"}),
    ]
}

#[test]
fn regimes_hold_on_every_seed() {
    for params in cases() {
        let (m, k, n) = (
            params["m"].as_u64().unwrap() as usize,
            params["k"].as_u64().unwrap() as usize,
            params["n"].as_u64().unwrap() as usize,
        );
        let pertoken = params.get("pertoken").is_some();
        for seed in 0..SEEDS {
            let ins = generate(&params, &BOTH, seed).unwrap();
            let ctx = format!("{params} seed {seed}");
            let out = run(&params, "ascend_a2", &ins, 1);
            // Accumulators, read from the inputs: the exact integer sum and a sequential f32
            // sum differ on at least 16 elements.
            let (x1, x2) = (i8s(&ins["x1"]), i8s(&ins["x2"]));
            let mut lost = 0;
            for i in 0..m {
                for j in 0..n {
                    let (mut exact, mut float) = (0i64, 0f32);
                    for p in 0..k {
                        let v = x1[i * k + p] as i64 * x2[p * n + j] as i64;
                        exact += v;
                        float += v as f32;
                    }
                    lost += usize::from(exact as f32 != float);
                }
            }
            assert!(lost >= 16, "{ctx}: {lost} accumulators lose terms in f32");
            assert!(x1.contains(&-128) && x2.contains(&-128), "{ctx}: -128");
            // Ties: the tie rule of the output cast changes at least 16 elements.
            let away = with_fault("qmm-output-ties-away", &params, &ins);
            assert!(differing(&out["y"], &away["y"]) >= 16, "{ctx}: ties");
            let f32acc = with_fault("qmm-accumulate-f32", &params, &ins);
            assert!(differing(&out["y"], &f32acc["y"]) >= 16, "{ctx}: f32 sum");
            let clamp = with_fault("qmm-int8-min-clamped", &params, &ins);
            assert!(differing(&out["y"], &clamp["y"]) >= 16, "{ctx}: -128");
            if pertoken {
                let merged = with_fault("qmm-scale-order-swapped", &params, &ins);
                assert!(differing(&out["y"], &merged["y"]) >= 10, "{ctx}: witnesses");
            }
            // Per-channel scales: at least 8 differ from column 0's.
            let s = ins["scale"].to_f64_vec();
            assert!(
                s.iter().filter(|&&v| v != s[0]).count() >= 8,
                "{ctx}: scales"
            );
        }
    }
}

#[test]
fn the_result_is_the_same_for_any_thread_count() {
    for params in cases() {
        let ins = generate(&params, &BOTH, 3).unwrap();
        for recipe in ["ascend_a2", "oracle"] {
            let one = run(&params, recipe, &ins, 1);
            for t in [2, 7] {
                assert_eq!(one, run(&params, recipe, &ins, t), "{params} {recipe} {t}");
            }
        }
    }
}

#[test]
fn the_kernel_is_within_one_output_step_of_the_oracle() {
    for params in cases() {
        for seed in 0..3 {
            let ins = generate(&params, &[], seed).unwrap();
            let out = run(&params, "ascend_a2", &ins, 2);
            let oracle = run(&params, "oracle", &ins, 2)["y"].to_f64_vec();
            let y = out["y"].bits16().unwrap();
            let f16out = out["y"].dtype == ElemType::F16;
            for (e, (&b, &o)) in y.iter().zip(&oracle).enumerate() {
                // Once-rounded oracle, and the output's neighbours.
                let r = if f16out {
                    f16::f64_to_f16(o, Rounding::RNE)
                } else {
                    bf16::f64_to_bf16(o, Rounding::RNE)
                };
                let (lo, hi) = (r.min(b), r.max(b));
                let step = if (lo ^ hi) & 0x8000 == 0 {
                    hi - lo
                } else {
                    (lo & 0x7FFF) + (hi & 0x7FFF)
                };
                assert!(
                    step <= 1,
                    "{params} seed {seed} element {e}: {b:#x} vs {r:#x}"
                );
            }
        }
    }
}

#[test]
fn a_case_computed_by_hand() {
    let params = json!({"m": 1, "k": 2, "n": 2, "out": "bf16", "scale": "f32", "pertoken": true, "bias": "i32"});
    let ins = TensorMap::from([
        ("x1".to_string(), Tensor::from_i8(vec![1, 2], &[3, -128])),
        (
            "x2".to_string(),
            Tensor::from_i8(vec![2, 2], &[1, 2, -128, 127]),
        ),
        ("scale".to_string(), Tensor::from_f32(vec![2], &[0.5, 0.25])),
        (
            "pertoken_scale".to_string(),
            Tensor::from_f32(vec![1], &[2.0]),
        ),
        ("bias".to_string(), Tensor::from_i32(vec![2], &[1, -2])),
    ]);
    // acc = [3 + 16384, 6 - 16256] = [16387, -16250]; + bias = [16388, -16252];
    // * scale * pertoken = [16388, -8126]; bf16 (8 bits, ties to even) = [16384, -8128].
    let out = run(&params, "ascend_a2", &ins, 1);
    let want: Vec<u16> = [16384.0f32, -8128.0]
        .iter()
        .map(|&v| bf16::f32_to_bf16(v, Rounding::RNE))
        .collect();
    assert_eq!(out["y"].bits16().unwrap(), want);
    assert_eq!(
        run(&params, "oracle", &ins, 1)["y"].to_f64_vec(),
        vec![16388.0, -8126.0]
    );
    // The int32 bias after the dequantisation is not scaled: 16387 + 1 and -8125 - 2.
    let after = with_fault("qmm-int-bias-after-dequant", &params, &ins);
    let want: Vec<u16> = [16388.0f32, -8127.0]
        .iter()
        .map(|&v| bf16::f32_to_bf16(v, Rounding::ieee(RoundingMode::NearestTiesToEven)))
        .collect();
    assert_eq!(after["y"].bits16().unwrap(), want);
}

#[test]
fn bad_params_and_inputs_are_errors_naming_them() {
    let fam = ops::find("quant_matmul").unwrap();
    let param_err = |p: Value| match fam.describe(&p).unwrap_err() {
        OpError::InvalidParam { param, message, .. } => format!("{param}: {message}"),
        e => panic!("{e}"),
    };
    let e = param_err(json!({"m": 1, "k": 8, "n": 8, "out": "f16"}));
    assert!(
        e.starts_with("scale:") && e.contains("npu_trans_quant_param"),
        "{e}"
    );
    let e = param_err(json!({"m": 1, "k": 70000, "n": 8}));
    assert!(e.starts_with("k:") && e.contains("overflow"), "{e}");
    let e = param_err(
        json!({"m": 1, "k": 8, "n": 8, "out": "f16", "scale": "packed", "pertoken": true}),
    );
    assert!(e.starts_with("pertoken:"), "{e}");
    let e = param_err(json!({"m": 1, "k": 8, "n": 8, "scale": "packed"}));
    assert!(e.starts_with("scale:"), "{e}");
    let e = param_err(json!({"m": 1, "k": 8, "n": 8, "out": "int32"}));
    assert!(e.starts_with("out:"), "{e}");
    assert!(fam
        .describe(&json!({"m": 1, "k": 8, "n": 8, "bogus": 1}))
        .is_err());
    // A NaN scale is refused, naming the input and the element.
    let params = json!({"m": 1, "k": 2, "n": 2});
    let ins = TensorMap::from([
        ("x1".to_string(), Tensor::from_i8(vec![1, 2], &[1, 1])),
        ("x2".to_string(), Tensor::from_i8(vec![2, 2], &[1, 1, 1, 1])),
        (
            "scale".to_string(),
            Tensor::from_f32(vec![2], &[1.0, f32::NAN]),
        ),
    ]);
    match fam.run(&params, "ascend_a2", &ins, Threads(1)).unwrap_err() {
        OpError::InvalidInput { input, message, .. } => {
            assert_eq!(input, "scale");
            assert!(message.contains("element 1"), "{message}");
        }
        e => panic!("{e}"),
    }
    // A shape that cannot hold the regimes names the regime.
    match generate(&json!({"m": 3, "k": 4096, "n": 64}), &BOTH, 0) {
        Err(e) => assert!(matches!(e, OpError::Regime { .. }), "{e}"),
        Ok(_) => panic!("3 rows cannot hold both regimes (4 rows)"),
    }
}

fn int8_cases() -> Vec<Value> {
    vec![
        json!({"m": 8, "k": 3200, "n": 48, "out": "int8", "scale": "packed", "bias": "i32", "offset": true}),
        json!({"m": 6, "k": 3100, "n": 40, "out": "int8", "scale": "packed"}),
    ]
}

#[test]
fn int8_regimes_hold_on_every_seed() {
    for params in int8_cases() {
        let offset = params.get("offset").is_some();
        for seed in 0..SEEDS {
            let ins = generate(&params, &BOTH, seed).unwrap();
            let ctx = format!("{params} seed {seed}");
            let out = run(&params, "ascend_a2", &ins, 1);
            let y = i8s(&out["y"]);
            // Ties of the rounding to an integer: 2 rows x 8 columns.
            let away = with_fault("qmm-requant-ties-away", &params, &ins);
            assert!(differing(&out["y"], &away["y"]) >= 16, "{ctx}: ties");
            // Saturation at both ends, which a wrap gets wrong.
            let wrap = i8s(&with_fault("qmm-int8-wraps", &params, &ins)["y"]);
            for end in [127i8, -128] {
                let n = y
                    .iter()
                    .zip(&wrap)
                    .filter(|&(&a, &b)| a == end && a != b)
                    .count();
                assert!(n >= 8, "{ctx}: {n} saturate at {end}");
            }
            if offset {
                for f in ["qmm-offset-negated", "qmm-offset-before-scale"] {
                    let o = with_fault(f, &params, &ins);
                    assert!(differing(&out["y"], &o["y"]) >= 16, "{ctx}: {f}");
                }
            }
        }
    }
}

#[test]
fn int8_is_the_same_for_any_thread_count_and_within_one_of_the_oracle() {
    for params in int8_cases() {
        for seed in 0..3 {
            let ins = generate(&params, &BOTH, seed).unwrap();
            let one = run(&params, "ascend_a2", &ins, 1);
            assert_eq!(one, run(&params, "ascend_a2", &ins, 5), "{params}");
            let oracle = run(&params, "oracle", &ins, 1);
            assert_eq!(oracle, run(&params, "oracle", &ins, 3), "{params}");
            let o = oracle["y"].to_f64_vec();
            for (e, (&v, &w)) in i8s(&one["y"]).iter().zip(&o).enumerate() {
                assert!((v as f64 - w).abs() <= 1.0, "{params} {e}: {v} vs {w}");
            }
        }
    }
}

#[test]
fn an_int8_case_computed_by_hand() {
    let params = json!({"m": 1, "k": 1, "n": 4, "out": "int8", "scale": "packed", "bias": "i32", "offset": true});
    let ins = TensorMap::from([
        ("x1".to_string(), Tensor::from_i8(vec![1, 1], &[100])),
        (
            "x2".to_string(),
            Tensor::from_i8(vec![1, 4], &[5, -5, 127, -128]),
        ),
        // Packed: 0.25 and 0.5 are kept; the offsets pack to 2 (2.5, ties to even), -3, -10, 10.
        (
            "scale".to_string(),
            Tensor::from_f32(vec![4], &[0.25, 0.25, 0.5, 0.5]),
        ),
        ("bias".to_string(), Tensor::from_i32(vec![4], &[2, 0, 0, 0])),
        (
            "offset".to_string(),
            Tensor::from_f32(vec![4], &[2.5, -3.2, -10.0, 10.0]),
        ),
    ]);
    // acc = [502, -500, 12700, -12800]; * scale = [125.5, -125, 6350, -6400];
    // rounded (ties to even) = [126, -125, 6350, -6400]; clamped to 9 bits = [126, -125, 255, -256];
    // + offset = [128, -128, 245, -246]; saturated = [127, -128, 127, -128].
    let out = run(&params, "ascend_a2", &ins, 1);
    assert_eq!(i8s(&out["y"]), vec![127, -128, 127, -128]);
    assert_eq!(
        run(&params, "oracle", &ins, 1)["y"].to_f64_vec(),
        vec![127.0, -128.0, 127.0, -128.0]
    );
    // Wrapped instead: 6350 + -10 = 6340 = 24 * 256 + 196 -> -60; -6400 + 10 = -6390 -> 10.
    let wrap = with_fault("qmm-int8-wraps", &params, &ins);
    assert_eq!(i8s(&wrap["y"]), vec![-128, -128, -60, 10]);
    // Ties away: 125.5 -> 126 as well (even is 126); the offset subtracted: 126 - 2 = 124.
    let neg = with_fault("qmm-offset-negated", &params, &ins);
    assert_eq!(i8s(&neg["y"]), vec![124, -122, 127, -128]);
    // The offset before the scale: (502 + 2) * 0.25 = 126.
    let before = with_fault("qmm-offset-before-scale", &params, &ins);
    assert_eq!(i8s(&before["y"])[0], 126);
}

#[test]
fn int8_params_follow_the_api_table() {
    let fam = ops::find("quant_matmul").unwrap();
    let param_err = |p: Value| match fam.describe(&p).unwrap_err() {
        OpError::InvalidParam { param, message, .. } => format!("{param}: {message}"),
        e => panic!("{e}"),
    };
    let e = param_err(json!({"m": 1, "k": 8, "n": 8, "out": "int8", "scale": "f32"}));
    assert!(e.starts_with("scale:") && e.contains("packed"), "{e}");
    let e = param_err(
        json!({"m": 1, "k": 8, "n": 8, "out": "int8", "scale": "packed", "pertoken": true}),
    );
    assert!(e.starts_with("pertoken:"), "{e}");
    let e =
        param_err(json!({"m": 1, "k": 8, "n": 8, "out": "int8", "scale": "packed", "bias": "f32"}));
    assert!(e.starts_with("bias:"), "{e}");
    let e = param_err(json!({"m": 1, "k": 8, "n": 8, "out": "bf16", "offset": true}));
    assert!(e.starts_with("offset:"), "{e}");
    // A NaN offset is refused, naming the input and the element.
    let params = json!({"m": 1, "k": 1, "n": 2, "out": "int8", "scale": "packed", "offset": true});
    let ins = TensorMap::from([
        ("x1".to_string(), Tensor::from_i8(vec![1, 1], &[1])),
        ("x2".to_string(), Tensor::from_i8(vec![1, 2], &[1, 1])),
        ("scale".to_string(), Tensor::from_f32(vec![2], &[1.0, 1.0])),
        (
            "offset".to_string(),
            Tensor::from_f32(vec![2], &[0.0, f32::NAN]),
        ),
    ]);
    match fam.run(&params, "ascend_a2", &ins, Threads(1)).unwrap_err() {
        OpError::InvalidInput { input, message, .. } => {
            assert_eq!(input, "offset");
            assert!(message.contains("element 1"), "{message}");
        }
        e => panic!("{e}"),
    }
}

/// The contradiction issue 40 fixed: `ascend_a2` dequantised first for every M, while the A2
/// tiling's `ProcessMSmall` sends per-token cases with M within the base M to the opt kernel
/// (`quant_batch_matmul_v3_pertoken_opt.h`), whose `MulPertokenAndScale` merges the two
/// scales first: y = bf16(fl32(fl32(acc) x fl32(pertoken x scale))). Recomputed here from the
/// inputs for the suites' small-M per-token form; the old order differs on the witness
/// elements `int_matmul_edges` plants, so the old model fails this test. The large-M case keeps
/// the dequant-first order.
#[test]
fn small_m_per_token_cases_merge_the_scales_first_as_the_opt_kernel_does() {
    for (m, merged) in [(24usize, true), (160, false)] {
        let (k, n) = (3200usize, 32usize);
        let params =
            json!({"m": m, "k": k, "n": n, "out": "bf16", "scale": "f32", "pertoken": true});
        let ins = generate(&params, &[Regime::IntMatmulEdges], 5).unwrap();
        let out = run(&params, "ascend_a2", &ins, 1);
        let (x1, x2) = (i8s(&ins["x1"]), i8s(&ins["x2"]));
        let s: Vec<f32> = ins["scale"]
            .to_f64_vec()
            .iter()
            .map(|&v| v as f32)
            .collect();
        let t: Vec<f32> = ins["pertoken_scale"]
            .to_f64_vec()
            .iter()
            .map(|&v| v as f32)
            .collect();
        let y = out["y"].bits16().unwrap();
        let mut orders_differ = 0;
        for i in 0..m {
            for j in 0..n {
                let acc: i64 = (0..k)
                    .map(|p| x1[i * k + p] as i64 * x2[p * n + j] as i64)
                    .sum();
                let a = acc as f32;
                let opt = a * (t[i] * s[j]);
                let first = (a * s[j]) * t[i];
                let want = if merged { opt } else { first };
                let other = if merged { first } else { opt };
                let b = bf16::f32_to_bf16(want, Rounding::RNE);
                assert_eq!(y[i * n + j], b, "m {m} element ({i}, {j})");
                orders_differ += usize::from(b != bf16::f32_to_bf16(other, Rounding::RNE));
            }
        }
        assert!(
            orders_differ >= 10,
            "m {m}: {orders_differ} elements tell the orders apart"
        );
    }
}
