use super::*;
use crate::ops::{self, ElemType, GenContext, ValueDist};
use serde_json::json;

fn gen_inputs(op: &str, params: &serde_json::Value, seed: u64) -> TensorMap {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut ctx = GenContext::new(
        &mut next,
        ValueDist::Normal {
            mean: 0.0,
            std: 1.0,
        },
    );
    ops::find(op).unwrap().generate(params, &mut ctx).unwrap()
}

#[test]
fn catalogue_names_are_unique_and_cover_six_families() {
    let all = catalogue();
    assert!(all.len() >= 35, "{} faults", all.len());
    let mut names: Vec<&str> = all.iter().map(|f| f.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), all.len(), "duplicate fault names");
    for op in ops::registry() {
        assert!(
            all.iter()
                .filter(|f| !f.ops.is_empty())
                .any(|f| f.applies_to(op.name())),
            "no fault of its own for `{}`",
            op.name()
        );
    }
    for f in &all {
        for op in f.ops {
            assert!(ops::find(op).is_ok(), "{}: unknown op {op}", f.name);
        }
    }
}

fn outputs(fault: &str, op: &str, params: &serde_json::Value, recipe: &str) -> FaultRun {
    let family = ops::find(op).unwrap();
    let inputs = gen_inputs(op, params, 1);
    run(
        find(fault).unwrap(),
        family,
        params,
        recipe,
        &inputs,
        Threads::ONE,
    )
    .unwrap()
}

fn changes(fault: &str, op: &str, params: serde_json::Value, recipe: &str) {
    let family = ops::find(op).unwrap();
    let inputs = gen_inputs(op, &params, 1);
    let clean = family.run(&params, recipe, &inputs, Threads::ONE).unwrap();
    match outputs(fault, op, &params, recipe) {
        FaultRun::Outputs(o) => {
            assert_eq!(
                o.keys().collect::<Vec<_>>(),
                clean.keys().collect::<Vec<_>>()
            );
            for (k, t) in &o {
                assert_eq!(t.shape, clean[k].shape, "{fault}: shape of {k}");
            }
            assert_ne!(o, clean, "{fault} changed nothing on {op} {params}")
        }
        FaultRun::NotApplicable(why) => panic!("{fault} not applicable: {why}"),
    }
}

#[test]
fn attention_faults_change_the_outputs() {
    let fa = json!({"dtype": "bf16", "batch": 1, "q_seq": 8, "kv_seq": 600, "num_heads": 4,
                    "num_key_value_heads": 2, "head_dim": 32, "sparse_mode": 3,
                    "softmax_lse_flag": true});
    for f in [
        "attn-o-not-rescaled",
        "attn-o-rescale-lagged",
        "attn-running-max-falls",
        "attn-causal-diagonal-excluded",
        "attn-causal-alignment-swapped",
        "attn-gqa-head-modulo",
        "attn-scale-one-over-d",
        "attn-scale-applied-twice",
        "attn-kv-tile-halved",
        "attn-lse-log2-domain",
        "any-nan-in-largest-output",
    ] {
        changes(f, "fa_prefill", fa.clone(), "ascend_pfa_bf16");
    }
    let pa = json!({"dtype": "bf16", "vector_cores": 48, "batch": 2, "num_heads": 4, "num_key_value_heads": 2,
                    "head_dim": 32, "block_size": 16, "actual_seq_lengths_kv": [37, 20]});
    for f in [
        "pa-last-partial-block-dropped",
        "pa-read-one-past-length",
        "pa-block-table-off-by-one",
        "pa-cache-layout-confused",
        "attn-gqa-head-modulo",
    ] {
        changes(f, "pa_decode", pa.clone(), "ascend_ifa_bf16");
    }
}

