//! `dynamic_quant`: the regimes hold on every seed (checked on the inputs and on what the
//! recipe and its faults produce, independently of the generator's own check), the result is
//! the same for any thread count, the recipes stay within one step of the exact oracle, a
//! hand-computed row comes out as computed by hand, and bad parameters or inputs are errors
//! naming what is wrong.

use crate::op_runs;
use conform_reference::faults;
use conform_reference::formats::{bf16, f16};
use conform_reference::ops::{
    self, ElemType, GenContext, OpError, Regime, Tensor, TensorMap, ValueDist,
};
use conform_reference::parallel::Threads;
use conform_reference::splitmix::SplitMix64;
use serde_json::{json, Value};

const SEEDS: u64 = 30;
const BOTH: [Regime; 2] = [Regime::RoundingTies, Regime::QuantEdgeRows];

fn generate(
    params: &Value,
    regimes: &[Regime],
    seed: u64,
    recipe: &str,
) -> Result<TensorMap, OpError> {
    op_runs::generate(
        "dynamic_quant",
        params,
        regimes,
        seed,
        0xD0,
        ValueDist::default(),
        recipe,
    )
}

fn run(params: &Value, recipe: &str, inputs: &TensorMap, threads: usize) -> TensorMap {
    op_runs::run("dynamic_quant", params, recipe, inputs, threads)
}

fn with_fault(name: &str, params: &Value, recipe: &str, inputs: &TensorMap) -> TensorMap {
    op_runs::with_fault("dynamic_quant", name, params, recipe, inputs)
}

fn differing(a: &Tensor, b: &Tensor) -> usize {
    op_runs::differing(a, b)
}

fn x_values(inputs: &TensorMap) -> (ElemType, Vec<u16>) {
    let x = &inputs["x"];
    (x.dtype, x.bits16().unwrap())
}

fn decode(dtype: ElemType, b: u16) -> f64 {
    match dtype {
        ElemType::F16 => f16::f16_to_f64(b),
        _ => bf16::bf16_to_f64(b),
    }
}

fn cases() -> Vec<(Value, &'static str)> {
    vec![
        (json!({"tokens": 24, "hidden": 64}), "ascend_a2"),
        (
            json!({"tokens": 24, "hidden": 64, "dtype": "f16"}),
            "ascend_a2",
        ),
        (
            json!({"tokens": 21, "hidden": 40, "smooth": true}),
            "ascend_a2",
        ),
        (
            json!({"tokens": 30, "hidden": 33, "dtype": "f16", "smooth": true, "groups": 3}),
            "ascend_a2",
        ),
        (json!({"tokens": 24, "hidden": 64}), "ops_nn_golden"),
        (
            json!({"tokens": 24, "hidden": 48, "dtype": "f16", "smooth": true}),
            "ops_nn_golden",
        ),
    ]
}

