//! Measure this CPU's peak f32 FMA throughput and main-memory read bandwidth, for the
//! `ci/hardware/this-cpu.toml` profile:
//!
//! ```sh
//! cargo run -p conform-harness --release --example cpu_peaks
//! ```
//!
//! Every hardware thread runs the kernel at once; the best of several repetitions is
//! reported (other load on a shared machine only lowers the figures). The FMA kernel keeps
//! 12 independent chains of 256-bit FMAs so that latency is hidden (AVX2+FMA; a CPU whose
//! 512-bit FMA units run at full rate has twice this peak with AVX-512, which std::arch only
//! offers on toolchains newer than this workspace's minimum). The bandwidth kernel streams a 512 MiB buffer (far beyond the
//! last-level cache) and sums it.

use std::time::Instant;

const CHAINS: usize = 12;
const LANES: usize = 8;

fn fma_portable(iters: u64, x: f32, y: f32) -> f32 {
    let mut acc = [[1.0f32; LANES]; CHAINS];
    for _ in 0..iters {
        for chain in acc.iter_mut() {
            for v in chain.iter_mut() {
                *v = v.mul_add(x, y);
            }
        }
    }
    acc.iter().flatten().sum()
}

/// 12 independent chains of 256-bit FMAs (8 f32 lanes each). Compiled with AVX2 and FMA
/// enabled: the caller checks that the CPU has both.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn fma_avx2(iters: u64, x: f32, y: f32) -> f32 {
    use std::arch::x86_64::*;
    let vx = _mm256_set1_ps(x);
    let vy = _mm256_set1_ps(y);
    let mut acc = [_mm256_set1_ps(1.0); CHAINS];
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = _mm256_fmadd_ps(*a, vx, vy);
        }
    }
    let mut out = [0.0f32; LANES];
    let mut total = 0.0;
    for a in acc {
        // SAFETY: `out` is [f32; LANES] with LANES = 8: the unaligned 8-float store fills it.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), a) };
        total += out.iter().sum::<f32>();
    }
    total
}

fn fma(iters: u64, x: f32, y: f32) -> (f32, &'static str) {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: the callee's only requirement is AVX2 and FMA, both detected at run time
            // just above.
            return (unsafe { fma_avx2(iters, x, y) }, "avx2+fma (256-bit)");
        }
    }
    (fma_portable(iters, x, y), "portable")
}

fn main() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let iters: u64 = 50_000_000;
    let mut best_flops = 0.0f64;
    let mut isa = "";
    for _ in 0..5 {
        let start = Instant::now();
        let results: Vec<(f32, &'static str)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        fma(
                            std::hint::black_box(iters),
                            std::hint::black_box(0.999_999),
                            std::hint::black_box(1e-7),
                        )
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        let secs = start.elapsed().as_secs_f64();
        isa = results[0].1;
        std::hint::black_box(results);
        let flops = 2.0 * (CHAINS * LANES) as f64 * iters as f64 * threads as f64 / secs;
        best_flops = best_flops.max(flops);
    }

    let len: usize = 512 * 1024 * 1024 / 4;
    let buffer: Vec<f32> = (0..len).map(|i| (i % 7) as f32).collect();
    let chunk = len.div_ceil(threads);
    let mut best_bw = 0.0f64;
    for _ in 0..5 {
        let start = Instant::now();
        let sums: Vec<f32> = std::thread::scope(|s| {
            let handles: Vec<_> = buffer
                .chunks(chunk)
                .map(|part| {
                    s.spawn(move || {
                        let mut lanes = [0.0f32; 16];
                        for block in part.chunks_exact(16) {
                            for (l, v) in lanes.iter_mut().zip(block) {
                                *l += v;
                            }
                        }
                        lanes.iter().sum::<f32>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("thread"))
                .collect()
        });
        let secs = start.elapsed().as_secs_f64();
        std::hint::black_box(sums);
        best_bw = best_bw.max((len * 4) as f64 / secs);
    }
    println!("threads: {threads}");
    println!("f32 FMA kernel: {isa}");
    println!("peak f32: {:.1} GFLOP/s", best_flops / 1e9);
    println!("memory read bandwidth: {:.1} GB/s", best_bw / 1e9);
}
