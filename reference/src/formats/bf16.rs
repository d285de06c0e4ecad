//! bfloat16: conversions from f32 and f64, each rounded once, and exact decoding.

use super::format::BFLOAT16;
use super::rounding::{
    select_f32_specials, Exact, OverflowPolicy, Rounding, RoundingMode, SubnormalPolicy,
};

/// Decodes bf16 bits to f32 (always exact: bf16 is the top half of an f32).
#[inline(always)]
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// Decodes bf16 bits to f64 (exact).
#[inline(always)]
pub fn bf16_to_f64(bits: u16) -> f64 {
    bf16_to_f32(bits) as f64
}

/// Rounds an f32 to bf16 under `rounding`, in one step.
///
/// bf16 shares f32's exponent range, so rounding is an integer operation on the low 16 bits of
/// the magnitude: a carry out of the fraction moves to the next binade, and out of the largest
/// binade to infinity, exactly as IEEE requires. Subnormal f32 inputs round to bf16 subnormals.
#[inline(always)]
pub fn f32_to_bf16(x: f32, rounding: Rounding) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let mag = b & 0x7FFF_FFFF;
    // Written without early returns (every case computed, then selected), so that loops of
    // conversions vectorise; for infinity and NaN the finite path's result is discarded.
    let mut hi = (mag >> 16) as u16;
    let lo = mag & 0xFFFF;
    let negative = sign != 0;
    match rounding.mode {
        RoundingMode::ToOdd => hi |= (lo != 0) as u16,
        mode => {
            hi += mode.rounds_up(negative, hi & 1 == 1, lo > 0x8000, lo == 0x8000, lo != 0) as u16
        }
    }
    if hi == 0x7F80 && rounding.overflow == OverflowPolicy::Saturate {
        hi = 0x7F7F;
    }
    if rounding.subnormals == SubnormalPolicy::FlushToZero && hi < 0x0080 {
        hi = 0;
    }
    select_f32_specials(&BFLOAT16, rounding, mag, sign, hi)
}

/// Rounds an f64 to bf16 under `rounding`, in ONE step (no intermediate f32 rounding).
/// `1 + 2^-8 + 2^-40` gives 0x3F81 under ties-to-even, where a double rounding gives 0x3F80.
#[inline]
pub fn f64_to_bf16(x: f64, rounding: Rounding) -> u16 {
    // Normal results through 64-bit arithmetic; everything else through the general rounder
    // (the same results: `narrow_f64`'s tests).
    super::narrow_f64::round_f64_to_normal(x, &BFLOAT16, rounding)
        .unwrap_or_else(|| Exact::of_f64(x).round_to(&BFLOAT16, rounding)) as u16
}

/// Rounds an exact value to bf16 in one step.
#[inline]
pub fn exact_to_bf16(x: Exact, rounding: Rounding) -> u16 {
    x.round_to(&BFLOAT16, rounding) as u16
}

/// Rounds an f32 slice to bf16 into `out` (same length).
pub fn f32_slice_to_bf16(src: &[f32], out: &mut [u16], rounding: Rounding) {
    for (o, &x) in out.iter_mut().zip(src) {
        *o = f32_to_bf16(x, rounding);
    }
}

/// Rounds an f32 to bf16 and back: the value a kernel holds after a bf16 cast.
#[inline(always)]
pub fn quantize_f32_bf16(x: f32, rounding: Rounding) -> f32 {
    bf16_to_f32(f32_to_bf16(x, rounding))
}
