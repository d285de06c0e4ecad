//! PagedAttention through block tables: equal (bitwise) to fused attention on the gathered
//! contiguous K/V, blind to unused slots and to tokens beyond actual_seq_lengths_kv.

use crate::attention_common;

use attention_common::{bits, values, VECTOR_CORES};
use conform_reference::attention::{
    attention, gather_contiguous, paged_attention, AttentionConfig, AttentionInputs, CacheData,
    PagedKv, Recipe,
};
use conform_reference::formats::{bf16, DType, Rounding};
use conform_reference::kv::{CacheGeometry, KvCacheLayout};
use conform_reference::parallel::Threads;
use proptest::prelude::*;

/// A paged case: shuffled non-contiguous blocks, the first `shared` blocks of every sequence
/// shared with sequence 0, unused slots holding `fill`.
struct Case {
    cfg: AttentionConfig,
    layout: KvCacheLayout,
    cache: CacheGeometry,
    table: Vec<i64>,
    max_blocks: usize,
    kc: Vec<u16>,
    vc: Vec<u16>,
    live: Vec<bool>,
    q: Vec<f32>,
}

#[allow(clippy::too_many_arguments)]
fn case(
    seed: u64,
    lens: &[usize],
    q_seq: usize,
    bs: usize,
    shared: usize,
    layout: KvCacheLayout,
    hq: usize,
    hkv: usize,
    d: usize,
) -> Case {
    let mut rng = attention_common::rng(seed);
    let b = lens.len();
    let used: Vec<usize> = lens.iter().map(|l| l.div_ceil(bs)).collect();
    let max_blocks = used.iter().copied().max().unwrap().max(1) + 1;
    let needed: usize = used.iter().sum::<usize>() - shared * (b - 1);
    let num_blocks = needed + 3;
    let cache = CacheGeometry {
        num_blocks,
        block_size: bs,
        kv_heads: hkv,
        head_dim: d,
    };
    let mut perm: Vec<i64> = (0..num_blocks as i64).collect();
    for i in (1..perm.len()).rev() {
        let j = rng.below(i + 1);
        perm.swap(i, j);
    }
    let mut table = vec![-1i64; b * max_blocks];
    let mut next = 0;
    let mut live = vec![false; num_blocks * bs];
    for s in 0..b {
        for i in 0..used[s] {
            let phys = if s > 0 && i < shared {
                table[i]
            } else {
                next += 1;
                perm[next - 1]
            };
            table[s * max_blocks + i] = phys;
            for t in 0..(lens[s] - i * bs).min(bs) {
                live[phys as usize * bs + t] = true;
            }
        }
    }
    let to_bits = |x: Vec<f32>| -> Vec<u16> {
        x.iter()
            .map(|&v| bf16::f32_to_bf16(v, Rounding::RNE))
            .collect()
    };
    let kc = to_bits(values(&mut rng, cache.len(), 2.0, DType::Bf16));
    let vc = to_bits(values(&mut rng, cache.len(), 1.0, DType::Bf16));
    let mut cfg = AttentionConfig::new(DType::Bf16, b, q_seq, max_blocks * bs, hq, hkv, d);
    cfg.actual_seq_lengths_kv = Some(lens.iter().map(|&l| l as i64).collect());
    cfg.softmax_lse_flag = true;
    if q_seq > 1 {
        cfg.sparse_mode = 3;
    }
    let g = cfg.geometry().unwrap();
    let q = values(&mut rng, g.q_len(), 2.0, DType::Bf16);
    Case {
        cfg,
        layout,
        cache,
        table,
        max_blocks,
        kc,
        vc,
        live,
        q,
    }
}

