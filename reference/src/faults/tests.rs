use super::*;
use crate::ops::{self, GenContext, ValueDist};
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
    let fa = json!({"dtype": "bf16", "batch": 1, "q_seq": 8, "kv_seq": 300, "num_heads": 4,
                    "num_key_value_heads": 2, "head_dim": 32, "sparse_mode": 3,
                    "softmax_lse_flag": true});
    for f in [
        "attn-o-not-rescaled",
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
    let pa = json!({"dtype": "bf16", "batch": 2, "num_heads": 4, "num_key_value_heads": 2,
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
