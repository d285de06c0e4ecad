//! Bad input gives a typed error naming the parameter, never a panic or an out-of-bounds read.

use crate::attention_common::VECTOR_CORES;
use conform_reference::attention::{
    attention, oracle, paged_attention, AttentionConfig, AttentionError, AttentionInputs,
    CacheData, InputLayout, PagedKv, Recipe,
};
use conform_reference::formats::DType;
use conform_reference::kv::{CacheGeometry, KvCacheLayout};
use conform_reference::ops::{self, OpError, ValueDist};
use conform_reference::parallel::Threads;
use proptest::prelude::*;

fn cfg() -> AttentionConfig {
    AttentionConfig::new(DType::Bf16, 2, 4, 8, 4, 2, 16)
}

fn subject(c: AttentionConfig) -> String {
    c.geometry().unwrap_err().subject().to_string()
}

#[test]
fn invalid_configurations_name_the_parameter() {
    assert_eq!(
        subject(AttentionConfig {
            num_key_value_heads: 3,
            ..cfg()
        }),
        "num_key_value_heads"
    );
    assert_eq!(
        subject(AttentionConfig {
            num_heads: 130,
            num_key_value_heads: 2,
            ..cfg()
        }),
        "num_key_value_heads"
    ); // ratio 65 > 64
    assert_eq!(
        subject(AttentionConfig {
            head_dim: 513,
            ..cfg()
        }),
        "head_dim"
    );
    assert_eq!(
        subject(AttentionConfig {
            head_dim: 0,
            ..cfg()
        }),
        "head_dim"
    );
    assert_eq!(
        subject(AttentionConfig {
            num_heads: 0,
            ..cfg()
        }),
        "num_heads"
    );
    assert_eq!(
        subject(AttentionConfig {
            sparse_mode: 1,
            ..cfg()
        }),
        "sparse_mode"
    );
    assert_eq!(subject(AttentionConfig { batch: 0, ..cfg() }), "batch");
    assert_eq!(
        subject(AttentionConfig {
            scale: Some(f64::NAN),
            ..cfg()
        }),
        "scale"
    );
    assert_eq!(
        subject(AttentionConfig {
            actual_seq_lengths_kv: Some(vec![8, 9]),
            ..cfg()
        }),
        "actual_seq_lengths_kv[1]"
    ); // beyond capacity
    assert_eq!(
        subject(AttentionConfig {
            actual_seq_lengths: Some(vec![-1, 2]),
            ..cfg()
        }),
        "actual_seq_lengths[0]"
    );
    assert_eq!(
        subject(AttentionConfig {
            actual_seq_lengths: Some(vec![1]),
            ..cfg()
        }),
        "actual_seq_lengths"
    );
    assert_eq!(
        subject(AttentionConfig {
            input_layout: InputLayout::Tnd,
            ..cfg()
        }),
        "actual_seq_lengths"
    );
    assert_eq!(
        subject(AttentionConfig {
            input_layout: InputLayout::Tnd,
            atten_mask: true,
            ..cfg()
        }),
        "atten_mask"
    );
}

#[test]
fn layout_and_shape_mismatches_name_the_tensor() {
    let g = cfg().geometry().unwrap();
    let q = vec![0.0f32; g.q_len()];
    let k = vec![0.0f32; g.kv_len()];
    let short = vec![0.0f32; g.kv_len() - 1];
    let r = Recipe::ascend_pfa_bf16(DType::Bf16);
    let run = |q: &[f32], k: &[f32], v: &[f32]| {
        let ins = AttentionInputs {
            query: q,
            key: k,
            value: v,
            atten_mask: None,
        };
        let a = attention(&g, &r, &ins, Threads(1)).unwrap_err();
        let o = oracle(&g, &ins, Threads(1)).unwrap_err();
        assert_eq!(a, o);
        a.subject().to_string()
    };
    let long = vec![0.0f32; g.q_len() + 16];
    assert_eq!(run(&long, &k, &k), "query"); // a query of the wrong size
    assert_eq!(run(&q, &short, &k), "key");
    assert_eq!(run(&q, &k, &short), "value");
    let mask = vec![0u8; 3];
    let ins = AttentionInputs {
        query: &q,
        key: &k,
        value: &k,
        atten_mask: Some(&mask),
    };
    assert_eq!(
        attention(&g, &r, &ins, Threads(1)).unwrap_err().subject(),
        "atten_mask"
    );
    let bad = Recipe {
        kv_tile: 0,
        ..r.clone()
    };
    let ins = AttentionInputs {
        query: &q,
        key: &k,
        value: &k,
        atten_mask: None,
    };
    assert_eq!(
        attention(&g, &bad, &ins, Threads(1)).unwrap_err().subject(),
        "kv_tile"
    );
}

