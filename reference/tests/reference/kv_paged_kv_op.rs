//! The `paged_kv` op family: description, generation, bitwise reference run, oracle form and
//! typed errors.

use conform_reference::kv::{gather, CacheGeometry, KvCacheLayout};
use conform_reference::ops::{
    self, ElemType, GenContext, OpError, Tensor, TensorMap, ValueDist, ORACLE,
};
use conform_reference::parallel::Threads;
use serde_json::{json, Value};

fn splitmix(seed: u64) -> impl FnMut() -> u64 {
    let mut g = conform_reference::splitmix::SplitMix64::new(seed);
    move || g.next_u64()
}

fn op() -> &'static dyn ops::OpFamily {
    ops::find("paged_kv").unwrap()
}

fn params(dtype: &str, layout: &str) -> Value {
    json!({
        "dtype": dtype, "layout": layout, "num_blocks": 6, "block_size": 16,
        "num_key_value_heads": 2, "head_dim": 16, "num_tokens": 40, "padding": 5
    })
}

fn generate(p: &Value, seed: u64, dist: ValueDist) -> TensorMap {
    let mut bits = splitmix(seed);
    let mut ctx = GenContext::new(&mut bits, dist);
    op().generate(p, &mut ctx).unwrap()
}

/// Elements of a 2- or 4-byte tensor as raw bits.
fn words(t: &Tensor) -> Vec<u32> {
    match t.dtype.size_bytes() {
        2 => t
            .data
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]) as u32)
            .collect(),
        _ => t
            .data
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    }
}

fn layouts(layout: &str, dtype: ElemType) -> (KvCacheLayout, KvCacheLayout) {
    match layout {
        "BnBsH" => (KvCacheLayout::BnBsH, KvCacheLayout::BnBsH),
        "BnNBsD" => (KvCacheLayout::BnNBsD, KvCacheLayout::BnNBsD),
        _ => (
            KvCacheLayout::VllmKey {
                x: 16 / dtype.size_bytes(),
            },
            KvCacheLayout::VllmValue,
        ),
    }
}

const G: CacheGeometry = CacheGeometry {
    num_blocks: 6,
    block_size: 16,
    kv_heads: 2,
    head_dim: 16,
};

/// Every slot's row `[num_slots, N, D]`, read through an identity block table.
fn rows_by_slot(layout: KvCacheLayout, t: &Tensor) -> Vec<u32> {
    let table: Vec<i32> = (0..G.num_blocks as i32).collect();
    gather(layout, &G, &words(t), &table, G.num_slots()).unwrap()
}

fn is_nan_bits(dtype: ElemType, w: u32) -> bool {
    match dtype {
        ElemType::Bf16 => (w & 0x7F80) == 0x7F80 && (w & 0x7F) != 0,
        ElemType::F16 => (w & 0x7C00) == 0x7C00 && (w & 0x3FF) != 0,
        _ => f32::from_bits(w).is_nan(),
    }
}

#[test]
fn paged_kv_is_registered_with_its_recipes() {
    assert!(ops::registry().iter().any(|f| f.name() == "paged_kv"));
    assert_eq!(op().recipes(), vec!["reference"]);
}

#[test]
fn describe_lists_tensors_with_layout_shapes_and_axes() {
    let d = op().describe(&params("bf16", "BnBsH")).unwrap();
    let names: Vec<&str> = d.inputs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "key",
            "value",
            "slot_mapping",
            "key_cache_in",
            "value_cache_in"
        ]
    );
    assert_eq!(d.inputs[0].shape, vec![40, 2, 16]);
    assert_eq!(d.inputs[0].axes, vec!["t", "n", "d"]);
    assert_eq!(d.inputs[2].dtype, ElemType::I32);
    assert_eq!(d.inputs[3].shape, vec![6, 16, 32]);
    assert_eq!(d.outputs[0].name, "key_cache_out");
    assert_eq!(d.outputs[1].name, "value_cache_out");
    assert_eq!(d.outputs[1].dtype, ElemType::Bf16);
    // Rows read (2 x 40 x 32 x 2 bytes), slots read (40 x 4), rows written (2 x 35 x 32 x 2).
    assert_eq!(d.cost.bytes, 5120.0 + 160.0 + 4480.0);
    assert_eq!(d.cost.flops, 0.0);

    let v = op().describe(&params("bf16", "vllm")).unwrap();
    assert_eq!(v.inputs[3].shape, vec![6, 2, 2, 16, 8]);
    assert_eq!(v.inputs[3].axes, vec!["block", "n", "d_hi", "slot", "x"]);
    assert_eq!(v.inputs[4].shape, vec![6, 2, 16, 16]);
    let f = op().describe(&params("f32", "vllm")).unwrap();
    assert_eq!(f.inputs[3].shape, vec![6, 2, 4, 16, 4]);
    let n = op().describe(&params("f16", "BnNBsD")).unwrap();
    assert_eq!(n.outputs[0].shape, vec![6, 2, 16, 16]);
    let mut p64 = params("bf16", "BnBsH");
    p64["slot_mapping_dtype"] = json!("i64");
    assert_eq!(op().describe(&p64).unwrap().inputs[2].dtype, ElemType::I64);
}