#[test]
fn regimes_hold_on_every_seed() {
    for (params, recipe) in cases() {
        let h = params["hidden"].as_u64().unwrap() as usize;
        let t = params["tokens"].as_u64().unwrap() as usize;
        for seed in 0..SEEDS {
            let ins = generate(&params, &BOTH, seed, recipe).unwrap();
            let out = run(&params, recipe, &ins, 1);
            let ctx = format!("{params} {recipe} seed {seed}");
            // Ties: the tie rule changes at least 16 elements.
            let away = with_fault("dq-rounding-ties-away", &params, recipe, &ins);
            assert!(differing(&out["y"], &away["y"]) >= 16, "{ctx}: ties");
            // Scale forms: at least 8 scales differ from max / 127.
            let lit = with_fault("dq-scale-as-max-over-127", &params, recipe, &ins);
            assert!(
                differing(&out["scale"], &lit["scale"]) >= 8,
                "{ctx}: witnesses"
            );
            // Edge rows, read from the inputs.
            let (dtype, x) = x_values(&ins);
            let rows: Vec<Vec<f64>> = (0..t)
                .map(|r| {
                    x[r * h..(r + 1) * h]
                        .iter()
                        .map(|&b| decode(dtype, b))
                        .collect()
                })
                .collect();
            let zero = rows.iter().filter(|r| r.iter().all(|&v| v == 0.0)).count();
            assert!(zero >= 8, "{ctx}: {zero} zero rows");
            let scale = out["scale"].to_f64_vec();
            for (i, r) in rows.iter().enumerate() {
                if r.iter().all(|&v| v == 0.0) {
                    assert_eq!(scale[i].to_bits(), 0, "{ctx}: zero row {i} scale");
                }
            }
            assert!(scale.iter().all(|s| !s.is_nan()), "{ctx}: NaN scale");
            let big = match dtype {
                ElemType::F16 => 65504.0,
                _ => bf16::bf16_to_f64(0x7F7F),
            };
            assert!(
                rows.iter().any(|r| r.iter().any(|v| v.abs() == big)),
                "{ctx}: largest finite"
            );
            if params.get("smooth").is_none() {
                // Without smooth scales the row max is read off x directly.
                assert!(
                    rows.iter().any(|r| {
                        let lo = r.iter().cloned().fold(0.0, f64::min);
                        let hi = r.iter().cloned().fold(0.0, f64::max);
                        -lo > hi
                    }),
                    "{ctx}: negative max"
                );
            }
            if dtype == ElemType::F16 {
                let tiny = rows.iter().any(|r| {
                    r.iter().any(|&v| v != 0.0) && r.iter().all(|v| v.abs() < 6.103515625e-5)
                });
                assert!(tiny, "{ctx}: subnormal row");
            }
        }
    }
}

#[test]
fn the_seed_moves_the_regimes() {
    let p = json!({"tokens": 24, "hidden": 64});
    let a = generate(&p, &BOTH, 1, "ascend_a2").unwrap();
    let b = generate(&p, &BOTH, 2, "ascend_a2").unwrap();
    assert_ne!(a["x"], b["x"]);
    // Without regimes, the plain inputs.
    let plain = generate(&p, &[], 1, "ascend_a2").unwrap();
    let mut g = SplitMix64::new(1u64.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD0);
    let mut bits = move || g.next_u64();
    let mut ctx = GenContext::new(&mut bits, ValueDist::default());
    let direct = ops::find("dynamic_quant")
        .unwrap()
        .generate(&p, &mut ctx)
        .unwrap();
    assert_eq!(plain, direct);
}

#[test]
fn any_thread_count_gives_the_same_bits() {
    for (params, recipe) in cases() {
        let ins = generate(&params, &BOTH, 7, recipe).unwrap();
        let one = run(&params, recipe, &ins, 1);
        for t in [2, 7] {
            assert_eq!(
                run(&params, recipe, &ins, t),
                one,
                "{params} {recipe} threads {t}"
            );
            assert_eq!(
                run(&params, "oracle", &ins, t),
                run(&params, "oracle", &ins, 1)
            );
        }
    }
    // The per-tensor fault reduces across tasks: its bits too.
    let p = json!({"tokens": 200, "hidden": 64});
    let ins = generate(&p, &[], 3, "ascend_a2").unwrap();
    let f = faults::find("dq-scale-per-tensor").unwrap();
    let fam = ops::find("dynamic_quant").unwrap();
    let r1 = faults::run(f, fam, &p, "ascend_a2", &ins, Threads(1)).unwrap();
    let r7 = faults::run(f, fam, &p, "ascend_a2", &ins, Threads(7)).unwrap();
    assert_eq!(r1, r7);
}

