//! The blocked matmul kernels against their scalar definitions, bit for bit, on shapes that
//! cross every block boundary (K passes of 512, 128 x 128 cache blocks, 4 x 4 tiles, oracle
//! panels of 128 and strips of 512), for 1, 2 and 7 threads and whatever vector forms this
//! process runs (CI runs this file again with `CONFORM_NO_AVX512=1` and `CONFORM_NO_SIMD=1`);
//! and the two ops built on them — MC2 MatmulAllReduce and W4A16 — against element-by-element
//! models written from their documented definitions.

use crate::mc2_common;

use conform_reference::dot::{dot_f32, dot_f64};
use conform_reference::formats::DType;
use conform_reference::gemm::{matmul_lanes16, matmul_sequential_f64, BLayout};
use conform_reference::mc2::reduction::reduce_in_dtype;
use conform_reference::mc2::{
    matmul_all_reduce_tiled, Accumulation, MatmulAllReduceInputs, Mc2Numerics, Mc2Shape,
    RankOperands, ReductionOrder,
};
use conform_reference::parallel::Threads;
use mc2_common::SplitMix;

/// f32 values over 40 binades, both signs, signed zeros, and (with `specials`) infinities and
/// NaN: any change of association or of a signed-zero lane shows in the bits.
fn values(len: usize, seed: u64, specials: bool) -> Vec<f32> {
    let mut r = SplitMix::new(seed);
    (0..len)
        .map(|_| {
            let z = r.next_u64();
            match z % 97 {
                0 => -0.0,
                1 => 0.0,
                2 if specials => f32::INFINITY,
                3 if specials => f32::NAN,
                _ => {
                    let mant = 1.0 + ((z >> 8) & 0x7F_FFFF) as f32 / (1u32 << 23) as f32;
                    let exp = ((z >> 40) % 40) as i32 - 20;
                    let sign = if (z >> 63) == 0 { 1.0 } else { -1.0 };
                    sign * mant * 2f32.powi(exp)
                }
            }
        })
        .collect()
}

/// The bits, with every NaN as one value: which NaN an f32 sum of two NaNs (or `inf - inf`)
/// yields is the CPU's choice (x86 and Arm differ in the default NaN's sign) and the compiler's
/// (it may commute an addition), in `dot_f32` as much as in the blocked kernel.
fn canonical(v: f32) -> u32 {
    if v.is_nan() {
        0x7FC0_0000
    } else {
        v.to_bits()
    }
}

const SHAPES: [(usize, usize, usize); 6] = [
    (1, 1, 1),
    (5, 3, 17),
    (9, 130, 530),
    (131, 7, 1030),
    (130, 260, 64),
    (4, 129, 1),
];

#[test]
fn lanes16_is_dot_f32_per_element_for_every_thread_count() {
    for (s, &(m, n, k)) in SHAPES.iter().enumerate() {
        let specials = s % 2 == 1;
        let a = values(m * k, 10 + s as u64, specials);
        let b = values(n * k, 20 + s as u64, specials);
        let want: Vec<u32> = (0..m * n)
            .map(|e| {
                canonical(dot_f32(
                    &a[e / n * k..(e / n + 1) * k],
                    &b[e % n * k..(e % n + 1) * k],
                ))
            })
            .collect();
        for t in [1, 2, 7] {
            let got: Vec<u32> = matmul_lanes16(&a, &b, m, n, k, Threads(t))
                .iter()
                .map(|&v| canonical(v))
                .collect();
            assert!(
                got == want,
                "m{m} n{n} k{k} threads {t}: bits differ from dot_f32"
            );
        }
    }
}