#[test]
fn generate_then_run_writes_exactly_the_mapped_rows_for_every_layout_and_dtype() {
    for dtype_name in ["bf16", "f16", "f32"] {
        for layout_name in ["BnBsH", "BnNBsD", "vllm"] {
            let p = params(dtype_name, layout_name);
            let dist = ValueDist::Special {
                fraction: 0.1,
                non_finite: true,
            };
            let inputs = generate(&p, 11, dist);
            let out = op().run(&p, "reference", &inputs, Threads(2)).unwrap();
            let dtype = inputs["key"].dtype;
            let (kl, vl) = layouts(layout_name, dtype);
            let slots = inputs["slot_mapping"].to_i64_vec().unwrap();
            let row = G.kv_heads * G.head_dim;
            for (rows_name, cache, layout) in
                [("key", "key_cache", kl), ("value", "value_cache", vl)]
            {
                let rows = words(&inputs[rows_name]);
                let before = rows_by_slot(layout, &inputs[&format!("{cache}_in")]);
                let result = &out[&format!("{cache}_out")];
                assert_eq!(result.dtype, dtype);
                assert_eq!(result.shape, inputs[&format!("{cache}_in")].shape);
                let after = rows_by_slot(layout, result);
                let mut expected = before.clone();
                for (t, &s) in slots.iter().enumerate() {
                    if s >= 0 {
                        let s = s as usize;
                        expected[s * row..(s + 1) * row]
                            .copy_from_slice(&rows[t * row..(t + 1) * row]);
                    }
                }
                assert_eq!(after, expected, "{dtype_name} {layout_name} {cache}");
            }
        }
    }
}

#[test]
fn generated_slot_mapping_has_the_requested_padding_and_distinct_slots() {
    for (seed, dtype) in [(1u64, "i32"), (2, "i64")] {
        let mut p = params("bf16", "BnBsH");
        p["slot_mapping_dtype"] = json!(dtype);
        let inputs = generate(&p, seed, ValueDist::default());
        let t = &inputs["slot_mapping"];
        assert_eq!(t.dtype, dtype.parse::<ElemType>().unwrap());
        let slots = t.to_i64_vec().unwrap();
        assert_eq!(slots.len(), 40);
        assert_eq!(slots.iter().filter(|&&s| s == -1).count(), 5);
        let mut valid: Vec<i64> = slots.iter().copied().filter(|&s| s >= 0).collect();
        valid.sort();
        valid.dedup();
        assert_eq!(valid.len(), 35);
        assert!(valid.iter().all(|&s| s < 96));
        // Padding is spread through the mapping, not only at the end.
        assert!(slots[..35].contains(&-1), "seed {seed}: {slots:?}");
    }
}

#[test]
fn generated_caches_are_nan_where_written_and_mixed_elsewhere() {
    for dtype_name in ["bf16", "f16", "f32"] {
        let p = params(dtype_name, "vllm");
        let inputs = generate(&p, 5, ValueDist::default());
        let dtype = inputs["key"].dtype;
        let (kl, _) = layouts("vllm", dtype);
        let slots = inputs["slot_mapping"].to_i64_vec().unwrap();
        let rows = rows_by_slot(kl, &inputs["key_cache_in"]);
        let row = G.kv_heads * G.head_dim;
        let mut old = 0;
        for s in 0..G.num_slots() {
            let r = &rows[s * row..(s + 1) * row];
            if slots.contains(&(s as i64)) {
                assert!(
                    r.iter().all(|&w| is_nan_bits(dtype, w)),
                    "{dtype_name} slot {s}"
                );
            } else if !r.iter().all(|&w| is_nan_bits(dtype, w)) {
                assert!(r.iter().all(|&w| !is_nan_bits(dtype, w)));
                old += 1;
            }
        }
        // About a quarter of the 61 other slots hold older values.
        assert!((5..35).contains(&old), "{dtype_name}: {old} older rows");
    }
}

#[test]
fn all_padding_leaves_the_cache_untouched() {
    let mut p = params("bf16", "BnNBsD");
    p["padding"] = json!(40);
    let inputs = generate(&p, 3, ValueDist::default());
    let out = op().run(&p, "reference", &inputs, Threads::ONE).unwrap();
    assert_eq!(out["key_cache_out"].data, inputs["key_cache_in"].data);
    assert_eq!(out["value_cache_out"].data, inputs["value_cache_in"].data);
}

