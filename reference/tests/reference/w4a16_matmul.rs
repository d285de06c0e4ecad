//! W4A16 matmul: against an f64 oracle within the derived error bound of the documented f32
//! order, bitwise identical across thread counts, and typed errors for bad shapes.

use crate::common;

use common::{half_value, Rng, BF16};
use conform_reference::dequant::packing::pack;
use conform_reference::dequant::{mxfp4, nvfp4, DequantError, Fp4DequantRecipe};
use conform_reference::formats::bf16::{bf16_to_f32, f32_to_bf16};
use conform_reference::formats::Rounding;
use conform_reference::matmul::w4a16::{matmul, Fp4Scales, Fp4Weights};
use conform_reference::parallel::Threads;

struct Case {
    m: usize,
    n: usize,
    k: usize,
    x: Vec<u16>,
    packed: Vec<u8>,
    scales: Vec<u8>,
}

fn case(m: usize, n: usize, k: usize, group: usize, nv: bool, seed: u64) -> (Case, Vec<u8>) {
    let mut rng = Rng(seed);
    let x: Vec<u16> = (0..m * k)
        .map(|_| {
            let v = (rng.below(2001) as f32 - 1000.0) / 250.0;
            f32_to_bf16(v, Rounding::RNE)
        })
        .collect();
    let codes: Vec<u8> = (0..n * k).map(|_| rng.below(16) as u8).collect();
    let packed = pack(&codes, &Fp4DequantRecipe::mx_ocp().layout).unwrap();
    let scales: Vec<u8> = (0..n * k / group)
        .map(|_| {
            if nv {
                0x30 + rng.below(0x20) as u8 // E4M3 0.125 .. 3.75
            } else {
                124 + rng.below(6) as u8 // 2^-3 .. 2^2
            }
        })
        .collect();
    (
        Case {
            m,
            n,
            k,
            x,
            packed,
            scales,
        },
        codes,
    )
}

/// Checks `y` against sum_k x[m,k] * w[n,k] computed in f64 (products of BF16 values are exact
/// in f64; the f64 sum's own error is below 2^-40 of the bound). The bound of the f32 order:
/// each term goes through one product rounding, ceil(k/16) lane additions and 4 tree levels, so
/// |y32 - y| <= gamma_d * sum|x w| with d = ceil(k/16) + 5 and gamma_d = d u / (1 - d u),
/// u = 2^-24; the final RNE rounding to BF16 adds at most 2^-8 |y32| (+ 2^-134 absolute).
fn check_against_f64(c: &Case, w: &[u16], y: &[u16]) -> f64 {
    let u = 2f64.powi(-24);
    let d = c.k.div_ceil(16) as f64 + 5.0;
    let gamma = d * u / (1.0 - d * u);
    let mut worst: f64 = 0.0;
    for i in 0..c.m {
        for j in 0..c.n {
            let mut exact = 0.0f64;
            let mut abs = 0.0f64;
            for kk in 0..c.k {
                let p = bf16_to_f32(c.x[i * c.k + kk]) as f64 * bf16_to_f32(w[j * c.k + kk]) as f64;
                exact += p;
                abs += p.abs();
            }
            let got = half_value(y[i * c.n + j], BF16);
            let acc_bound = gamma * abs;
            let bound = acc_bound + 2f64.powi(-8) * (exact.abs() + acc_bound) + 2f64.powi(-134);
            let err = (got - exact).abs();
            assert!(
                err <= bound,
                "y[{i},{j}] = {got} vs {exact}: error {err:e} > bound {bound:e}"
            );
            if bound > 0.0 {
                worst = worst.max(err / bound);
            }
        }
    }
    worst
}

#[test]
fn w4a16_mxfp4_matches_f64_oracle_within_derived_bound() {
    let (c, _) = case(5, 7, 32 * 13, 32, false, 1);
    let recipe = Fp4DequantRecipe::mx_ocp();
    let w = mxfp4::dequantize(&c.packed, &c.scales, c.n, c.k, &recipe, Threads(1)).unwrap();
    let weights = Fp4Weights {
        packed: &c.packed,
        scales: Fp4Scales::Mx { scales: &c.scales },
        n: c.n,
        k: c.k,
    };
    let y = matmul(&c.x, c.m, &weights, &recipe, Threads(2)).unwrap();
    let worst = check_against_f64(&c, &w, &y);
    eprintln!("worst error / bound = {worst:.3}");
}

#[test]
fn w4a16_nvfp4_every_preset_matches_f64_oracle_within_derived_bound() {
    for name in ["vllm_nvfp4", "ascend_qingcheng_w4a16"] {
        let recipe = Fp4DequantRecipe::preset(name).unwrap();
        let (c, _) = case(3, 9, 16 * 37, 16, true, 2);
        let g = 0.0371f32;
        let w = nvfp4::dequantize(&c.packed, &c.scales, g, c.n, c.k, &recipe, Threads(1)).unwrap();
        let weights = Fp4Weights {
            packed: &c.packed,
            scales: Fp4Scales::Nv {
                block_scales: &c.scales,
                global_scale: g,
            },
            n: c.n,
            k: c.k,
        };
        let y = matmul(&c.x, c.m, &weights, &recipe, Threads(1)).unwrap();
        check_against_f64(&c, &w, &y);
    }
}

#[test]
fn w4a16_is_bitwise_identical_for_1_2_and_7_threads() {
    let (c, _) = case(33, 45, 32 * 9, 16, true, 3);
    let recipe = Fp4DequantRecipe::vllm_nvfp4();
    let weights = Fp4Weights {
        packed: &c.packed,
        scales: Fp4Scales::Nv {
            block_scales: &c.scales,
            global_scale: 1.5,
        },
        n: c.n,
        k: c.k,
    };
    let one = matmul(&c.x, c.m, &weights, &recipe, Threads(1)).unwrap();
    for t in [2, 7] {
        let other = matmul(&c.x, c.m, &weights, &recipe, Threads(t)).unwrap();
        assert_eq!(one, other, "threads {t}");
    }
}

#[test]
fn w4a16_bad_activation_length_is_a_typed_error() {
    let (c, _) = case(2, 3, 32, 32, false, 4);
    let weights = Fp4Weights {
        packed: &c.packed,
        scales: Fp4Scales::Mx { scales: &c.scales },
        n: c.n,
        k: c.k,
    };
    let r = Fp4DequantRecipe::mx_ocp();
    assert_eq!(
        matmul(&c.x[1..], c.m, &weights, &r, Threads(1)),
        Err(DequantError::WrongLength {
            param: "x",
            expected: 64,
            actual: 63
        })
    );
    let short = Fp4Weights {
        packed: &c.packed[1..],
        ..weights
    };
    assert!(matches!(
        matmul(&c.x, c.m, &short, &r, Threads(1)),
        Err(DequantError::WrongLength {
            param: "packed",
            ..
        })
    ));
}