impl Case {
    fn kv<'a>(&'a self, kc: &'a [u16], vc: &'a [u16]) -> PagedKv<'a> {
        PagedKv {
            key_cache: CacheData::Bf16(kc),
            value_cache: CacheData::Bf16(vc),
            layout: self.layout,
            cache: self.cache,
            block_table: &self.table,
            max_blocks: self.max_blocks,
        }
    }

    /// The caches with every slot no valid token occupies set to `fill`.
    fn filled(&self, fill: u16) -> (Vec<u16>, Vec<u16>) {
        let c = &self.cache;
        let (mut k, mut v) = (self.kc.clone(), self.vc.clone());
        for blk in 0..c.num_blocks {
            for s in 0..c.block_size {
                if self.live[blk * c.block_size + s] {
                    continue;
                }
                for h in 0..c.kv_heads {
                    for d in 0..c.head_dim {
                        let o = self.layout.offset(c, blk, s, h, d);
                        k[o] = fill;
                        v[o] = fill;
                    }
                }
            }
        }
        (k, v)
    }
}

const NAN_BF16: u16 = 0x7FC0;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any valid block table (shuffled, non-contiguous, shared prefix blocks, -1 padding after
    /// the used entries): PA == FA on the gathered contiguous K/V with kv_tile = block_size
    /// (the decode kernel's own tiling for `ascend_ifa_bf16`, the same on both paths at these
    /// lengths), bit for bit, for decode and prefill and every preset.
    #[test]
    fn paged_attention_equals_fused_attention_on_gathered_kv_bitwise(
        seed in any::<u64>(),
        lens in prop::collection::vec(1usize..200, 1..4),
        bs in prop::sample::select(vec![16usize, 32, 64]),
        q_seq in prop::sample::select(vec![1usize, 1, 5]),
        bnnbsd in any::<bool>(),
        shared_want in 0usize..3,
    ) {
        let layout = if bnnbsd { KvCacheLayout::BnNBsD } else { KvCacheLayout::BnBsH };
        let min_full = lens.iter().map(|l| l / bs).min().unwrap();
        let shared = shared_want.min(min_full);
        let c = case(seed, &lens, q_seq, bs, shared, layout, 4, 2, 32);
        let g = c.cfg.geometry().unwrap();
        let (kc, vc) = c.filled(NAN_BF16);
        let kv = c.kv(&kc, &vc);
        let (k, v) = gather_contiguous(&g, &kv).unwrap();
        let ins = AttentionInputs { query: &c.q, key: &k, value: &v, atten_mask: None };
        for name in conform_reference::attention::PRESETS {
            let mut r = Recipe::preset(name, DType::Bf16)
                .unwrap()
                .on_vector_cores(Some(VECTOR_CORES));
            let pa = paged_attention(&g, &r, &c.q, None, &kv, Threads(2)).unwrap();
            r.kv_tile = bs;
            let fa = attention(&g, &r, &ins, Threads(1)).unwrap();
            prop_assert_eq!(bits(&pa.out), bits(&fa.out), "{}", name);
            prop_assert_eq!(bits(&pa.lse.unwrap()), bits(&fa.lse.unwrap()), "{}", name);
            prop_assert!(pa.out.iter().all(|x| !x.is_nan()), "{}: NaN leaked", name);
        }
    }

    /// NaN (or any other value) in unused slots and beyond actual_seq_lengths_kv never changes
    /// the output, bitwise.
    #[test]
    fn unused_slots_and_tokens_beyond_kv_length_never_influence_the_output(
        seed in any::<u64>(),
        lens in prop::collection::vec(1usize..150, 1..4),
        bs in prop::sample::select(vec![16usize, 48]),
        bnnbsd in any::<bool>(),
    ) {
        let layout = if bnnbsd { KvCacheLayout::BnNBsD } else { KvCacheLayout::BnBsH };
        let c = case(seed, &lens, 1, bs, 0, layout, 4, 1, 16);
        let g = c.cfg.geometry().unwrap();
        let r = Recipe::ascend_ifa_bf16(DType::Bf16).on_vector_cores(Some(VECTOR_CORES));
        let (kn, vn) = c.filled(NAN_BF16);
        let (ki, vi) = c.filled(0x7F80); // +inf
        let a = paged_attention(&g, &r, &c.q, None, &c.kv(&kn, &vn), Threads(1)).unwrap();
        let b = paged_attention(&g, &r, &c.q, None, &c.kv(&ki, &vi), Threads(2)).unwrap();
        let e = paged_attention(&g, &r, &c.q, None, &c.kv(&c.kc, &c.vc), Threads(7)).unwrap();
        prop_assert_eq!(bits(&a.out), bits(&e.out));
        prop_assert_eq!(bits(&b.out), bits(&e.out));
        prop_assert!(a.out.iter().all(|x| !x.is_nan()));
    }
}

