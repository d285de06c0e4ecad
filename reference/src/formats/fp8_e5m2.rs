//! FP8 E5M2 (OCP FP8 spec; PyTorch `float8_e5m2`): an IEEE-like binary format.
//!
//! Bits `s eeeee mm`, bias 15. Max finite 57344 (0x7B), smallest normal 2^-14, smallest
//! subnormal 2^-16, ±Inf at 0x7C/0xFC, NaNs at 0x7D..0x7F and 0xFD..0xFF.
//!
//! Encoding rounds once through [`round_exact`](super::rounding::round_exact) with IEEE
//! semantics: overflow gives ±Inf or ±57344 as the mode prescribes (IEEE 754 §7.4), or always
//! ±57344 under [`OverflowPolicy::Saturate`](super::OverflowPolicy); NaN gives the canonical quiet
//! NaN 0x7E / 0xFE (sign kept), as ml_dtypes does; subnormals are kept or flushed per policy.
//! Decoding any NaN code gives the canonical quiet f32 NaN with the code's sign (the payload is
//! not carried).

use super::format::{narrow_decode_table, FP8_E5M2};
use super::rounding::{Exact, Rounding};

/// f32 bits of every code 0..256.
pub const E5M2_TO_F32_BITS: [u32; 256] = narrow_decode_table::<256>(&FP8_E5M2);

/// Decodes an E5M2 code to f32 (exact for every non-NaN code).
#[inline(always)]
pub fn e5m2_to_f32(code: u8) -> f32 {
    f32::from_bits(E5M2_TO_F32_BITS[code as usize])
}

/// Decodes an E5M2 code to f64 (exact for every non-NaN code).
#[inline(always)]
pub fn e5m2_to_f64(code: u8) -> f64 {
    e5m2_to_f32(code) as f64
}

/// Decodes an E5M2 code to an exact value.
#[inline]
pub fn e5m2_to_exact(code: u8) -> Exact {
    FP8_E5M2.decode(code as u64)
}

/// Rounds an exact value to E5M2 in one step.
#[inline]
pub fn exact_to_e5m2(x: Exact, rounding: Rounding) -> u8 {
    x.round_to(&FP8_E5M2, rounding) as u8
}

/// Rounds an f32 to E5M2 in one step.
#[inline]
pub fn f32_to_e5m2(x: f32, rounding: Rounding) -> u8 {
    exact_to_e5m2(Exact::of_f32(x), rounding)
}

/// Rounds an f64 to E5M2 in one step.
#[inline]
pub fn f64_to_e5m2(x: f64, rounding: Rounding) -> u8 {
    exact_to_e5m2(Exact::of_f64(x), rounding)
}
