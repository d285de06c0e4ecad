//! Throughput of the reference FP4 dequantisers over 64 Mi elements (a 4096 x 16384 weight),
//! writing BF16 into a preallocated buffer with all available threads.
//!
//! Run: `cargo bench -p conform-reference --bench dequant`. Figures are recorded in
//! docs/PERFORMANCE.md.

use conform_reference::dequant::{mxfp4, nvfp4, Fp4DequantRecipe};
use conform_reference::parallel::Threads;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

const N: usize = 4096;
const K: usize = 16384;

fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

fn dequant(c: &mut Criterion) {
    let threads = Threads::available();
    let packed = bytes(N * K / 2, 1);
    let mut out = vec![0u16; N * K];
    let mut group = c.benchmark_group("dequant_64Mi");
    group.throughput(Throughput::Elements((N * K) as u64));
    group.sample_size(10);

    let mx = Fp4DequantRecipe::mx_ocp();
    // Realistic E8M0 scales around 2^0 (115..=138), one per 32 elements.
    let mx_scales: Vec<u8> = bytes(N * K / 32, 2).iter().map(|b| 115 + b % 24).collect();
    group.bench_function("mxfp4_to_bf16", |b| {
        b.iter(|| {
            mxfp4::dequantize_into(
                black_box(&packed),
                black_box(&mx_scales),
                N,
                K,
                &mx,
                threads,
                &mut out,
            )
            .unwrap()
        })
    });

    // Finite positive E4M3 block scales, one per 16 elements, and an f32 global scale.
    let nv_scales: Vec<u8> = bytes(N * K / 16, 3).iter().map(|b| b % 0x7F).collect();
    for name in ["vllm_nvfp4", "ascend_qingcheng_fp4_dequant"] {
        let recipe = Fp4DequantRecipe::preset(name).unwrap();
        group.bench_function(format!("nvfp4_to_bf16_{name}"), |b| {
            b.iter(|| {
                nvfp4::dequantize_into(
                    black_box(&packed),
                    black_box(&nv_scales),
                    black_box(0.000_372_f32),
                    N,
                    K,
                    &recipe,
                    threads,
                    &mut out,
                )
                .unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, dequant);
criterion_main!(benches);