#[test]
fn paged_decode_is_independent_of_thread_count() {
    let c = case(
        3,
        &[300, 77, 512, 129],
        1,
        64,
        1,
        KvCacheLayout::BnBsH,
        8,
        2,
        128,
    );
    let g = c.cfg.geometry().unwrap();
    let (kc, vc) = c.filled(NAN_BF16);
    let kv = c.kv(&kc, &vc);
    for name in conform_reference::attention::PRESETS {
        let r = Recipe::preset(name, DType::Bf16)
            .unwrap()
            .on_vector_cores(Some(VECTOR_CORES));
        let base = paged_attention(&g, &r, &c.q, None, &kv, Threads(1)).unwrap();
        for t in [2, 7] {
            let x = paged_attention(&g, &r, &c.q, None, &kv, Threads(t)).unwrap();
            assert_eq!(bits(&base.out), bits(&x.out), "{name} threads {t}");
        }
    }
}

/// The decode kernel's tiling under PagedAttention (docs/ascend.md, `fa.ascend_ifa_bf16.kv_tile`
/// and `.split`): `ascend_ifa_bf16` equals the same recipe with that tiling written out as fixed
/// fields, bit for bit, and differs from the block-size tiling conform modelled before.
#[test]
fn the_ifa_preset_tiles_and_splits_as_the_decode_kernel() {
    use conform_reference::attention::recipe::{Combine, KvTiling, SplitKv};
    let fixed = |tile: usize, split: Option<usize>| Recipe {
        kv_tiling: KvTiling::Fixed,
        kv_tile: tile,
        split: split.map(|partition| SplitKv {
            partition,
            partial_dtype: DType::F32,
            partial_rounding: Rounding::RNE,
            combine: Combine::AscendSumMax,
        }),
        ..Recipe::ascend_ifa_bf16(DType::Bf16)
    };
    // (lengths, query heads, KV heads, block size, the kernel's tile, keys per split):
    // - 2 (batch x KV heads) units on 48 vector cores, one query head per KV head, 1500 keys:
    //   2 splits of 750 keys rounded up to 47 blocks of 16; each split one tile;
    // - 20 units keep the cores busy: no split; 8 query heads per KV head: 4096-key tiles;
    // - 1024 keys under PagedAttention never split: one tile of the table capacity.
    type Shape<'a> = (&'a [usize], usize, usize, usize, usize, Option<usize>);
    let shapes: [Shape; 3] = [
        (&[1500], 2, 2, 16, 752, Some(752)),
        (&[5000; 10], 16, 2, 64, 4096, None),
        (&[1024], 2, 2, 16, 1040, None),
    ];
    for (lens, hq, hkv, bs, tile, split) in shapes {
        let c = case(11, lens, 1, bs, 0, KvCacheLayout::BnBsH, hq, hkv, 16);
        let g = c.cfg.geometry().unwrap();
        let kv = c.kv(&c.kc, &c.vc);
        let run = |r: &Recipe| paged_attention(&g, r, &c.q, None, &kv, Threads(2)).unwrap();
        let ifa = run(&Recipe::ascend_ifa_bf16(DType::Bf16).on_vector_cores(Some(VECTOR_CORES)));
        // A fixed recipe under PagedAttention tiles by the block: the written-out tiling runs
        // on the gathered contiguous K/V.
        let (k, v) = gather_contiguous(&g, &kv).unwrap();
        let ins = AttentionInputs {
            query: &c.q,
            key: &k,
            value: &v,
            atten_mask: None,
        };
        let contiguous = |r: &Recipe| attention(&g, r, &ins, Threads(1)).unwrap();
        let want = contiguous(&fixed(tile, split));
        assert_eq!(bits(&ifa.out), bits(&want.out), "{lens:?}");
        assert_eq!(bits(&ifa.lse.clone().unwrap()), bits(&want.lse.unwrap()));
        // The old model (tiles of one cache block, no split) gives other bits.
        let old = run(&fixed(bs, None));
        assert_ne!(bits(&ifa.out), bits(&old.out), "{lens:?}");
        if split.is_some() {
            // The split is live: the unsplit kernel tile gives other bits.
            let unsplit = contiguous(&fixed(tile, None));
            assert_ne!(bits(&ifa.out), bits(&unsplit.out), "{lens:?}");
        }
    }
}