#[test]
fn gqa_fault_is_the_modulo_mapping() {
    // Heads 0..4 over 2 KV heads: head 1 must read KV head 1 % 2 = 1 (the reference: 0).
    let p = json!({"dtype": "f32", "batch": 1, "q_seq": 3, "kv_seq": 5, "num_heads": 4,
                   "num_key_value_heads": 2, "head_dim": 16});
    let family = ops::find("fa_prefill").unwrap();
    let inputs = gen_inputs("fa_prefill", &p, 3);
    let FaultRun::Outputs(o) = run(
        find("attn-gqa-head-modulo").unwrap(),
        family,
        &p,
        "exact_f32",
        &inputs,
        Threads::ONE,
    )
    .unwrap() else {
        panic!("not applicable")
    };
    // Expected: head h attends KV head h % 2; build it by giving every head its own KV copy.
    let g = crate::ops::fa_prefill::geometry_of(&p).unwrap();
    let clean = family.run(&p, "exact_f32", &inputs, Threads::ONE).unwrap();
    let got = o["attention_out"].to_f64_vec();
    let base = clean["attention_out"].to_f64_vec();
    // Heads 0 and 3 map to the same KV head under both rules; 1 and 2 swap.
    for i in 0..3 {
        for h in [0usize, 3] {
            let at = g.out_offset(0, i, h);
            assert_eq!(got[at..at + 16], base[at..at + 16]);
        }
        let at = g.out_offset(0, i, 1);
        assert_ne!(got[at..at + 16], base[at..at + 16]);
    }
}

#[test]
fn fp4_kv_and_mc2_faults_change_the_outputs() {
    let nv = json!({"n": 4, "k": 64});
    for f in [
        "nvfp4-order-d",
        "fp4-nibble-order-swapped",
        "nvfp4-global-scale-dropped",
    ] {
        changes(f, "nvfp4_dequant", nv.clone(), "vllm_nvfp4");
    }
    let w = json!({"m": 2, "n": 4, "k": 64, "format": "nvfp4"});
    changes(
        "w4a16-neighbour-group-scale",
        "w4a16_matmul",
        w,
        "ascend_qingcheng_w4a16",
    );
    let kv = json!({"dtype": "bf16", "layout": "BnBsH", "num_blocks": 4, "block_size": 16,
                    "num_key_value_heads": 2, "head_dim": 64, "num_tokens": 37, "padding": 5});
    for f in [
        "kv-slot-off-by-one",
        "kv-padding-slot-written",
        "kv-layout-swapped",
        "kv-key-value-swapped",
        "kv-last-token-repeats-first",
    ] {
        changes(f, "paged_kv", kv.clone(), "reference");
    }
    let mc2 = json!({"dtype": "f16", "ranks": 4, "m": 37, "k": 32, "n": 48, "tiles": [16, 16, 5],
                     "bias": true});
    for f in [
        "mc2-tail-tile-dropped",
        "mc2-last-rank-skipped",
        "mc2-partials-not-rounded",
        "mc2-reduce-order-changed",
        "mc2-epilogue-per-rank",
        "mc2-epilogue-after-reduce",
    ] {
        changes(f, "mc2_matmul_allreduce", mc2.clone(), "kernel_ring");
    }
}

#[test]
fn faults_that_change_nothing_are_not_applicable() {
    let p = json!({"dtype": "bf16", "batch": 1, "q_seq": 4, "kv_seq": 4, "num_heads": 2,
                   "num_key_value_heads": 2, "head_dim": 16});
    for f in [
        "attn-gqa-head-modulo",
        "attn-causal-alignment-swapped",
        "pa-block-table-off-by-one",
    ] {
        assert!(
            matches!(
                outputs(f, "fa_prefill", &p, "ascend_pfa_bf16"),
                FaultRun::NotApplicable(_)
            ),
            "{f}"
        );
    }
    assert!(matches!(
        outputs("attn-o-not-rescaled", "fa_prefill", &p, ORACLE),
        FaultRun::NotApplicable(_)
    ));
}

/// Inputs of `params` holding `regimes` (drawn from the same stream as [`gen_inputs`]).
fn regime_inputs(op: &str, params: &serde_json::Value, regimes: &[ops::Regime]) -> TensorMap {
    let mut state = 0x9E37_79B9_7F4A_7C15u64 | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut ctx = GenContext::new(
        &mut next,
        ValueDist::Normal {
            mean: 0.0,
            std: 1.0,
        },
    );
    ops::find(op)
        .unwrap()
        .generate_with_regimes(params, regimes, &mut ctx)
        .unwrap()
}

