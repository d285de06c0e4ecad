//! The range regimes (`overflow_to_inf`, `subnormal_outputs`, `format_extremes`) of the FP4
//! and MC2 families hold on every seed: checked here on the bits the recipes produce and on
//! the raw input codes, independently of the generator's own check; the seed moves where they
//! are; a shape that cannot hold one is an error naming it.

use conform_reference::dequant::packing::{self, PackingLayout};
use conform_reference::ops::{self, ElemType, GenContext, OpError, Regime, TensorMap, ValueDist};
use conform_reference::parallel::Threads;
use conform_reference::splitmix::SplitMix64;
use serde_json::{json, Value};
use std::collections::BTreeSet;

const SEEDS: u64 = 60;

fn ctx_gen(
    op: &str,
    params: &Value,
    regimes: &[Regime],
    seed: u64,
    dist: ValueDist,
) -> Result<TensorMap, OpError> {
    let mut g = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xFA57);
    let mut bits = move || g.next_u64();
    let mut ctx = GenContext::new(&mut bits, dist);
    ops::find(op)?.generate_with_regimes(params, regimes, &mut ctx)
}

fn generate(op: &str, params: &Value, regimes: &[Regime], seed: u64) -> TensorMap {
    let dist = ValueDist::Normal {
        mean: 0.0,
        std: 1.0,
    };
    ctx_gen(op, params, regimes, seed, dist)
        .unwrap_or_else(|e| panic!("{op} {params} seed {seed}: {e}"))
}

/// (exponent mask, sign bit) of a 16-bit float output.
fn exp_mask(dtype: ElemType) -> u16 {
    match dtype {
        ElemType::F16 => 0x7C00,
        ElemType::Bf16 => 0x7F80,
        other => panic!("not a 16-bit float: {other:?}"),
    }
}

/// Positions of +Inf, -Inf, positive and negative nonzero subnormals in a recipe's output.
#[derive(Default, Debug)]
struct Found {
    pos_inf: Vec<usize>,
    neg_inf: Vec<usize>,
    pos_sub: Vec<usize>,
    neg_sub: Vec<usize>,
}

fn classify(out: &ops::Tensor) -> Found {
    let exp = exp_mask(out.dtype);
    let mut f = Found::default();
    for (i, b) in out.bits16().unwrap().into_iter().enumerate() {
        let neg = b & 0x8000 != 0;
        let mag = b & 0x7FFF;
        if mag == exp {
            if neg { &mut f.neg_inf } else { &mut f.pos_inf }.push(i);
        } else if mag != 0 && b & exp == 0 {
            if neg { &mut f.neg_sub } else { &mut f.pos_sub }.push(i);
        }
    }
    f
}

struct Case {
    op: &'static str,
    recipe: &'static str,
    params: Value,
    regimes: Vec<Regime>,
}