fn paged_error(
    table: Vec<i64>,
    lens: Vec<i64>,
    bs: usize,
    layout: KvCacheLayout,
) -> AttentionError {
    let max_blocks = 2;
    let mut c = AttentionConfig::new(DType::Bf16, 2, 1, max_blocks * bs, 4, 2, 16);
    c.actual_seq_lengths_kv = Some(lens);
    let g = match c.geometry() {
        Ok(g) => g,
        Err(e) => return e,
    };
    let cache = CacheGeometry {
        num_blocks: 3,
        block_size: bs,
        kv_heads: 2,
        head_dim: 16,
    };
    let data = vec![0u16; cache.len()];
    let q = vec![0.0f32; g.q_len()];
    let kv = PagedKv {
        key_cache: CacheData::Bf16(&data),
        value_cache: CacheData::Bf16(&data),
        layout,
        cache,
        block_table: &table,
        max_blocks,
    };
    paged_attention(
        &g,
        &Recipe::ascend_ifa_bf16(DType::Bf16).on_vector_cores(Some(VECTOR_CORES)),
        &q,
        None,
        &kv,
        Threads(1),
    )
    .unwrap_err()
}

#[test]
fn bad_block_tables_and_caches_are_typed_errors() {
    let bnbsh = KvCacheLayout::BnBsH;
    assert!(matches!(
        paged_error(vec![0, 1, -1, 0], vec![20, 5], 16, bnbsh),
        AttentionError::BlockOutOfRange {
            batch: 1,
            index: 0,
            value: -1,
            ..
        }
    ));
    assert!(matches!(
        paged_error(vec![0, 3, 1, 0], vec![20, 5], 16, bnbsh),
        AttentionError::BlockOutOfRange {
            batch: 0,
            index: 1,
            value: 3,
            ..
        }
    ));
    // Entries after the used ones are padding and never read.
    let ok = paged_error(
        vec![0, -7, 1, i64::MIN],
        vec![16, 5],
        16,
        KvCacheLayout::VllmValue,
    );
    assert_eq!(ok.subject(), "cache_layout");
    assert_eq!(
        paged_error(vec![0, 1, 2, 0], vec![33, 5], 16, bnbsh).subject(),
        "actual_seq_lengths_kv[0]"
    );
    assert_eq!(
        paged_error(vec![0, 1, 2, 0], vec![3, 5], 8, bnbsh).subject(),
        "block_size"
    );
    assert_eq!(
        paged_error(vec![0, 1, 2], vec![3, 5], 16, bnbsh).subject(),
        "block_table"
    );
}