#[test]
fn no_max_subtraction_and_empty_row_lse_show_only_in_their_regimes() {
    use crate::ops::attention_regimes::score_view;
    let cases = [
        (
            "fa_prefill",
            json!({"dtype": "bf16", "batch": 2, "q_seq": 8, "kv_seq": 160, "num_heads": 4,
                   "num_key_value_heads": 2, "head_dim": 32, "atten_mask": true,
                   "softmax_lse_flag": true}),
            "ascend_pfa_bf16",
        ),
        (
            "pa_decode",
            json!({"dtype": "bf16", "vector_cores": 48, "batch": 3, "num_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 32, "block_size": 16, "actual_seq_lengths_kv": [200, 150, 140],
                   "atten_mask": true, "softmax_lse_flag": true}),
            "ascend_ifa_bf16",
        ),
    ];
    for (op, params, recipe) in cases {
        let family = ops::find(op).unwrap();
        let fault = |name: &str, inputs: &TensorMap| {
            run(
                find(name).unwrap(),
                family,
                &params,
                recipe,
                inputs,
                Threads::ONE,
            )
            .unwrap()
        };
        // The ordinary draw: scores far below exp's overflow, and no fully masked row.
        let plain = gen_inputs(op, &params, 1);
        let v = score_view(op, &params, &plain).unwrap();
        let g = &v.g;
        let rows: Vec<(usize, usize)> = (0..g.batch)
            .flat_map(|b| (0..g.lq[b]).map(move |i| (b, i)))
            .collect();
        assert!(rows.iter().all(|&(b, i)| !v.row_empty(b, i)), "{op}");
        for name in ["attn-no-max-subtraction", "attn-lse-wrong-on-empty-rows"] {
            assert!(
                matches!(fault(name, &plain), FaultRun::NotApplicable(_)),
                "{op} {name}"
            );
        }
        // With the regimes: NaN outputs and +Inf LSE exactly on the rows above ln(f32::MAX),
        // -Inf LSE exactly on the empty rows, everything else as the recipe computes it.
        let inputs = regime_inputs(
            op,
            &params,
            &[
                ops::Regime::LargeLogits,
                ops::Regime::LateMax,
                ops::Regime::MaskedRowsLse,
            ],
        );
        let clean = family.run(&params, recipe, &inputs, Threads::ONE).unwrap();
        let v = score_view(op, &params, &inputs).unwrap();
        let g = &v.g;
        let FaultRun::Outputs(o) = fault("attn-no-max-subtraction", &inputs) else {
            panic!("{op}: not applicable with large logits");
        };
        let (out, lse) = (
            o["attention_out"].to_f64_vec(),
            o["softmax_lse"].to_f64_vec(),
        );
        let (out0, lse0) = (
            clean["attention_out"].to_f64_vec(),
            clean["softmax_lse"].to_f64_vec(),
        );
        let mut overflowing = 0;
        for &(b, i) in &rows {
            for h in 0..g.heads {
                let big = v.max_score(b, i, h).is_some_and(|m| m > 88.8);
                overflowing += big as usize;
                let at = g.out_offset(b, i, h);
                let row = &out[at..at + g.head_dim];
                if big {
                    assert!(row.iter().all(|x| x.is_nan()), "{op} {b} {i} {h}");
                    assert_eq!(lse[g.lse_index(b, i, h)], f64::INFINITY);
                } else {
                    assert_eq!(row, &out0[at..at + g.head_dim], "{op} {b} {i} {h}");
                    let k = g.lse_index(b, i, h);
                    assert!(lse[k] == lse0[k] || (lse[k].is_nan() && lse0[k].is_nan()));
                }
            }
        }
        assert!(overflowing >= g.heads, "{op}: {overflowing} rows overflow");
        let FaultRun::Outputs(o) = fault("attn-lse-wrong-on-empty-rows", &inputs) else {
            panic!("{op}: not applicable with a fully masked row");
        };
        assert_eq!(o["attention_out"], clean["attention_out"], "{op}");
        let lse = o["softmax_lse"].to_f64_vec();
        let mut empty = 0;
        for &(b, i) in &rows {
            for h in 0..g.heads {
                let k = g.lse_index(b, i, h);
                if v.row_empty(b, i) {
                    empty += 1;
                    // The prompt kernel corrects the row (+inf); the decode kernel has no
                    // correction: its masked scores are -1e12, so the LSE is ln(n) - 1e12.
                    if op == "pa_decode" {
                        assert!(lse0[k] < -9e11, "{op}: the recipe's masked-row LSE");
                    } else {
                        assert_eq!(lse0[k], f64::INFINITY, "{op}: the recipe's empty-row LSE");
                    }
                    assert_eq!(lse[k], f64::NEG_INFINITY, "{op}");
                } else {
                    assert!(lse[k] == lse0[k] || (lse[k].is_nan() && lse0[k].is_nan()));
                }
            }
        }
        assert!(empty >= g.heads, "{op}: {empty} empty rows");
    }
}

