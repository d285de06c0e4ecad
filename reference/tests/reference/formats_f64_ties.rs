//! Targeted f64 -> bf16 / f16 / f32 cases in every rounding mode: exact ties, near ties just
//! beyond any intermediate precision (so a double rounding through f32 would be caught),
//! subnormal boundaries, overflow, NaN, infinities and signed zeros.

use conform_reference::formats::bf16::f64_to_bf16;
use conform_reference::formats::f16::{f16_to_f64, f64_to_f16};
use conform_reference::formats::f32::f64_to_f32;
use conform_reference::formats::{Rounding, RoundingMode};

struct Target {
    name: &'static str,
    /// Sign bit of the encoding.
    sign: u64,
    /// Largest finite magnitude code; the next code is infinity.
    max: u64,
    decode: fn(u64) -> f64,
    encode: fn(f64, Rounding) -> u64,
    /// log2 of the relative offset used for near ties: beyond f32's precision for the 16-bit
    /// targets, and beyond f64-to-f32's for f32.
    near: i32,
}

fn bf16_dec(c: u64) -> f64 {
    f32::from_bits((c as u32) << 16) as f64
}
fn bf16_enc(x: f64, r: Rounding) -> u64 {
    f64_to_bf16(x, r) as u64
}
fn f16_dec(c: u64) -> f64 {
    f16_to_f64(c as u16)
}
fn f16_enc(x: f64, r: Rounding) -> u64 {
    f64_to_f16(x, r) as u64
}
fn f32_dec(c: u64) -> f64 {
    f32::from_bits(c as u32) as f64
}
fn f32_enc(x: f64, r: Rounding) -> u64 {
    f64_to_f32(x, r).to_bits() as u64
}

const TARGETS: [Target; 3] = [
    Target {
        name: "bf16",
        sign: 0x8000,
        max: 0x7F7F,
        decode: bf16_dec,
        encode: bf16_enc,
        near: -40,
    },
    Target {
        name: "f16",
        sign: 0x8000,
        max: 0x7BFF,
        decode: f16_dec,
        encode: f16_enc,
        near: -40,
    },
    Target {
        name: "f32",
        sign: 0x8000_0000,
        max: 0x7F7F_FFFF,
        decode: f32_dec,
        encode: f32_enc,
        near: -27,
    },
];

/// The expected code for a value strictly between magnitudes `lo` and `lo + 1` (`above_mid`:
/// Some(true) above the midpoint, Some(false) below, None exactly on it).
fn expected(lo: u64, neg: bool, above_mid: Option<bool>, mode: RoundingMode) -> u64 {
    let hi = lo + 1;
    match mode {
        RoundingMode::NearestTiesToEven => match above_mid {
            Some(true) => hi,
            Some(false) => lo,
            None => {
                if lo.is_multiple_of(2) {
                    lo
                } else {
                    hi
                }
            }
        },
        RoundingMode::NearestTiesAway => match above_mid {
            Some(false) => lo,
            _ => hi,
        },
        RoundingMode::TowardZero => lo,
        RoundingMode::TowardPositive => {
            if neg {
                lo
            } else {
                hi
            }
        }
        RoundingMode::TowardNegative => {
            if neg {
                hi
            } else {
                lo
            }
        }
        RoundingMode::ToOdd => {
            if lo % 2 == 1 {
                lo
            } else {
                hi
            }
        }
    }
}

fn lows(t: &Target) -> Vec<u64> {
    let mut v = vec![0, 1, 2, 3, t.max - 1];
    // Around the smallest normal (the largest subnormal and the binade boundary).
    let (min_normal, one_code) = match t.name {
        "f16" => (0x0400, 0x3C00),
        "bf16" => (0x0080, 0x3F80),
        _ => (0x0080_0000, 0x3F80_0000),
    };
    assert_eq!((t.decode)(one_code), 1.0);
    v.extend([min_normal - 2, min_normal - 1, min_normal, min_normal + 1]);
    // 1.0 and its neighbours, and a spread of codes.
    v.extend([one_code - 1, one_code, one_code + 1, one_code + 2]);
    let mut s = 0x1234_5678u64;
    for _ in 0..200 {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.push((s >> 20) % t.max);
    }
    v
}