#[test]
fn recipes_stay_within_one_step_of_the_exact_oracle() {
    for (params, recipe) in cases() {
        for seed in 0..5 {
            let ins = generate(&params, &BOTH, seed, recipe).unwrap();
            let out = run(&params, recipe, &ins, 1);
            let ora = run(&params, "oracle", &ins, 1);
            let y = out["y"].to_f64_vec();
            let oy = ora["y"].to_f64_vec();
            assert!(y.iter().zip(&oy).all(|(a, b)| (a - b).abs() <= 1.0));
            for (s, o) in out["scale"]
                .to_f64_vec()
                .iter()
                .zip(ora["scale"].to_f64_vec())
            {
                assert!((s - o).abs() <= o * 2f64.powi(-22), "{s} vs {o}");
            }
        }
    }
}

#[test]
fn a_hand_computed_row() {
    // bf16 row: max 127/128 -> quotient 128 exactly, scale 2^-7; 2.5/128 -> 2.5 -> 2 (even),
    // -3.5/128 -> -4, 1/128 -> 1, -127/128 -> -127.
    let vals = [
        127.0 / 128.0,
        2.5 / 128.0,
        -3.5 / 128.0,
        1.0 / 128.0,
        -127.0 / 128.0,
        0.0,
    ];
    let x = Tensor::round_values(
        ElemType::Bf16,
        vec![1, 6],
        &vals,
        conform_reference::formats::Rounding::RNE,
    );
    let ins = TensorMap::from([("x".to_string(), x)]);
    let p = json!({"tokens": 1, "hidden": 6});
    for recipe in ["ascend_a2", "ops_nn_golden", "oracle"] {
        let out = run(&p, recipe, &ins, 1);
        assert_eq!(
            out["y"].to_f64_vec(),
            vec![127.0, 2.0, -4.0, 1.0, -127.0, 0.0],
            "{recipe}"
        );
        assert_eq!(out["scale"].to_f64_vec(), vec![1.0 / 128.0], "{recipe}");
    }
    let away = with_fault("dq-rounding-ties-away", &p, "ascend_a2", &ins);
    assert_eq!(
        away["y"].to_f64_vec(),
        vec![127.0, 3.0, -4.0, 1.0, -127.0, 0.0]
    );
}

#[test]
fn bad_parameters_and_inputs_are_named_errors() {
    let fam = ops::find("dynamic_quant").unwrap();
    let err = |p: Value| fam.describe(&p).unwrap_err().to_string();
    assert!(err(json!({"tokens": 4, "hidden": 8, "groups": 2})).contains("groups"));
    assert!(err(json!({"tokens": 4, "hidden": 8, "dtype": "f32"})).contains("dtype"));
    assert!(err(json!({"tokens": 0, "hidden": 8})).contains("tokens"));
    assert!(err(json!({"tokens": 4, "hidden": 8, "smooth": true, "groups": 5})).contains("groups"));
    assert!(err(json!({"tokens": 4, "hidden": 8, "extra": 1})).contains("extra"));
    // A shape too small for the declared regimes.
    let e = generate(&json!({"tokens": 12, "hidden": 64}), &BOTH, 0, "ascend_a2").unwrap_err();
    assert!(matches!(e, OpError::Regime { .. }), "{e}");
    let e = generate(
        &json!({"tokens": 30, "hidden": 8}),
        &[Regime::RoundingTies],
        0,
        "ascend_a2",
    )
    .unwrap_err();
    assert!(e.to_string().contains("hidden"), "{e}");
    // A regime of another family.
    let e = generate(
        &json!({"tokens": 30, "hidden": 64}),
        &[Regime::LargeLogits],
        0,
        "ascend_a2",
    )
    .unwrap_err();
    assert!(e.to_string().contains("large_logits"), "{e}");
    // NaN/Inf inputs are not asked for.
    let mut g = SplitMix64::new(1);
    let mut bits = move || g.next_u64();
    let mut ctx = GenContext::new(
        &mut bits,
        ValueDist::Special {
            fraction: 0.1,
            non_finite: true,
        },
    );
    let e = fam
        .generate(&json!({"tokens": 2, "hidden": 8}), &mut ctx)
        .unwrap_err();
    assert!(e.to_string().contains("non_finite"), "{e}");
    // group_index that does not end at the row count, or decreases.
    let p = json!({"tokens": 4, "hidden": 8, "smooth": true, "groups": 2});
    let mut ins = generate(&p, &[], 0, "ascend_a2").unwrap();
    ins.insert("group_index".into(), Tensor::from_i32(vec![2], &[3, 2]));
    let e = fam.run(&p, "ascend_a2", &ins, Threads(1)).unwrap_err();
    assert!(e.to_string().contains("group_index"), "{e}");
    ins.insert("group_index".into(), Tensor::from_i32(vec![2], &[1, 3]));
    let e = fam.run(&p, "ascend_a2", &ins, Threads(1)).unwrap_err();
    assert!(e.to_string().contains("number of rows"), "{e}");
    assert!(fam
        .run(&p, "nope", &ins, Threads(1))
        .unwrap_err()
        .to_string()
        .contains("ascend_a2"));
}

