//! IEEE binary16: conversions from f32 and f64, each rounded once, and exact decoding.

use super::format::FLOAT16;
use super::rounding::{
    nan_encoding, Exact, OverflowPolicy, Rounding, RoundingMode, SubnormalPolicy,
};

/// Decodes f16 bits to f32 (exact).
#[inline]
pub fn f16_to_f32(bits: u16) -> f32 {
    let sign = ((bits as u32) & 0x8000) << 16;
    let e = ((bits >> 10) & 0x1F) as u32;
    let m = (bits & 0x3FF) as u32;
    let mag = match e {
        0 if m == 0 => 0,
        0 => {
            // Subnormal: m * 2^-24, normalised into an f32.
            let shift = m.leading_zeros() - 21; // bring the top set bit to bit 10
            let m_norm = (m << shift) & 0x3FF;
            let exp = 127 - 15 - shift + 1;
            (exp << 23) | (m_norm << 13)
        }
        0x1F if m == 0 => 0x7F80_0000,
        // NaN: keep the payload, shifted into the f32 fraction (quiet bit stays the top bit).
        0x1F => 0x7F80_0000 | (m << 13),
        _ => ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(sign | mag)
}

/// Decodes f16 bits to f64 (exact).
#[inline]
pub fn f16_to_f64(bits: u16) -> f64 {
    f16_to_f32(bits) as f64
}

/// Rounds an f32 to f16 under `rounding`, in one step.
///
/// An integer fast path equal to [`round_exact`](super::rounding::round_exact) (checked
/// against an independent oracle over all 2^32 inputs in every mode): the truncated f16
/// magnitude code is computed from the f32 fields, the discarded bits decide the rounding, and
/// a carry simply increments the code (f16 magnitudes are monotone in their encodings, so a
/// carry out of the fraction moves to the next binade and out of the top binade to 0x7C00).
#[inline]
pub fn f32_to_f16(x: f32, rounding: Rounding) -> u16 {
    let b = x.to_bits();
    let negative = b >> 31 != 0;
    let sign = ((b >> 16) & 0x8000) as u16;
    let mag = b & 0x7FFF_FFFF;
    if mag >= 0x7F80_0000 {
        if mag > 0x7F80_0000 {
            return nan_encoding(&FLOAT16, rounding.nan, negative) as u16;
        }
        return match rounding.overflow {
            OverflowPolicy::Ieee => sign | 0x7C00,
            OverflowPolicy::Saturate => sign | 0x7BFF,
        };
    }
    let e = (mag >> 23) as i32; // biased f32 exponent
    if e >= 127 + 16 {
        // |x| >= 2^16 > 65504: overflow in every mode.
        return sign | overflow_magnitude(rounding, negative);
    }
    // Truncated magnitude code `trunc` and the discarded bits `rem` out of `1 << shift`.
    let (trunc, rem, shift) = if e >= 127 - 14 {
        // Normal f16 range: 13 fraction bits are discarded.
        let code = (((e - 112) as u32) << 10) | ((mag >> 13) & 0x3FF);
        (code, mag & 0x1FFF, 13u32)
    } else {
        // Subnormal f16 (or smaller): the significand with its hidden bit, shifted right.
        let sig = if e == 0 {
            mag & 0x7F_FFFF
        } else {
            (mag & 0x7F_FFFF) | 0x80_0000
        };
        // f16 subnormal quantum 2^-24; the f32 significand's unit is 2^(max(e,1) - 150).
        let shift = (126 - e.max(1)) as u32; // = -24 - (max(e,1) - 150)
        if shift >= 32 {
            (0, sig, 32)
        } else {
            (sig >> shift, sig & ((1u32 << shift) - 1), shift)
        }
    };
    let inexact = rem != 0;
    let (above_half, at_half) = if shift >= 32 {
        // sig < 2^24 < 2^31: always below half.
        (false, false)
    } else {
        let half = 1u32 << (shift - 1);
        (rem > half, rem == half)
    };
    let mut code = trunc;
    match rounding.mode {
        RoundingMode::ToOdd => code |= inexact as u32,
        mode => {
            code += mode.rounds_up(negative, code & 1 == 1, above_half, at_half, inexact) as u32
        }
    }
    if code >= 0x7C00 {
        return sign | overflow_magnitude(rounding, negative);
    }
    if rounding.subnormals == SubnormalPolicy::FlushToZero && code < 0x0400 {
        code = 0;
    }
    sign | code as u16
}

/// The f16 magnitude an overflowing result gets: infinity or the largest finite value.
#[inline]
fn overflow_magnitude(rounding: Rounding, negative: bool) -> u16 {
    if rounding.overflow == OverflowPolicy::Saturate
        || !rounding.mode.overflows_to_infinity(negative)
    {
        0x7BFF
    } else {
        0x7C00
    }
}

/// Rounds an f64 to f16 under `rounding`, in one step.
#[inline]
pub fn f64_to_f16(x: f64, rounding: Rounding) -> u16 {
    // Normal results through 64-bit arithmetic; everything else through the general rounder
    // (the same results: `narrow_f64`'s tests).
    super::narrow_f64::round_f64_to_normal(x, &FLOAT16, rounding)
        .unwrap_or_else(|| Exact::of_f64(x).round_to(&FLOAT16, rounding)) as u16
}

/// Rounds an f32 to f16 and back: the value a kernel holds after an f16 cast.
#[inline]
pub fn quantize_f32_f16(x: f32, rounding: Rounding) -> f32 {
    f16_to_f32(f32_to_f16(x, rounding))
}