#[test]
fn sequential_f64_is_the_scalar_f64_loop_for_both_layouts_and_every_thread_count() {
    for (s, &(m, n, k)) in SHAPES.iter().chain(&[(3, 600, 300)]).enumerate() {
        let a = values(m * k, 30 + s as u64, false);
        let b: Vec<f64> = values(k * n, 40 + s as u64, false)
            .iter()
            .map(|&v| v as f64 * (1.0 + 2f64.powi(-30)))
            .collect();
        let bt: Vec<f64> = (0..n * k).map(|x| b[(x % k) * n + x / k]).collect();
        let want: Vec<u64> = (0..m * n)
            .map(|e| {
                let (i, j) = (e / n, e % n);
                let ai: Vec<f64> = a[i * k..(i + 1) * k].iter().map(|&v| v as f64).collect();
                dot_f64(&ai, &bt[j * k..(j + 1) * k]).to_bits()
            })
            .collect();
        for t in [1, 2, 7] {
            for (layout, bm) in [(BLayout::KByN, &b), (BLayout::NByK, &bt)] {
                let got: Vec<u64> = matmul_sequential_f64(&a, bm, layout, m, n, k, Threads(t))
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                assert!(
                    got == want,
                    "m{m} n{n} k{k} {layout:?} threads {t}: bits differ"
                );
            }
        }
    }
}

/// MatmulAllReduce element by element from its documented definition (epilogue after the
/// reduction, one tile): `p_r = dot_f32(x1_r[i, :], x2_r[:, j])`, then the kernel or golden
/// accumulation.
fn mc2_model(x1: &[Vec<f32>], x2: &[Vec<f32>], shape: Mc2Shape, nm: &Mc2Numerics) -> Vec<u32> {
    let Mc2Shape { m, k, n } = shape;
    let dt = nm.dtype;
    (0..m * n)
        .map(|e| {
            let (i, j) = (e / n, e % n);
            let p: Vec<f32> = (0..x1.len())
                .map(|r| {
                    let col: Vec<f32> = (0..k).map(|kk| x2[r][kk * n + j]).collect();
                    dot_f32(&x1[r][i * k..(i + 1) * k], &col)
                })
                .collect();
            match nm.accumulation {
                Accumulation::Kernel(order) => {
                    let q: Vec<f32> = p
                        .iter()
                        .map(|&v| dt.quantize_f32(v, nm.output_rounding))
                        .collect();
                    let chunk =
                        conform_reference::mc2::reduction::ring_chunk_of(e, m * n, x1.len());
                    reduce_in_dtype(&q, order, chunk, dt).to_bits()
                }
                Accumulation::HighPrecisionGolden => {
                    let s = p[1..].iter().fold(p[0], |s, &v| s + v);
                    dt.quantize_f32(s, nm.output_rounding).to_bits()
                }
            }
        })
        .collect()
}

#[test]
fn mc2_equals_its_element_model_across_blocks_and_threads() {
    let shape = Mc2Shape::new(9, 530, 140);
    for dtype in [DType::F16, DType::Bf16] {
        let mut rng = SplitMix::new(5);
        let x1: Vec<Vec<f32>> = (0..4)
            .map(|_| mc2_common::tensor(&mut rng, shape.m * shape.k, dtype))
            .collect();
        let x2: Vec<Vec<f32>> = (0..4)
            .map(|_| mc2_common::tensor(&mut rng, shape.k * shape.n, dtype))
            .collect();
        let ranks: Vec<RankOperands> = x1
            .iter()
            .zip(&x2)
            .map(|(a, b)| RankOperands { x1: a, x2: b })
            .collect();
        let ins = MatmulAllReduceInputs {
            shape,
            ranks: &ranks,
            bias: None,
            x3: None,
        };
        let mut all: Vec<Mc2Numerics> = ReductionOrder::ALL
            .iter()
            .map(|&o| Mc2Numerics::kernel(dtype, o))
            .collect();
        all.push(Mc2Numerics::high_precision(dtype));
        for nm in all {
            let want = mc2_model(&x1, &x2, shape, &nm);
            for t in [1, 2, 7] {
                let got: Vec<u32> =
                    matmul_all_reduce_tiled(&ins, &nm, &[shape.m], &[0], Threads(t))
                        .unwrap()
                        .iter()
                        .map(|v| v.to_bits())
                        .collect();
                assert!(got == want, "{dtype:?} {:?} threads {t}", nm.accumulation);
            }
        }
    }
}