fn cases() -> Vec<Case> {
    use Regime::*;
    let all = vec![OverflowToInf, SubnormalOutputs, FormatExtremes];
    vec![
        Case {
            op: "mxfp4_dequant",
            recipe: "mx_ocp",
            params: json!({"n": 4, "k": 256}),
            regimes: all.clone(),
        },
        Case {
            op: "mxfp4_dequant",
            recipe: "mx_ocp",
            params: json!({"n": 4, "k": 256, "dtype": "f16", "packing": "high_first"}),
            regimes: all,
        },
        Case {
            op: "mxfp4_dequant",
            recipe: "mx_ocp",
            params: json!({"n": 2, "k": 64, "element": "e1m2", "dtype": "f16"}),
            regimes: vec![OverflowToInf, SubnormalOutputs],
        },
        Case {
            op: "nvfp4_dequant",
            recipe: "vllm_nvfp4",
            params: json!({"n": 4, "k": 256}),
            regimes: vec![OverflowToInf, FormatExtremes],
        },
        Case {
            op: "nvfp4_dequant",
            recipe: "vllm_nvfp4",
            params: json!({"n": 4, "k": 256, "dtype": "f16"}),
            regimes: vec![SubnormalOutputs, FormatExtremes],
        },
        Case {
            op: "nvfp4_dequant",
            recipe: "ascend_qingcheng_fp4_dequant",
            params: json!({"n": 4, "k": 768, "packing": "split_halves"}),
            regimes: vec![SubnormalOutputs, FormatExtremes],
        },
        Case {
            op: "nvfp4_dequant",
            recipe: "vllm_nvfp4",
            params: json!({"n": 4, "k": 256, "dtype": "f16"}),
            regimes: vec![OverflowToInf],
        },
        Case {
            op: "w4a16_matmul",
            recipe: "ascend_qingcheng_w4a16",
            params: json!({"format": "nvfp4", "m": 2, "n": 8, "k": 768, "dtype": "f16"}),
            regimes: vec![OverflowToInf, SubnormalOutputs],
        },
        Case {
            op: "w4a16_matmul",
            recipe: "mx_ocp",
            params: json!({"format": "mxfp4", "m": 1, "n": 8, "k": 256}),
            regimes: vec![SubnormalOutputs],
        },
        Case {
            op: "w4a16_matmul",
            recipe: "ascend_qingcheng_w4a16",
            params: json!({"format": "nvfp4", "m": 2, "n": 4, "k": 16}),
            regimes: vec![SubnormalOutputs],
        },
        Case {
            op: "mc2_matmul_allreduce",
            recipe: "kernel_ring",
            params: json!({"dtype": "f16", "ranks": 4, "m": 8, "k": 32, "n": 32}),
            regimes: vec![OverflowToInf, SubnormalOutputs],
        },
        Case {
            op: "mc2_matmul_allreduce",
            recipe: "kernel_binary_tree",
            params: json!({"dtype": "bf16", "ranks": 2, "m": 8, "k": 32, "n": 32, "bias": true, "x3": true}),
            regimes: vec![OverflowToInf, SubnormalOutputs],
        },
        Case {
            op: "mc2_matmul_allreduce",
            recipe: "high_precision_golden",
            params: json!({"dtype": "bf16", "ranks": 1, "m": 2, "k": 2, "n": 2}),
            regimes: vec![OverflowToInf, SubnormalOutputs],
        },
    ]
}

fn layout(params: &Value) -> PackingLayout {
    match params.get("packing").and_then(Value::as_str) {
        Some("high_first") => PackingLayout::HIGH_FIRST,
        Some("split_halves") => PackingLayout::split_halves(
            conform_reference::dequant::recipe::QINGCHENG_SPLIT_HALVES_BYTES,
        ),
        _ => PackingLayout::LOW_FIRST,
    }
}

/// `format_extremes`, read from the raw inputs: the smallest and largest finite scale codes
/// each sit in a group that holds both largest-magnitude element codes.
fn extremes_hold(op: &str, params: &Value, inputs: &TensorMap) -> bool {
    let (scale_name, group, codes) = if op == "mxfp4_dequant" {
        ("scale", 32, [0u8, 254])
    } else {
        ("block_scale", 16, [1u8, 0x7E])
    };
    let n = params["n"].as_u64().unwrap() as usize;
    let k = params["k"].as_u64().unwrap() as usize;
    let q = packing::unpack(&inputs["weight"].data, n * k, &layout(params)).unwrap();
    let scales = &inputs[scale_name].data;
    codes.iter().all(|&s| {
        scales.iter().enumerate().any(|(gi, &x)| {
            let g = &q[gi * group..(gi + 1) * group];
            x == s && g.contains(&7) && g.contains(&15)
        })
    })
}

