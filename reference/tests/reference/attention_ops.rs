//! The `fa_prefill` and `pa_decode` op families: description, generation and the reference
//! runs the harness performs.

use conform_reference::ops::{self, ElemType, GenContext, Tensor, ValueDist};
use conform_reference::parallel::Threads;

fn bits_source(seed: u64) -> impl FnMut() -> u64 {
    let mut g = conform_reference::splitmix::SplitMix64::new(seed);
    move || g.next_u64()
}

fn max_abs_diff(a: &Tensor, e: &Tensor) -> f64 {
    a.to_f64_vec()
        .iter()
        .zip(e.to_f64_vec())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn both_attention_families_are_registered() {
    let names: Vec<&str> = ops::registry().iter().map(|f| f.name()).collect();
    assert!(names.contains(&"fa_prefill") && names.contains(&"pa_decode"));
    for f in ops::registry() {
        if f.name() == "fa_prefill" || f.name() == "pa_decode" {
            assert!(f.recipes().contains(&"ascend_pfa_bf16"));
        }
    }
}

#[test]
fn fa_prefill_describes_generates_and_runs_oracle_and_recipes() {
    let fa = ops::find("fa_prefill").unwrap();
    let params = serde_json::json!({
        "dtype": "bf16", "input_layout": "BSND", "batch": 2, "q_seq": 24, "kv_seq": 40,
        "num_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "sparse_mode": 3,
        "softmax_lse_flag": true, "actual_seq_lengths_kv": [40, 31],
        "vector_cores": crate::attention_common::VECTOR_CORES
    });
    let d = fa.describe(&params).unwrap();
    // The roofline's compute ceiling is that of the operands' type, as the op says.
    assert_eq!(d.cost.compute, ElemType::Bf16);
    assert_eq!(d.inputs[0].shape, vec![2, 24, 4, 32]);
    assert_eq!(d.inputs[1].shape, vec![2, 40, 2, 32]);
    assert_eq!(d.outputs[0].axes, vec!["b", "s", "n", "d"]);
    assert_eq!(d.outputs[1].shape, vec![2, 4, 24, 1]);
    assert_eq!(d.outputs[1].dtype, ElemType::F32);
    assert!(d.cost.flops > 0.0 && d.cost.bytes > 0.0);
    let mut src = bits_source(1);
    let mut ctx = GenContext::new(&mut src, ValueDist::default());
    let inputs = fa.generate(&params, &mut ctx).unwrap();
    // Keys beyond actual_seq_lengths_kv are NaN in the generated inputs...
    let k = inputs["key"].to_f64_vec();
    assert!(k.iter().any(|x| x.is_nan()));
    let mut src2 = bits_source(1);
    let mut ctx2 = GenContext::new(&mut src2, ValueDist::default());
    assert_eq!(
        inputs,
        fa.generate(&params, &mut ctx2).unwrap(),
        "deterministic"
    );
    // ...and never reach the outputs.
    let o = fa.run(&params, "oracle", &inputs, Threads(2)).unwrap();
    assert_eq!(o["attention_out"].dtype, ElemType::F64);
    assert!(o["attention_out"]
        .to_f64_vec()
        .iter()
        .all(|x| x.is_finite()));
    for recipe in fa.recipes() {
        let r = fa.run(&params, recipe, &inputs, Threads(2)).unwrap();
        assert_eq!(r["attention_out"].dtype, ElemType::Bf16);
        assert_eq!(r["softmax_lse"].dtype, ElemType::F32);
        let err = max_abs_diff(&r["attention_out"], &o["attention_out"]);
        assert!(err < 2f64.powi(-5), "{recipe}: {err}");
        assert!(
            max_abs_diff(&r["softmax_lse"], &o["softmax_lse"]) < 1e-3,
            "{recipe}"
        );
    }
}

#[test]
fn fa_prefill_explicit_masks_and_varlen_layouts_run() {
    let fa = ops::find("fa_prefill").unwrap();
    for params in [
        serde_json::json!({"dtype": "f16", "batch": 1, "q_seq": 8, "kv_seq": 8, "num_heads": 2,
            "head_dim": 16, "atten_mask": true, "masked_rows": 2, "softmax_lse_flag": true}),
        serde_json::json!({"dtype": "bf16", "input_layout": "TND", "batch": 3, "num_heads": 2,
            "head_dim": 16, "actual_seq_lengths": [3, 3, 10], "actual_seq_lengths_kv": [5, 9, 20],
            "sparse_mode": 3}),
        serde_json::json!({"dtype": "f32", "input_layout": "BNSD_BSND", "batch": 1, "q_seq": 5,
            "kv_seq": 7, "num_heads": 2, "head_dim": 8, "sparse_mode": 4, "pre_tokens": 2,
            "next_tokens": 0}),
    ] {
        let mut src = bits_source(2);
        let mut ctx = GenContext::new(&mut src, ValueDist::default());
        let inputs = fa.generate(&params, &mut ctx).unwrap();
        let o = fa.run(&params, "oracle", &inputs, Threads(1)).unwrap();
        let r = fa.run(&params, "exact_f32", &inputs, Threads(1)).unwrap();
        assert!(
            max_abs_diff(&r["attention_out"], &o["attention_out"]) < 2f64.powi(-8),
            "{params}"
        );
        if params["masked_rows"] == 2 {
            // Fully masked rows: output 0, LSE +inf.
            let lse = r["softmax_lse"].to_f64_vec();
            assert_eq!(lse[0], f64::INFINITY);
            assert!(r["attention_out"].to_f64_vec()[..16]
                .iter()
                .all(|&x| x == 0.0));
        }
    }
}

#[test]
fn pa_decode_generates_valid_shuffled_shared_tables_and_runs() {
    let pa = ops::find("pa_decode").unwrap();
    let params = serde_json::json!({
        "dtype": "bf16", "batch": 3, "num_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
        "block_size": 16, "cache_layout": "BnNBsD", "actual_seq_lengths_kv": [70, 33, 50],
        "shared_prefix_blocks": 2, "softmax_lse_flag": true,
        "vector_cores": crate::attention_common::VECTOR_CORES
    });
    let d = pa.describe(&params).unwrap();
    let names: Vec<&str> = d.inputs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["query", "key_cache", "value_cache", "block_table"]);
    let mut src = bits_source(3);
    let mut ctx = GenContext::new(&mut src, ValueDist::default());
    let inputs = pa.generate(&params, &mut ctx).unwrap();
    let table = inputs["block_table"].to_i64_vec().unwrap();
    let width = d.inputs[3].shape[1];
    assert_eq!(width, 5);
    let num_blocks = d.inputs[1].shape[0] as i64;
    // Shared prefix: the first two blocks of every sequence are sequence 0's.
    for b in 1..3 {
        assert_eq!(table[b * width..b * width + 2], table[0..2]);
    }
    assert!(table.iter().all(|&x| (0..num_blocks).contains(&x)));
    // Not contiguous: sequence 0's five blocks are not 0, 1, 2, 3, 4 in order.
    assert_ne!(table[0..5], [0, 1, 2, 3, 4]);
    // Unused slots are NaN.
    assert!(inputs["key_cache"].to_f64_vec().iter().any(|x| x.is_nan()));
    let o = pa.run(&params, "oracle", &inputs, Threads(2)).unwrap();
    assert!(o["attention_out"]
        .to_f64_vec()
        .iter()
        .all(|x| x.is_finite()));
    for recipe in pa.recipes() {
        let r = pa.run(&params, recipe, &inputs, Threads(2)).unwrap();
        let err = max_abs_diff(&r["attention_out"], &o["attention_out"]);
        assert!(err < 2f64.powi(-5), "{recipe}: {err}");
    }
}
