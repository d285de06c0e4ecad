//! IEEE binary16: conversions from f32 and f64, each rounded once, and exact decoding.

use super::format::FLOAT16;
use super::rounding::{
    select_f32_specials, Exact, OverflowPolicy, Rounding, RoundingMode, SubnormalPolicy,
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
    // The biased f32 exponent.
    let e = (mag >> 23) as i32;
    // Written without early returns (every case computed, then selected), so that loops of
    // conversions vectorise. The truncated magnitude code is `src >> shift` and the discarded
    // bits `src & ((1 << shift) - 1)`:
    // - normal f16 range (e >= 127 - 14): `src` is `mag` rebased by 112 exponents, so its top
    //   bits are ((e - 112) << 10) | the 10 kept fraction bits, and 13 bits are discarded; from
    //   e = 143 (|x| >= 2^16 > 65504) on the code is >= 0x7C00, an overflow in every mode;
    // - subnormal f16 or smaller: `src` is the significand with its hidden bit and `shift` =
    //   126 - max(e, 1) (f16 quantum 2^-24, the f32 unit 2^(max(e, 1) - 150)). From 25 on the
    //   code is 0 and the discarded part (< 2^24) lies below half of 2^(shift - 1) >= 2^24,
    //   so capping the shift at 31 decides every rounding alike.
    let normal = e >= 127 - 14;
    let significand = (mag & 0x7F_FFFF) | if e == 0 { 0 } else { 0x80_0000 };
    let src = if normal {
        mag.wrapping_sub(112 << 23)
    } else {
        significand
    };
    let shift = if normal {
        13
    } else {
        ((126 - e.max(1)) as u32).min(31)
    };
    let trunc = src >> shift;
    let rem = src & ((1u32 << shift) - 1);
    let half = 1u32 << (shift - 1);
    let (inexact, above_half, at_half) = (rem != 0, rem > half, rem == half);
    let mut code = trunc;
    match rounding.mode {
        RoundingMode::ToOdd => code |= inexact as u32,
        mode => {
            code += mode.rounds_up(negative, code & 1 == 1, above_half, at_half, inexact) as u32
        }
    }
    let flush = rounding.subnormals == SubnormalPolicy::FlushToZero && code < 0x0400;
    let finite = if code >= 0x7C00 {
        overflow_magnitude(rounding, negative)
    } else if flush {
        0
    } else {
        code as u16
    };
    select_f32_specials(&FLOAT16, rounding, mag, sign, finite)
}

/// The f16 magnitude an overflowing result gets: infinity or the largest finite value.
#[inline(always)]
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