#[test]
fn range_faults_change_exactly_the_infinities_and_subnormals_of_their_dtype() {
    use crate::ops::Regime::{FormatExtremes, OverflowToInf, SubnormalOutputs};
    let cases = [
        (
            "mxfp4_dequant",
            "mx_ocp",
            json!({"n": 4, "k": 256}),
            ElemType::Bf16,
        ),
        (
            "mxfp4_dequant",
            "mx_ocp",
            json!({"n": 4, "k": 256, "dtype": "f16"}),
            ElemType::F16,
        ),
        (
            "mc2_matmul_allreduce",
            "kernel_rank_order",
            json!({"dtype": "bf16", "ranks": 2, "m": 4, "k": 8, "n": 8}),
            ElemType::Bf16,
        ),
    ];
    for (op, recipe, params, et) in cases {
        let family = ops::find(op).unwrap();
        let regimes: Vec<ops::Regime> = [OverflowToInf, SubnormalOutputs, FormatExtremes]
            .into_iter()
            .filter(|r| r.applies_to(op))
            .collect();
        let inputs = regime_inputs(op, &params, &regimes);
        let clean = family.run(&params, recipe, &inputs, Threads::ONE).unwrap();
        let bits = |m: &TensorMap| m.values().next().unwrap().bits16().unwrap();
        let before = bits(&clean);
        let (exp, max) = if et == ElemType::F16 {
            (0x7C00u16, 0x7BFFu16)
        } else {
            (0x7F80, 0x7F7F)
        };
        let suffix = if et == ElemType::F16 { "f16" } else { "bf16" };
        let other = if et == ElemType::F16 { "bf16" } else { "f16" };
        let run_fault = |name: &str| {
            run(
                find(name).unwrap(),
                family,
                &params,
                recipe,
                &inputs,
                Threads::ONE,
            )
            .unwrap()
        };
        let FaultRun::Outputs(sat) = run_fault(&format!("range-inf-saturated-{suffix}")) else {
            panic!("{op}: saturation not applicable");
        };
        let FaultRun::Outputs(ftz) = run_fault(&format!("range-subnormals-flushed-{suffix}"))
        else {
            panic!("{op}: flush not applicable");
        };
        let (sat, ftz) = (bits(&sat), bits(&ftz));
        let mut infs = 0;
        let mut subs = 0;
        for i in 0..before.len() {
            let (b, mag) = (before[i], before[i] & 0x7FFF);
            if mag == exp {
                infs += 1;
                assert_eq!(sat[i], (b & 0x8000) | max, "{op} element {i}");
            } else {
                assert_eq!(sat[i], b, "{op} element {i}");
            }
            if mag != 0 && b & exp == 0 {
                subs += 1;
                assert_eq!(ftz[i], b & 0x8000, "{op} element {i}");
            } else {
                assert_eq!(ftz[i], b, "{op} element {i}");
            }
        }
        assert!(infs >= 2 && subs >= 2, "{op}: {infs} Inf, {subs} subnormal");
        // The other dtype's faults change nothing here.
        for name in [
            format!("range-inf-saturated-{other}"),
            format!("range-subnormals-flushed-{other}"),
        ] {
            assert!(
                matches!(run_fault(&name), FaultRun::NotApplicable(_)),
                "{name}"
            );
        }
    }
    // The ordinary draw of MXFP4 (scales 2^-10..2^10) holds neither an E8M0 code 0 nor an
    // infinite output: the clamp and the saturation have nothing to change there.
    let p = json!({"n": 4, "k": 256});
    for f in ["e8m0-exponent-clamped", "range-inf-saturated-bf16"] {
        assert!(
            matches!(
                outputs(f, "mxfp4_dequant", &p, "mx_ocp"),
                FaultRun::NotApplicable(_)
            ),
            "{f}"
        );
    }
    // With format_extremes, the clamp doubles the groups of scale 2^-127 (bf16 subnormals).
    let inputs = regime_inputs("mxfp4_dequant", &p, &[FormatExtremes]);
    let family = ops::find("mxfp4_dequant").unwrap();
    let clean = family.run(&p, "mx_ocp", &inputs, Threads::ONE).unwrap();
    let FaultRun::Outputs(clamped) = run(
        find("e8m0-exponent-clamped").unwrap(),
        family,
        &p,
        "mx_ocp",
        &inputs,
        Threads::ONE,
    )
    .unwrap() else {
        panic!("clamp not applicable with format_extremes");
    };
    let (a, b) = (clean["out"].to_f64_vec(), clamped["out"].to_f64_vec());
    let doubled = a
        .iter()
        .zip(&b)
        .filter(|(x, y)| **x != 0.0 && **y == 2.0 * **x)
        .count();
    assert!(doubled >= 2, "{doubled} elements doubled");
    assert!(a.iter().zip(&b).all(|(x, y)| x == y || *y == 2.0 * *x));
}

