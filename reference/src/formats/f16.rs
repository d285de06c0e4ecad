//! IEEE binary16: conversions from f32 and f64, each rounded once, and exact decoding.

use super::format::FLOAT16;
use super::rounding::{Exact, Rounding};

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
#[inline]
pub fn f32_to_f16(x: f32, rounding: Rounding) -> u16 {
    Exact::from_f32(x).round_to(&FLOAT16, rounding) as u16
}

/// Rounds an f64 to f16 under `rounding`, in one step.
#[inline]
pub fn f64_to_f16(x: f64, rounding: Rounding) -> u16 {
    Exact::from_f64(x).round_to(&FLOAT16, rounding) as u16
}

/// Rounds an f32 to f16 and back: the value a kernel holds after an f16 cast.
#[inline]
pub fn quantize_f32_f16(x: f32, rounding: Rounding) -> f32 {
    f16_to_f32(f32_to_f16(x, rounding))
}