#[test]
fn range_regimes_hold_on_every_seed_and_the_seed_moves_them() {
    for case in cases() {
        let family = ops::find(case.op).unwrap();
        let mut inf_positions = BTreeSet::new();
        let mut sub_positions = BTreeSet::new();
        let mut numel = 0;
        for seed in 0..SEEDS {
            let inputs = generate(case.op, &case.params, &case.regimes, seed);
            let out = family
                .run(&case.params, case.recipe, &inputs, Threads::ONE)
                .unwrap();
            let out = out.values().next().unwrap();
            numel = out.numel();
            let f = classify(out);
            let what = format!("{} {} seed {seed}", case.op, case.params);
            if case.regimes.contains(&Regime::OverflowToInf) {
                assert!(
                    !f.pos_inf.is_empty() && !f.neg_inf.is_empty(),
                    "{what}: {f:?}"
                );
                inf_positions.insert((f.pos_inf.clone(), f.neg_inf.clone()));
            }
            if case.regimes.contains(&Regime::SubnormalOutputs) {
                assert!(
                    !f.pos_sub.is_empty() && !f.neg_sub.is_empty(),
                    "{what}: {f:?}"
                );
                sub_positions.insert((f.pos_sub.clone(), f.neg_sub.clone()));
            }
            if case.regimes.contains(&Regime::FormatExtremes) {
                assert!(extremes_hold(case.op, &case.params, &inputs), "{what}");
            }
            // A matmul's banded row carries its regime on 8 columns where it has them, so a
            // cast fault is wrong on at least the adequacy margin floor of 8 elements.
            if let Some(n) = case.params.get("n").and_then(Value::as_u64)
                && case.op != "mxfp4_dequant"
                && case.op != "nvfp4_dequant"
            {
                let wide = (n as usize).min(ops::range_regimes::BANDED_COLUMNS);
                if case.regimes.contains(&Regime::OverflowToInf) {
                    assert!(f.pos_inf.len() + f.neg_inf.len() >= wide, "{what}: {f:?}");
                }
                if case.regimes.contains(&Regime::SubnormalOutputs) {
                    assert!(f.pos_sub.len() + f.neg_sub.len() >= wide, "{what}: {f:?}");
                }
            }
            // The exact outputs hold them too (what a kernel with its own rounding meets).
            let exact = family
                .run(&case.params, ops::ORACLE, &inputs, Threads::ONE)
                .unwrap();
            let exact = exact.values().next().unwrap().to_f64_vec();
            for r in ops::range_regimes::banded(&case.regimes) {
                assert!(
                    ops::range_regimes::holds(r, out.dtype, &exact),
                    "{what}: {r:?}"
                );
            }
        }
        // Many distinct placements over the seeds (as many as a 2 x 2 output has).
        let enough = numel.min(SEEDS as usize / 2);
        for positions in [&inf_positions, &sub_positions] {
            assert!(
                positions.is_empty() || positions.len() >= enough,
                "{} {}: the seed barely moves the regime's elements ({} distinct of {SEEDS})",
                case.op,
                case.params,
                positions.len()
            );
        }
    }
}

/// Whether a bf16 output value is NaN.
fn bf16_is_nan(b: u16) -> bool {
    b & 0x7F80 == 0x7F80 && b & 0x007F != 0
}

#[test]
fn w4a16_format_extremes_own_whole_output_columns() {
    // (params, recipe, extreme scale codes, NaN code, group): each extreme code's weight row
    // holds one nonzero code, met by a nonzero power of two in every row of x (so every output
    // of its column is that one product, never NaN); the NaN code's group holds nonzero codes
    // of one sign, met by x of one sign per row, and its column is NaN in every row.
    let cases = [
        (
            json!({"format": "mxfp4", "m": 8, "n": 5, "k": 64}),
            "mx_ocp",
            vec![0u8, 1, 254],
            0xFFu8,
            32,
        ),
        (
            json!({"format": "mxfp4", "m": 3, "n": 4, "k": 96, "element": "e1m2"}),
            "mx_ocp",
            vec![0, 1, 254],
            0xFF,
            32,
        ),
        (
            json!({"format": "nvfp4", "m": 8, "n": 3, "k": 48}),
            "ascend_qingcheng_w4a16",
            vec![1, 0x7E],
            0x7F,
            16,
        ),
    ];
    let family = ops::find("w4a16_matmul").unwrap();
    for (params, recipe, extremes, nan, group) in cases {
        let (m, n, k) = (
            params["m"].as_u64().unwrap() as usize,
            params["n"].as_u64().unwrap() as usize,
            params["k"].as_u64().unwrap() as usize,
        );
        let gpr = k / group;
        let mut placements = BTreeSet::new();
        for seed in 0..SEEDS {
            let what = format!("{params} seed {seed}");
            let inputs = generate("w4a16_matmul", &params, &[Regime::FormatExtremes], seed);
            let y = family.run(&params, recipe, &inputs, Threads::ONE).unwrap();
            let y = y.values().next().unwrap().bits16().unwrap();
            let x = inputs["x"].to_f64_vec();
            let codes = packing::unpack(&inputs["weight"].data, n * k, &layout(&params)).unwrap();
            let scales = &inputs["scale"].data;
            let mut columns = Vec::new();
            for &s in &extremes {
                let at: Vec<usize> = (0..scales.len()).filter(|&gi| scales[gi] == s).collect();
                assert_eq!(at.len(), 1, "{what}: scale {s:#04x} in groups {at:?}");
                let j = at[0] / gpr;
                let row = &codes[j * k..(j + 1) * k];
                let nonzero: Vec<usize> = (0..k).filter(|&c| row[c] & 7 != 0).collect();
                assert_eq!(nonzero.len(), 1, "{what}: row {j} of scale {s:#04x}");
                let col = nonzero[0];
                assert_eq!(col / group, at[0] % gpr, "{what}: scale {s:#04x}");
                for i in 0..m {
                    let v = x[i * k + col].abs();
                    assert!(
                        v > 0.0 && v.to_bits() & ((1u64 << 52) - 1) == 0,
                        "{what}: x[{i}, {col}]"
                    );
                    assert!(!bf16_is_nan(y[i * n + j]), "{what}: y[{i}, {j}]");
                    assert_ne!(y[i * n + j] & 0x7FFF, 0, "{what}: y[{i}, {j}]");
                }
                columns.push(j);
            }
            let at: Vec<usize> = (0..scales.len()).filter(|&gi| scales[gi] == nan).collect();
            assert_eq!(at.len(), 1, "{what}: NaN scale in groups {at:?}");
            let (j, g) = (at[0] / gpr, at[0] % gpr);
            let span = g * group..(g + 1) * group;
            let q = &codes[j * k + span.start..j * k + span.end];
            assert!(
                q.iter().all(|&c| c & 7 != 0 && c & 8 == q[0] & 8),
                "{what}: NaN group codes {q:?}"
            );
            for i in 0..m {
                let xs = &x[i * k + span.start..i * k + span.end];
                assert!(
                    xs.iter()
                        .all(|&v| v != 0.0 && v.is_finite() && (v > 0.0) == (xs[0] > 0.0)),
                    "{what}: x row {i} over the NaN group"
                );
                assert!(bf16_is_nan(y[i * n + j]), "{what}: y[{i}, {j}]");
            }
            columns.push(j);
            placements.insert(columns);
        }
        assert!(
            placements.len() > 1,
            "{params}: the seed never moves the columns"
        );
    }
}