#[test]
fn oracle_returns_the_same_data_as_f64() {
    let p = params("f16", "vllm");
    let inputs = generate(&p, 9, ValueDist::default());
    let reference = op().run(&p, "reference", &inputs, Threads::ONE).unwrap();
    let oracle = op().run(&p, ORACLE, &inputs, Threads::ONE).unwrap();
    for name in ["key_cache_out", "value_cache_out"] {
        let (r, o) = (&reference[name], &oracle[name]);
        assert_eq!(o.dtype, ElemType::F64);
        assert_eq!(o.shape, r.shape);
        let (rv, ov) = (r.to_f64_vec(), o.to_f64_vec());
        assert!(rv
            .iter()
            .zip(&ov)
            .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())));
        assert!(ov.iter().any(|v| v.is_nan()) && ov.iter().any(|v| v.is_finite()));
    }
}

#[test]
fn generation_depends_only_on_the_bit_source() {
    let p = params("bf16", "BnBsH");
    assert_eq!(
        generate(&p, 42, ValueDist::default()),
        generate(&p, 42, ValueDist::default())
    );
    assert_ne!(
        generate(&p, 42, ValueDist::default()),
        generate(&p, 43, ValueDist::default())
    );
}

fn param_error(p: &Value) -> (String, String) {
    match op().describe(p) {
        Err(OpError::InvalidParam { param, message, .. }) => (param, message),
        other => panic!("expected InvalidParam, got {other:?}"),
    }
}

#[test]
fn bad_params_are_typed_errors_naming_the_parameter() {
    let base = params("bf16", "vllm");
    let with = |k: &str, v: Value| {
        let mut p = base.clone();
        p[k] = v;
        p
    };
    assert_eq!(param_error(&with("num_blocks", json!(0))).0, "num_blocks");
    assert_eq!(param_error(&with("block_size", json!(0))).0, "block_size");
    assert_eq!(
        param_error(&with("num_key_value_heads", json!(0))).0,
        "num_key_value_heads"
    );
    let (param, message) = param_error(&with("head_dim", json!(12)));
    assert_eq!(param, "head_dim");
    assert!(message.contains("multiple"), "{message}");
    // 12 is fine outside the vLLM key layout (and for f32, x = 4 divides it).
    let mut ok = with("head_dim", json!(12));
    ok["layout"] = json!("BnBsH");
    assert!(op().describe(&ok).is_ok());
    ok["layout"] = json!("vllm");
    ok["dtype"] = json!("f32");
    assert!(op().describe(&ok).is_ok());
    assert_eq!(param_error(&with("padding", json!(41))).0, "padding");
    assert_eq!(param_error(&with("num_tokens", json!(200))).0, "num_tokens");
    assert_eq!(
        param_error(&with("num_blocks", json!(1u64 << 40))).0,
        "num_blocks"
    );
    // Unknown fields, bad enum values and missing fields are rejected by the parser.
    for p in [
        with("num_head", json!(2)),
        with("layout", json!("BSH")),
        with("dtype", json!("f8")),
        with("slot_mapping_dtype", json!("u8")),
        json!({"dtype": "bf16"}),
    ] {
        assert_eq!(param_error(&p).0, "params", "{p}");
    }
}

#[test]
fn run_rejects_unknown_recipes_and_bad_inputs() {
    let p = params("bf16", "BnBsH");
    let inputs = generate(&p, 1, ValueDist::default());
    assert!(matches!(
        op().run(&p, "fast", &inputs, Threads::ONE),
        Err(OpError::UnknownRecipe { .. })
    ));

    let input_error = |inputs: &TensorMap| match op().run(&p, "reference", inputs, Threads::ONE) {
        Err(OpError::InvalidInput { input, .. }) => input,
        Err(OpError::MissingInput { input, .. }) => format!("missing {input}"),
        other => panic!("expected an input error, got {other:?}"),
    };
    let with_slots = |slots: &[i32]| {
        let mut m = inputs.clone();
        let mut all = vec![-1; 40];
        all[..slots.len()].copy_from_slice(slots);
        m.insert("slot_mapping".into(), Tensor::from_i32(vec![40], &all));
        m
    };
    assert_eq!(input_error(&with_slots(&[96])), "slot_mapping");
    assert_eq!(input_error(&with_slots(&[3, 7, 3])), "slot_mapping");
    assert!(op()
        .run(&p, "reference", &with_slots(&[95, 0]), Threads::ONE)
        .is_ok());

    let mut wrong_shape = inputs.clone();
    wrong_shape.insert(
        "key".into(),
        Tensor::from_bits16(ElemType::Bf16, vec![40, 32], &[0; 40 * 32]),
    );
    assert_eq!(input_error(&wrong_shape), "key");
    let mut wrong_dtype = inputs.clone();
    wrong_dtype.insert(
        "value_cache_in".into(),
        Tensor::from_bits16(ElemType::F16, vec![6, 16, 32], &[0; 6 * 16 * 32]),
    );
    assert_eq!(input_error(&wrong_dtype), "value_cache_in");
    let mut missing = inputs.clone();
    missing.remove("slot_mapping");
    assert_eq!(input_error(&missing), "missing slot_mapping");
}