/// The contradiction issue 40 fixed: `ascend_a2` modelled every shape with the plain kernel's
/// stored scale, `1 / fl32(127 / max)`, while the A2 tiling sends the suites' 7168- and
/// 5120-wide rows to the multi-row (key 10) and single-row (key 100) kernels, which store
/// `fl32(max x fl32(1/127))`. On the scale-form witness rows the two differ; the recipe must
/// give each shape its kernel's form, and the old model (one form for every shape) fails here.
#[test]
fn each_shape_stores_the_scale_of_the_kernel_its_tiling_picks() {
    let inv = 1.0f32 / 127.0;
    for (params, reciprocal) in [
        (json!({"tokens": 24, "hidden": 7168}), false),
        (json!({"tokens": 24, "hidden": 5120, "smooth": true}), false),
        (json!({"tokens": 24, "hidden": 16384}), true),
        (
            json!({"tokens": 32, "hidden": 2048, "smooth": true, "groups": 4}),
            true,
        ),
    ] {
        let t = params["tokens"].as_u64().unwrap() as usize;
        let ins = generate(&params, &[Regime::QuantEdgeRows], 3, "ascend_a2").unwrap();
        let out = run(&params, "ascend_a2", &ins, 1);
        // The row max, recomputed from the inputs as the kernel forms it (x times the smooth
        // row in f32).
        let h = params["hidden"].as_u64().unwrap() as usize;
        let (dtype, x) = x_values(&ins);
        let smooth = ins.get("smooth_scales").map(|s| s.bits16().unwrap());
        let groups: Vec<usize> = match ins.get("group_index") {
            Some(g) => {
                let ends = g.to_i64_vec().unwrap();
                (0..t)
                    .map(|r| ends.iter().position(|&e| e > r as i64).unwrap())
                    .collect()
            }
            None => vec![0; t],
        };
        let scale = out["scale"].to_f64_vec();
        let mut told_apart = 0;
        for r in 0..t {
            let amax = (0..h)
                .map(|j| {
                    let v = decode(dtype, x[r * h + j]) as f32;
                    let v = match &smooth {
                        Some(s) => v * decode(dtype, s[groups[r] * h + j]) as f32,
                        None => v,
                    };
                    v.abs()
                })
                .fold(0.0f32, f32::max);
            if amax == 0.0 {
                continue;
            }
            let kernel_form = if reciprocal {
                1.0 / (127.0 / amax)
            } else {
                amax * inv
            };
            let other_form = if reciprocal {
                amax * inv
            } else {
                1.0 / (127.0 / amax)
            };
            assert_eq!(scale[r] as f32, kernel_form, "{params} row {r}");
            told_apart += usize::from(kernel_form != other_form);
        }
        assert!(
            told_apart >= 8,
            "{params}: {told_apart} rows tell the forms apart"
        );
    }
}