#[test]
fn without_regimes_the_inputs_are_the_ordinary_draw() {
    for case in cases() {
        for seed in 0..3 {
            let plain = generate(case.op, &case.params, &[], seed);
            let dist = ValueDist::Normal {
                mean: 0.0,
                std: 1.0,
            };
            let mut g = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xFA57);
            let mut bits = move || g.next_u64();
            let mut ctx = GenContext::new(&mut bits, dist);
            let drawn = ops::find(case.op)
                .unwrap()
                .generate(&case.params, &mut ctx)
                .unwrap();
            assert_eq!(plain, drawn);
        }
    }
}

#[test]
fn the_special_draw_keeps_its_extremes_beside_the_regimes() {
    // A special draw's extreme scale codes (every one, whatever the seed) survive the regimes.
    let params = json!({"n": 12, "k": 64});
    let dist = ValueDist::Special {
        fraction: 0.25,
        non_finite: true,
    };
    for seed in 0..SEEDS {
        let inputs = ctx_gen(
            "mxfp4_dequant",
            &params,
            &[Regime::SubnormalOutputs, Regime::FormatExtremes],
            seed,
            dist.clone(),
        )
        .unwrap();
        let s = &inputs["scale"].data;
        for code in [0u8, 1, 127, 253, 254, 0xFF] {
            assert!(s.contains(&code), "seed {seed}: scale code {code} lost");
        }
        assert!(extremes_hold("mxfp4_dequant", &params, &inputs));
    }
}