#[test]
fn shape_regime_faults_show_exactly_where_their_regime_holds() {
    let fa = |extra: serde_json::Value| {
        let mut p = json!({"dtype": "bf16", "batch": 2, "q_seq": 8, "kv_seq": 12, "num_heads": 4,
                           "num_key_value_heads": 2, "head_dim": 32, "softmax_lse_flag": true});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let pa = |extra: serde_json::Value| {
        let mut p = json!({"dtype": "bf16", "vector_cores": 48, "batch": 2, "num_heads": 4, "num_key_value_heads": 2,
                           "head_dim": 32, "block_size": 16, "actual_seq_lengths_kv": [37, 20]});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let (bf, pab) = ("ascend_pfa_bf16", "ascend_ifa_bf16");
    // Where the regime holds, the fault changes the outputs.
    changes("attn-query-of-batch-0", "fa_prefill", fa(json!({})), bf);
    changes("attn-query-of-batch-0", "pa_decode", pa(json!({})), pab);
    for layout in ["BSND", "BSH", "BNSD"] {
        changes(
            "attn-query-strides-swapped",
            "fa_prefill",
            fa(json!({"input_layout": layout})),
            bf,
        );
    }
    for layout in ["BnBsH", "BnNBsD"] {
        changes(
            "pa-cache-strides-swapped",
            "pa_decode",
            pa(json!({"cache_layout": layout})),
            pab,
        );
    }
    changes(
        "attn-lse-strided-by-actual-length",
        "fa_prefill",
        fa(json!({"actual_seq_lengths": [8, 5]})),
        bf,
    );
    // Where it does not, the fault is not applicable: the same bits as the clean kernel.
    let not_applicable = |fault: &str, op: &str, params: serde_json::Value, recipe: &str| {
        assert!(
            matches!(
                outputs(fault, op, &params, recipe),
                FaultRun::NotApplicable(_)
            ),
            "{fault} on {params}"
        );
    };
    not_applicable(
        "attn-query-of-batch-0",
        "fa_prefill",
        fa(json!({"batch": 1})),
        bf,
    );
    not_applicable(
        "attn-query-of-batch-0",
        "pa_decode",
        pa(json!({"batch": 1, "actual_seq_lengths_kv": [37]})),
        pab,
    );
    // S == N (and the TND layout, which has no S axis).
    not_applicable(
        "attn-query-strides-swapped",
        "fa_prefill",
        fa(json!({"q_seq": 4})),
        bf,
    );
    not_applicable(
        "attn-query-strides-swapped",
        "fa_prefill",
        fa(
            json!({"input_layout": "TND", "actual_seq_lengths": [8, 13], "actual_seq_lengths_kv": [12, 19]}),
        ),
        bf,
    );
    not_applicable(
        "pa-cache-strides-swapped",
        "pa_decode",
        pa(json!({"num_heads": 16, "num_key_value_heads": 16})),
        pab,
    );
    // No padded row, or no LSE asked for.
    not_applicable(
        "attn-lse-strided-by-actual-length",
        "fa_prefill",
        fa(json!({})),
        bf,
    );
    not_applicable(
        "attn-lse-strided-by-actual-length",
        "fa_prefill",
        fa(json!({"actual_seq_lengths": [8, 5], "softmax_lse_flag": false})),
        bf,
    );
}