#[test]
fn op_families_reject_bad_params_with_their_names() {
    let fa = ops::find("fa_prefill").unwrap();
    let base = serde_json::json!({"dtype":"bf16","batch":1,"q_seq":4,"kv_seq":4,"num_heads":4,"head_dim":16});
    fa.describe(&base).unwrap();
    let with = |k: &str, v: serde_json::Value| {
        let mut p = base.clone();
        p[k] = v;
        p
    };
    let param = |e: OpError| match e {
        OpError::InvalidParam { param, .. } => param,
        e => panic!("{e:?}"),
    };
    assert_eq!(
        param(
            fa.describe(&with("num_key_value_heads", 3.into()))
                .unwrap_err()
        ),
        "num_key_value_heads"
    );
    assert_eq!(
        param(fa.describe(&with("head_dim", 1024.into())).unwrap_err()),
        "head_dim"
    );
    assert_eq!(
        param(fa.describe(&with("bogus", 1.into())).unwrap_err()),
        "params"
    );
    assert_eq!(
        param(
            fa.describe(&with("input_layout", "SBH".into()))
                .unwrap_err()
        ),
        "params"
    );
    let mut bits = || 7u64;
    let mut ctx = ops::GenContext::new(&mut bits, ValueDist::default());
    let inputs = fa.generate(&base, &mut ctx).unwrap();
    assert!(matches!(
        fa.run(&base, "no_such_recipe", &inputs, Threads(1)),
        Err(OpError::UnknownRecipe { .. })
    ));
    let mut missing = inputs.clone();
    missing.remove("key");
    assert!(matches!(
        fa.run(&base, "oracle", &missing, Threads(1)),
        Err(OpError::MissingInput { .. })
    ));
    let pa = ops::find("pa_decode").unwrap();
    let pbase = serde_json::json!({"dtype":"bf16","vector_cores":VECTOR_CORES,"batch":2,"num_heads":4,"num_key_value_heads":2,
        "head_dim":16,"block_size":16,"actual_seq_lengths_kv":[20,40]});
    pa.describe(&pbase).unwrap();
    let pwith = |k: &str, v: serde_json::Value| {
        let mut p = pbase.clone();
        p[k] = v;
        p
    };
    assert_eq!(
        param(pa.describe(&pwith("block_size", 8.into())).unwrap_err()),
        "block_size"
    );
    assert_eq!(
        param(pa.describe(&pwith("num_blocks", 2.into())).unwrap_err()),
        "num_blocks"
    );
    assert_eq!(
        param(pa.describe(&pwith("max_blocks", 1.into())).unwrap_err()),
        "actual_seq_lengths_kv[0]"
    );
    assert_eq!(
        param(
            pa.describe(&pwith("actual_seq_lengths_kv", serde_json::json!([1])))
                .unwrap_err()
        ),
        "actual_seq_lengths_kv"
    );
    assert_eq!(
        param(
            pa.describe(&pwith("shared_prefix_blocks", 2.into()))
                .unwrap_err()
        ),
        "shared_prefix_blocks"
    );
    // The decode kernel's tiling without the vector cores of a SoC is an error naming the
    // parameter (the reference holds no count of its own); a recipe with fixed tiles runs.
    let mut ctx = ops::GenContext::new(&mut bits, ValueDist::default());
    let clean = pa.generate(&pbase, &mut ctx).unwrap();
    let mut no_cores = pbase.clone();
    no_cores.as_object_mut().unwrap().remove("vector_cores");
    let e = pa
        .run(&no_cores, "ascend_ifa_bf16", &clean, Threads(1))
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("recipe_hardware"), "{msg}");
    assert_eq!(param(e), "vector_cores");
    pa.run(&no_cores, "vllm_pa_v1", &clean, Threads(1)).unwrap();
    // A corrupted block table in the inputs is an error, not an out-of-bounds read.
    let mut ctx = ops::GenContext::new(&mut bits, ValueDist::default());
    let mut inputs = pa.generate(&pbase, &mut ctx).unwrap();
    let t = inputs.get_mut("block_table").unwrap();
    t.data[0..4].copy_from_slice(&(-5i32).to_le_bytes());
    assert_eq!(
        param(
            pa.run(&pbase, "ascend_ifa_bf16", &inputs, Threads(1))
                .unwrap_err()
        ),
        "block_table"
    );
    assert_eq!(
        param(pa.run(&pbase, "oracle", &inputs, Threads(1)).unwrap_err()),
        "block_table"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Arbitrary (often invalid) configurations and buffers never panic.
    #[test]
    fn arbitrary_configurations_never_panic(
        b in 0usize..3, sq in 0usize..5, sk in 0usize..6, hq in 0usize..5, hkv in 0usize..4,
        d in 0usize..20, mode in 0u32..6, pre in -3i64..4, next in -3i64..4,
        lq in prop::option::of(prop::collection::vec(-2i64..7, 0..4)),
        lk in prop::option::of(prop::collection::vec(-2i64..9, 0..4)),
        layout in prop::sample::select(vec![InputLayout::Bsnd, InputLayout::Bnsd, InputLayout::Bsh, InputLayout::Tnd, InputLayout::BnsdBsnd]),
        qn in 0usize..400, kn in 0usize..400, mask in any::<bool>(),
    ) {
        let mut c = AttentionConfig::new(DType::Bf16, b, sq, sk, hq, hkv, d);
        c.sparse_mode = mode;
        c.pre_tokens = pre;
        c.next_tokens = next;
        c.actual_seq_lengths = lq;
        c.actual_seq_lengths_kv = lk;
        c.input_layout = layout;
        c.atten_mask = mask;
        if let Ok(g) = c.geometry() {
            let q = vec![0.5f32; qn];
            let k = vec![0.25f32; kn];
            let m = [0u8; 30];
            let ins = AttentionInputs { query: &q, key: &k, value: &k, atten_mask: mask.then_some(&m[..]) };
            let _ = attention(&g, &Recipe::ascend_pfa_bf16(DType::Bf16), &ins, Threads(1));
            let _ = oracle(&g, &ins, Threads(1));
        }
    }
}