/// The contradiction issue 40 fixed: `ascend_ifa_bf16` gave a row without keys output 0 and LSE
/// +inf (the prompt kernel's row-invalid correction), but the decode kernel accepts
/// inner_precise 0 and 1 only and has no such correction: an empty KV goes through
/// `InitAllZeroOutput` (output 0, LSE -3.40e38), and a fully masked row is computed like any
/// other, its masked scores all at -1e12, so P = 1 on every key: the mean of V, LSE ln(n) -
/// 1e12. The masked row's output equals, bit for bit, the same recipe's output for a query of
/// zeros without the mask (every score 0, P = 1 in the same order). The old model fails here.
#[test]
fn the_decode_kernel_has_no_row_invalid_correction() {
    use conform_reference::ops::{self, Tensor};
    use serde_json::json;
    let params = json!({"dtype": "bf16", "batch": 2, "num_heads": 2, "num_key_value_heads": 1,
        "head_dim": 32, "block_size": 16, "actual_seq_lengths_kv": [0, 40],
        "atten_mask": true, "softmax_lse_flag": true, "vector_cores": VECTOR_CORES});
    let fam = ops::find("pa_decode").unwrap();
    let ins = crate::op_runs::generate(
        "pa_decode",
        &params,
        &[],
        7,
        0x1F,
        Default::default(),
        "ascend_ifa_bf16",
    )
    .unwrap();
    // Mask every key of sequence 1.
    let mut masked = ins.clone();
    let m = &ins["atten_mask"];
    let width = m.shape[2];
    let mut bytes = m.data.clone();
    bytes[width..2 * width].fill(1);
    masked.insert(
        "atten_mask".into(),
        Tensor {
            data: bytes,
            ..m.clone()
        },
    );
    let out = fam
        .run(&params, "ascend_ifa_bf16", &masked, Threads(1))
        .unwrap();
    let lse = out["softmax_lse"].to_f64_vec();
    let o = out["attention_out"].bits16().unwrap();
    let per_batch = 2 * 32;
    // Sequence 0: no key at all.
    assert!(
        o[..per_batch].iter().all(|&b| b & 0x7FFF == 0),
        "empty KV output"
    );
    for h in 0..2 {
        assert_eq!((lse[h] as f32).to_bits(), 0xFF7F_C99E, "empty KV lse");
        assert_eq!(
            lse[2 + h] as f32,
            (40.0f32).ln() + -1.0e12,
            "masked row lse"
        );
    }
    // Sequence 1: the mean of V, computed as the kernel does.
    let mut zero_q = ins.clone();
    let q = &ins["query"];
    let mut qb = q.bits16().unwrap();
    qb[per_batch..2 * per_batch].fill(0);
    zero_q.insert(
        "query".into(),
        Tensor::from_bits16(q.dtype, q.shape.clone(), &qb),
    );
    let m0 = &ins["atten_mask"];
    zero_q.insert(
        "atten_mask".into(),
        Tensor {
            data: vec![0; m0.data.len()],
            ..m0.clone()
        },
    );
    let mean = fam
        .run(&params, "ascend_ifa_bf16", &zero_q, Threads(1))
        .unwrap();
    assert_eq!(
        &o[per_batch..],
        &mean["attention_out"].bits16().unwrap()[per_batch..],
        "the fully masked row is the mean of V"
    );
    assert!(o[per_batch..].iter().any(|&b| b & 0x7FFF != 0));
}
