//! f64 to a narrower IEEE-style format in 64-bit integer arithmetic, for the values where that
//! is simple: a finite, non-zero f64 whose result is a normal finite value of the target. The
//! generators round hundreds of millions of f64 draws to bf16 and f16 per full-tier case; the
//! general rounder ([`super::rounding::round_exact`], 128-bit, every policy) handles every
//! other input, so together they give exactly its results (the tests below compare the two on
//! every code boundary of bf16 and f16, in every rounding mode and policy).

use super::format::{FloatFormat, Specials};
use super::rounding::{Rounding, RoundingMode};

/// The encoding [`super::rounding::round_exact`] gives for `x`, when `x` is finite and
/// non-zero, `format` has IEEE specials and fewer than 52 mantissa bits, and the rounded
/// result is a normal finite value; `None` otherwise (zero, NaN, infinity, a result below the
/// smallest normal or above the largest finite value), where the caller takes the general
/// rounder. The rounding policies for subnormals, NaN and overflow never apply to the values
/// this returns for.
#[inline(always)]
pub fn round_f64_to_normal(x: f64, format: &FloatFormat, rounding: Rounding) -> Option<u64> {
    if format.specials != Specials::Ieee || format.man_bits >= 52 {
        return None;
    }
    let b = x.to_bits();
    let negative = b >> 63 != 0;
    let e = ((b >> 52) & 0x7FF) as i32;
    // Zero and f64 subnormals (far below any narrower format's normals), NaN and infinities.
    if e == 0 || e == 0x7FF {
        return None;
    }
    let unbiased = e - 1023;
    if unbiased < 1 - format.bias || unbiased > format.bias {
        return None;
    }
    let shift = 52 - format.man_bits;
    let man = b & ((1u64 << 52) - 1);
    let rem = man & ((1u64 << shift) - 1);
    let half = 1u64 << (shift - 1);
    let exp_field = (unbiased + format.bias) as u64;
    let mut code = (exp_field << format.man_bits) | (man >> shift);
    if rounding.mode == RoundingMode::ToOdd {
        if rem != 0 {
            code |= 1;
        }
    } else if rounding
        .mode
        .rounds_up(negative, code & 1 == 1, rem > half, rem == half, rem != 0)
    {
        // A carry out of the mantissa moves into the exponent field: the next binade's
        // smallest value, as the general rounder gives.
        code += 1;
    }
    if code > format.max_finite_magnitude() {
        return None;
    }
    Some(((negative as u64) << (format.exp_bits + format.man_bits)) | code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::format::{BFLOAT16, FLOAT16};
    use crate::formats::rounding::{Exact, NanPolicy, OverflowPolicy, SubnormalPolicy};

    /// 2^e, exactly (no platform pow).
    fn pow2(e: i32) -> f64 {
        f64::from_bits(((e + 1023) as u64) << 52)
    }

    fn roundings() -> Vec<Rounding> {
        let mut out = Vec::new();
        for mode in RoundingMode::ALL {
            for subnormals in [SubnormalPolicy::Keep, SubnormalPolicy::FlushToZero] {
                for overflow in [OverflowPolicy::Ieee, OverflowPolicy::Saturate] {
                    out.push(Rounding {
                        mode,
                        subnormals,
                        nan: NanPolicy::CanonicalQuiet,
                        overflow,
                    });
                }
            }
        }
        out
    }

    /// The fast path, where it answers, against the general rounder; counts the answers.
    fn check(format: &FloatFormat, x: f64, roundings: &[Rounding]) -> usize {
        let mut answered = 0;
        for &r in roundings {
            if let Some(fast) = round_f64_to_normal(x, format, r) {
                let general = Exact::of_f64(x).round_to(format, r);
                assert_eq!(
                    fast,
                    general,
                    "{} {x:e} ({:#018x}) {r:?}",
                    format.name,
                    x.to_bits()
                );
                answered += 1;
            }
        }
        answered
    }

    /// Every code of the format, the midpoint to the next code, and the f64 neighbours of
    /// both (the inputs where a rounding decision changes), of both signs, in every mode and
    /// policy; then a spread of random f64 bit patterns around the format's range.
    #[test]
    fn equals_the_general_rounder_at_every_code_boundary() {
        let roundings = roundings();
        for format in [&BFLOAT16, &FLOAT16] {
            let mut answered = 0;
            let top = format.max_finite_magnitude();
            for code in 0..=top {
                let v = format.decode_f64(code);
                let next = format.decode_f64(code + 1); // infinity after the largest finite
                let mid = if next.is_finite() {
                    (v + next) / 2.0 // exact: one more bit than the format
                } else {
                    v + (v - format.decode_f64(code - 1)) / 2.0
                };
                for y in [v, mid] {
                    for z in [
                        y,
                        f64::from_bits(y.to_bits() + 1),
                        f64::from_bits(y.to_bits().saturating_sub(1)),
                    ] {
                        answered += check(format, z, &roundings);
                        answered += check(format, -z, &roundings);
                    }
                }
            }
            // The fast path must answer for most of them (or it saves nothing).
            assert!(
                answered > (top as usize) * roundings.len() * 6,
                "{}: {answered}",
                format.name
            );
            let mut s = 0x9E37_79B9_7F4A_7C15u64;
            for _ in 0..200_000 {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                // Exponents from 2^-160 to 2^160: through both formats' subnormal, normal and
                // overflow ranges.
                let e = 1023 - 160 + (s >> 40) % 321;
                let x = f64::from_bits(
                    (s & (1 << 63)) | (e << 52) | (s.rotate_left(17) & ((1 << 52) - 1)),
                );
                check(format, x, &roundings);
            }
        }
    }

    #[test]
    fn leaves_zeros_specials_subnormal_results_and_overflow_to_the_general_rounder() {
        let r = Rounding::RNE;
        for x in [
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e-300,
            65520.0,
            1e6,
            3e-5,
        ] {
            assert_eq!(round_f64_to_normal(x, &FLOAT16, r), None, "{x:e}");
        }
        // The largest finite f16 rounds to itself; half an ulp above it overflows.
        assert_eq!(round_f64_to_normal(65504.0, &FLOAT16, r), Some(0x7BFF));
        assert_eq!(
            round_f64_to_normal(1.0 + pow2(-11), &FLOAT16, r),
            Some(0x3C00)
        );
        assert_eq!(
            round_f64_to_normal(1.0 + pow2(-8) + pow2(-40), &BFLOAT16, r),
            Some(0x3F81)
        );
    }
}
