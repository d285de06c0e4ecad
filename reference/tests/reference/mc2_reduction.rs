//! The all-reduce's dtype addition and ring chunking: `add_in_dtype` (f32 sum, one RNE
//! rounding) equals the exact sum rounded once; ring chunks follow the documented boundaries.

use crate::mc2_common;

use conform_reference::formats::{bf16, f16, DType, Rounding};
use conform_reference::mc2::reduction::{add_in_dtype, ring_chunk_of, ring_chunk_start};
use mc2_common::SplitMix;

fn same(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

#[test]
fn f16_addition_through_f32_is_correctly_rounded() {
    // Every f16 `a` against a sample of `b` (more in release). The f64 sum of two f16 values
    // is exact (their bits span at most 40 binary places), so rounding it once is the oracle.
    let per_a = if cfg!(debug_assertions) { 8 } else { 384 };
    let mut rng = SplitMix::new(0xF16);
    for a_bits in 0..=u16::MAX {
        let a = f16::f16_to_f32(a_bits);
        for _ in 0..per_a {
            let b = f16::f16_to_f32(rng.next_u64() as u16);
            let want = DType::F16.quantize_f64(a as f64 + b as f64, Rounding::RNE) as f32;
            let got = add_in_dtype(a, b, DType::F16);
            assert!(same(got, want), "{a:e} + {b:e}: got {got:e}, want {want:e}");
        }
    }
}

#[test]
fn bf16_addition_through_f32_is_correctly_rounded() {
    // Random pairs whose exponents differ by at most 40, so the f64 sum is exact; plus the
    // overflow edge.
    let n = if cfg!(debug_assertions) {
        200_000
    } else {
        20_000_000
    };
    let mut rng = SplitMix::new(0xBF16);
    for _ in 0..n {
        let a_bits = rng.next_u64() as u16;
        let a = bf16::bf16_to_f32(a_bits);
        let exp = ((a_bits >> 7) & 0xFF) as i64;
        let shift = (rng.next_u64() % 81) as i64 - 40;
        let b_exp = (exp + shift).clamp(0, 254) as u16;
        let b_bits = (rng.next_u64() as u16 & 0x807F) | (b_exp << 7);
        let b = bf16::bf16_to_f32(b_bits);
        let want = DType::Bf16.quantize_f64(a as f64 + b as f64, Rounding::RNE) as f32;
        let got = add_in_dtype(a, b, DType::Bf16);
        assert!(same(got, want), "{a:e} + {b:e}: got {got:e}, want {want:e}");
    }
    let max = bf16::bf16_to_f32(0x7F7F);
    assert_eq!(add_in_dtype(max, max, DType::Bf16), f32::INFINITY);
}

#[test]
fn ring_chunks_follow_the_documented_boundaries() {
    for ranks in [1usize, 2, 4, 8] {
        for len in 1..200usize {
            for idx in 0..len {
                // Brute force: the chunk c with floor(c len / R) <= idx < floor((c+1) len / R).
                let c = (0..ranks)
                    .find(|&c| {
                        ring_chunk_start(c, len, ranks) <= idx
                            && idx < ring_chunk_start(c + 1, len, ranks)
                    })
                    .unwrap();
                assert_eq!(
                    ring_chunk_of(idx, len, ranks),
                    c,
                    "len {len} R {ranks} idx {idx}"
                );
            }
        }
    }
}
