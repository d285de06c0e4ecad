//! Attention reference benchmarks (docs/PERFORMANCE.md, "Reference: attention"):
//! - `prefill/ascend_pfa_bf16` and `prefill/oracle`: B=1, Hq=32, Hkv=8, S=2048, D=128, causal
//!   (sparse_mode 3; Lq = Lk so top-left and bottom-right agree), bf16 inputs;
//! - `decode/paged_ascend_ifa_bf16`: PagedAttention decode, B=32, Hq=32, Hkv=8, context 4096,
//!   block_size 128, BnBsH bf16 cache, shuffled block table.
//!
//! All use the machine's available parallelism.

use conform_reference::attention::{
    attention, oracle, paged_attention, AttentionConfig, AttentionInputs, CacheData, PagedKv,
    Recipe,
};
use conform_reference::formats::{bf16, DType, Rounding};
use conform_reference::kv::{CacheGeometry, KvCacheLayout};
use conform_reference::parallel::Threads;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;

struct Bits(conform_reference::splitmix::SplitMix64);
impl Bits {
    fn bf16(&mut self) -> u16 {
        bf16::f32_to_bf16(self.0.sym_f32(), Rounding::RNE)
    }
}

fn prefill(c: &mut Criterion) {
    let mut cfg = AttentionConfig::new(DType::Bf16, 1, 2048, 2048, 32, 8, 128);
    cfg.sparse_mode = 3;
    let g = cfg.geometry().unwrap();
    let mut r = Bits(conform_reference::splitmix::SplitMix64::new(1));
    let mut vals = |n: usize| -> Vec<f32> { (0..n).map(|_| bf16::bf16_to_f32(r.bf16())).collect() };
    let (q, k, v) = (vals(g.q_len()), vals(g.kv_len()), vals(g.kv_len()));
    let ins = AttentionInputs {
        query: &q,
        key: &k,
        value: &v,
        atten_mask: None,
    };
    let recipe = Recipe::preset("ascend_pfa_bf16", DType::Bf16).unwrap();
    let threads = Threads::available();
    let mut group = c.benchmark_group("prefill");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("ascend_pfa_bf16_b1_h32_kv8_s2048_d128_causal", |b| {
        b.iter(|| black_box(attention(&g, &recipe, &ins, threads).unwrap()))
    });
    group.bench_function("oracle_b1_h32_kv8_s2048_d128_causal", |b| {
        b.iter(|| black_box(oracle(&g, &ins, threads).unwrap()))
    });
    group.finish();
}

fn decode(c: &mut Criterion) {
    let (batch, ctx, bs, kvh, d) = (32usize, 4096usize, 128usize, 8usize, 128usize);
    let per_seq = ctx / bs;
    let num_blocks = batch * per_seq + 8;
    let cache = CacheGeometry {
        num_blocks,
        block_size: bs,
        kv_heads: kvh,
        head_dim: d,
    };
    let mut r = Bits(conform_reference::splitmix::SplitMix64::new(2));
    let kc: Vec<u16> = (0..cache.len()).map(|_| r.bf16()).collect();
    let vc: Vec<u16> = (0..cache.len()).map(|_| r.bf16()).collect();
    // A shuffled permutation of blocks (Fisher-Yates).
    let mut perm: Vec<i64> = (0..num_blocks as i64).collect();
    for i in (1..perm.len()).rev() {
        let j = (r.0.next_u64() % (i as u64 + 1)) as usize;
        perm.swap(i, j);
    }
    let table: Vec<i64> = perm[..batch * per_seq].to_vec();
    let mut cfg = AttentionConfig::new(DType::Bf16, batch, 1, per_seq * bs, 32, kvh, d);
    cfg.actual_seq_lengths_kv = Some(vec![ctx as i64; batch]);
    let g = cfg.geometry().unwrap();
    let q: Vec<f32> = (0..g.q_len())
        .map(|_| bf16::bf16_to_f32(r.bf16()))
        .collect();
    let kv = PagedKv {
        key_cache: CacheData::Bf16(&kc),
        value_cache: CacheData::Bf16(&vc),
        layout: KvCacheLayout::BnBsH,
        cache,
        block_table: &table,
        max_blocks: per_seq,
    };
    // The decode kernel's tiling on the SoC of the Atlas 800I A2 profile (its vector cores, as
    // ci/hardware/atlas-800i-a2.toml gives them; 32 x 8 units never split anyway).
    let recipe = Recipe::preset("ascend_ifa_bf16", DType::Bf16)
        .unwrap()
        .on_vector_cores(Some(profile_vector_cores("atlas-800i-a2")));
    let threads = Threads::available();
    let mut group = c.benchmark_group("decode");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("paged_ascend_ifa_bf16_b32_h32_kv8_ctx4096_bs128", |b| {
        b.iter(|| black_box(paged_attention(&g, &recipe, &q, None, &kv, threads).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, prefill, decode);
criterion_main!(benches);

/// `[soc] vector_cores` of the hardware profile `id` (ci/hardware/<id>.toml), the one place the
/// count is written.
fn profile_vector_cores(id: &str) -> usize {
    let path = format!("{}/../ci/hardware/{id}.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .find_map(|l| {
            let (key, value) = l.split_once('=')?;
            (key.trim() == "vector_cores").then(|| value.split('#').next()?.trim().parse().ok())?
        })
        .unwrap_or_else(|| panic!("{path}: no `vector_cores`"))
}