#[test]
fn f64_ties_and_near_ties_round_once_in_every_mode() {
    let mut checked = 0;
    for t in &TARGETS {
        for lo in lows(t) {
            let (a, b) = ((t.decode)(lo), (t.decode)(lo + 1));
            let mid = (a + b) / 2.0; // exact in f64
            let eps = (b - a) * 2f64.powi(t.near);
            for neg in [false, true] {
                let s = if neg { -1.0 } else { 1.0 };
                let sign = if neg { t.sign } else { 0 };
                for mode in RoundingMode::ALL {
                    let r = Rounding::ieee(mode);
                    let cases = [
                        (mid, None),
                        (mid + eps, Some(true)),
                        (mid - eps, Some(false)),
                        (a + eps, Some(false)),
                        (b - eps, Some(true)),
                    ];
                    for (x, above) in cases {
                        let mut want = expected(lo, neg, above, mode);
                        if want > t.max {
                            // Past the largest finite value: IEEE overflow.
                            let to_inf = mode.overflows_to_infinity(neg);
                            want = if to_inf { t.max + 1 } else { t.max };
                        }
                        let got = (t.encode)(s * x, r);
                        assert_eq!(
                            got,
                            sign | want,
                            "{} {mode:?} x = {:e} (lo code {lo:#x})",
                            t.name,
                            s * x
                        );
                        checked += 1;
                    }
                    // The representable value itself is exact in every mode.
                    assert_eq!((t.encode)(s * a, r), sign | lo);
                }
            }
        }
    }
    assert!(checked > 30_000, "{checked}");
}

#[test]
fn f64_known_double_rounding_traps() {
    // 1 + 2^-8 + 2^-40: a double rounding through f32 gives 0x3F80; once gives 0x3F81.
    let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
    assert_eq!(f64_to_bf16(x, Rounding::RNE), 0x3F81);
    assert_eq!(f64_to_bf16(-x, Rounding::RNE), 0xBF81);
    // The f16 analogue: 1 + 2^-11 + 2^-40 -> 0x3C01.
    assert_eq!(
        f64_to_f16(1.0 + 2f64.powi(-11) + 2f64.powi(-40), Rounding::RNE),
        0x3C01
    );
    // Just below the tie stays down even though f32 would round it onto the tie.
    let y = 1.0 + 2f64.powi(-8) - 2f64.powi(-40);
    assert_eq!(f64_to_bf16(y, Rounding::RNA), 0x3F80);
    assert_eq!((y as f32 as f64), 1.0 + 2f64.powi(-8)); // (the trap a double rounding falls in)
}

#[test]
fn f64_special_values_and_edges() {
    let r = Rounding::RNE;
    assert_eq!(f64_to_bf16(f64::NAN, r), 0x7FC0);
    assert_eq!(f64_to_bf16(-f64::NAN, r), 0xFFC0);
    assert_eq!(f64_to_f16(f64::NAN, r), 0x7E00);
    assert_eq!(f64_to_f16(-f64::NAN, r), 0xFE00);
    assert!(f64_to_f32(f64::NAN, r).is_nan());
    assert_eq!(f64_to_bf16(f64::INFINITY, r), 0x7F80);
    assert_eq!(f64_to_bf16(f64::NEG_INFINITY, r), 0xFF80);
    assert_eq!(f64_to_f16(f64::NEG_INFINITY, r), 0xFC00);
    assert_eq!(f64_to_bf16(-0.0, r), 0x8000);
    assert_eq!(f64_to_f16(-0.0, r), 0x8000);
    assert_eq!(f64_to_f32(-0.0, r).to_bits(), 0x8000_0000);
    // Huge and tiny f64 values.
    for mode in RoundingMode::ALL {
        let r = Rounding::ieee(mode);
        let inf_or_max = |neg: bool, inf: u64, max: u64| {
            if mode.overflows_to_infinity(neg) {
                inf
            } else {
                max
            }
        };
        assert_eq!(
            f64_to_bf16(1e300, r) as u64,
            inf_or_max(false, 0x7F80, 0x7F7F)
        );
        assert_eq!(
            f64_to_bf16(-1e300, r) as u64,
            0x8000 | inf_or_max(true, 0x7F80, 0x7F7F)
        );
        assert_eq!(
            f64_to_f16(1e10, r) as u64,
            inf_or_max(false, 0x7C00, 0x7BFF)
        );
        let tiny = 5e-324; // the smallest f64 subnormal
        let up = matches!(mode, RoundingMode::TowardPositive | RoundingMode::ToOdd);
        assert_eq!(f64_to_bf16(tiny, r), up as u16, "{mode:?}");
        assert_eq!(f64_to_f16(tiny, r), up as u16, "{mode:?}");
        assert_eq!(f64_to_f32(tiny, r).to_bits(), up as u32, "{mode:?}");
        let down = matches!(mode, RoundingMode::TowardNegative | RoundingMode::ToOdd);
        assert_eq!(f64_to_bf16(-tiny, r), 0x8000 | down as u16, "{mode:?}");
    }
    // Saturation and flush-to-zero policies.
    assert_eq!(f64_to_bf16(1e300, r.saturating()), 0x7F7F);
    assert_eq!(f64_to_f16(f64::INFINITY, r.saturating()), 0x7BFF);
    assert_eq!(f64_to_bf16(1e-40, r.flush_to_zero()), 0x0000);
    assert_eq!(f64_to_f16(-1e-6, r.flush_to_zero()), 0x8000);
    assert_eq!(f64_to_f16(-1e-6, r), 0x8011); // kept as a subnormal: round(1e-6 / 2^-24) = 17
}