#[test]
fn a_shape_or_parameter_that_cannot_hold_a_regime_is_an_error_naming_it() {
    use Regime::*;
    let refused = [
        // 1 scale group, 4 needed.
        (
            "mxfp4_dequant",
            json!({"n": 1, "k": 32}),
            vec![OverflowToInf, SubnormalOutputs, FormatExtremes],
            "format_extremes",
            "needs 4 scale groups",
        ),
        // E1M2's largest MXFP4 product stays finite in bf16.
        (
            "mxfp4_dequant",
            json!({"n": 2, "k": 64, "element": "e1m2"}),
            vec![OverflowToInf],
            "overflow_to_inf",
            "1.75 x 2^127",
        ),
        // One global scale cannot serve both bands.
        (
            "nvfp4_dequant",
            json!({"n": 4, "k": 64}),
            vec![OverflowToInf, SubnormalOutputs],
            "subnormal_outputs",
            "global scale",
        ),
        (
            "nvfp4_dequant",
            json!({"n": 4, "k": 64, "tie_global_scale": true}),
            vec![SubnormalOutputs],
            "subnormal_outputs",
            "tie_global_scale",
        ),
        (
            "nvfp4_dequant",
            json!({"n": 16, "k": 768, "order_witness": "b_rne"}),
            vec![FormatExtremes],
            "format_extremes",
            "order_witness",
        ),
        // W4A16: bf16 output overflow is the accumulator's; rows and columns.
        (
            "w4a16_matmul",
            json!({"format": "nvfp4", "m": 2, "n": 4, "k": 16}),
            vec![OverflowToInf],
            "overflow_to_inf",
            "dtype = \"f16\"",
        ),
        (
            "w4a16_matmul",
            json!({"format": "nvfp4", "m": 1, "n": 4, "k": 16, "dtype": "f16"}),
            vec![OverflowToInf, SubnormalOutputs],
            "subnormal_outputs",
            "needs m >= 2",
        ),
        (
            "w4a16_matmul",
            json!({"format": "nvfp4", "m": 1, "n": 1, "k": 16}),
            vec![SubnormalOutputs],
            "subnormal_outputs",
            "n >= 2",
        ),
        // W4A16 format_extremes: a column per extreme code and one for NaN, two groups per
        // row, a bf16 output for MXFP4, no other regime.
        (
            "w4a16_matmul",
            json!({"format": "mxfp4", "m": 8, "n": 3, "k": 64}),
            vec![FormatExtremes],
            "format_extremes",
            "n >= 4",
        ),
        (
            "w4a16_matmul",
            json!({"format": "nvfp4", "m": 8, "n": 4, "k": 16}),
            vec![FormatExtremes],
            "format_extremes",
            "two scale groups per row",
        ),
        (
            "w4a16_matmul",
            json!({"format": "mxfp4", "m": 8, "n": 4, "k": 64, "dtype": "f16"}),
            vec![FormatExtremes],
            "format_extremes",
            "dtype = \"bf16\"",
        ),
        (
            "w4a16_matmul",
            json!({"format": "nvfp4", "m": 8, "n": 8, "k": 64}),
            vec![SubnormalOutputs, FormatExtremes],
            "format_extremes",
            "cannot share",
        ),
        // MC2: rows, columns, (rank, k) positions.
        (
            "mc2_matmul_allreduce",
            json!({"dtype": "f16", "ranks": 2, "m": 1, "k": 8, "n": 8}),
            vec![OverflowToInf, SubnormalOutputs],
            "subnormal_outputs",
            "needs m >= 2",
        ),
        (
            "mc2_matmul_allreduce",
            json!({"dtype": "f16", "ranks": 2, "m": 4, "k": 8, "n": 1}),
            vec![SubnormalOutputs],
            "subnormal_outputs",
            "n >= 2",
        ),
        (
            "mc2_matmul_allreduce",
            json!({"dtype": "f16", "ranks": 1, "m": 4, "k": 1, "n": 4}),
            vec![OverflowToInf, SubnormalOutputs],
            "subnormal_outputs",
            "ranks * k >= 2",
        ),
        (
            "mc2_matmul_allreduce",
            json!({"dtype": "f16", "ranks": 2, "m": 4, "k": 8, "n": 4}),
            vec![FormatExtremes],
            "format_extremes",
            "does not apply",
        ),
        // Ops without range regimes.
        (
            "paged_kv",
            json!({"dtype": "f16", "layout": "BnBsH", "num_blocks": 2, "block_size": 16, "num_key_value_heads": 1, "head_dim": 16, "num_tokens": 2}),
            vec![SubnormalOutputs],
            "subnormal_outputs",
            "does not apply",
        ),
        (
            "fa_prefill",
            json!({"dtype": "bf16", "batch": 1, "q_seq": 4, "kv_seq": 4, "num_heads": 1, "num_key_value_heads": 1, "head_dim": 16}),
            vec![OverflowToInf],
            "overflow_to_inf",
            "does not apply",
        ),
    ];
    for (op, params, regimes, name, says) in refused {
        let family = ops::find(op).unwrap();
        let e = family
            .check_regimes(&params, &regimes)
            .expect_err(&format!("{op} {params} {regimes:?}"));
        let msg = e.to_string();
        assert!(
            matches!(&e, OpError::Regime { regime, .. } if regime == name) && msg.contains(says),
            "{op} {params}: {msg}"
        );
        // Generation refuses the same way, before drawing anything.
        assert_eq!(
            ctx_gen(op, &params, &regimes, 1, ValueDist::default()),
            Err(e)
        );
    }
}
