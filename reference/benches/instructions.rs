//! Deterministic instruction counts of the reference's hot loops, measured under valgrind's
//! callgrind by gungraun (the renamed iai-callgrind). Unlike wall time on a shared 2-core
//! machine, the counts do not move with load, so they can gate a change.
//!
//! Needs valgrind and the runner at exactly the library's version:
//!
//! ```sh
//! cargo install gungraun-runner --version 0.18.2
//! cargo bench -p conform-reference --bench instructions
//! ```
//!
//! See docs/perf.md for saving a baseline and failing on a regression.

use std::hint::black_box;

use conform_reference::dot::dot_f32;
use conform_reference::formats::bf16::{f32_slice_to_bf16, f32_to_bf16};
use conform_reference::formats::Rounding;
use gungraun::{library_benchmark, library_benchmark_group, main};

/// Deterministic f32 inputs spread over many binades, with ties for the rounding paths.
fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            // finite, |x| < 2: the top exponent bit is cleared (normals and subnormals)
            f32::from_bits(state & 0xBF7F_FFFF)
        })
        .collect()
}

fn dot_inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    (values(n, 1), values(n, 2))
}

#[library_benchmark]
#[bench::n1024(dot_inputs(1024))]
#[bench::n65536(dot_inputs(65536))]
fn bench_dot_f32(inputs: (Vec<f32>, Vec<f32>)) -> f32 {
    black_box(dot_f32(black_box(&inputs.0), black_box(&inputs.1)))
}

#[library_benchmark]
#[bench::n65536(values(65536, 3))]
fn bench_f32_to_bf16_rne(src: Vec<f32>) -> Vec<u16> {
    let mut out = vec![0u16; src.len()];
    f32_slice_to_bf16(black_box(&src), &mut out, Rounding::RNE);
    black_box(out)
}

#[library_benchmark]
#[bench::n4096(values(4096, 4))]
fn bench_f32_to_bf16_scalar_loop(src: Vec<f32>) -> u32 {
    // the per-element entry point, as the kernels call it
    let mut acc = 0u32;
    for &x in black_box(&src) {
        acc = acc.wrapping_add(u32::from(f32_to_bf16(x, Rounding::RNA)));
    }
    black_box(acc)
}

library_benchmark_group!(
    name = reference_hot_loops;
    benchmarks = bench_dot_f32, bench_f32_to_bf16_rne, bench_f32_to_bf16_scalar_loop
);

main!(library_benchmark_groups = reference_hot_loops);
