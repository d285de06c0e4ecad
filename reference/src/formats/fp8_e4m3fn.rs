//! FP8 E4M3FN (OCP FP8 spec; PyTorch `float8_e4m3fn`; the NVFP4 block scale).
//!
//! Bits `s eeee mmm`, bias 7. Max finite 448 (0x7E), smallest normal 2^-6, smallest subnormal
//! 2^-9. No infinity; NaN only at 0x7F and 0xFF.
//!
//! Encoding (f32/f64 -> E4M3FN) rounds once through
//! [`round_exact`](super::rounding::round_exact):
//! - [`OverflowPolicy::Ieee`](super::OverflowPolicy) (the default, as ml_dtypes' non-saturating
//!   cast): a result beyond 448 becomes NaN in the modes that overflow to infinity (nearest:
//!   values >= 464 (the tie 464 rounds to even = 448 under RNE, up to NaN under ties-away);
//!   toward +inf for positives, toward -inf for negatives); in the other modes it is ±448.
//!   Infinite inputs become NaN of the same sign. This follows ml_dtypes for RNE.
//! - [`OverflowPolicy::Saturate`](super::OverflowPolicy) (OCP "satfinite" conversions, the
//!   Ascend saturation mode, and the clamp quantisers apply before casting): overflow and ±Inf
//!   give ±448.
//! - NaN encodes as 0x7F / 0xFF (the NaN's sign kept) under the canonical policy; ml_dtypes
//!   gives the same codes.
//! - Subnormal results are kept or flushed to a signed zero per the subnormal policy.
//!
//! Decoding a NaN gives the canonical quiet f32 NaN 0x7FC00000 with the code's sign.

use super::format::{narrow_decode_table, FP8_E4M3FN};
use super::rounding::{Exact, Rounding};

/// f32 bits of every code 0..256.
pub const E4M3FN_TO_F32_BITS: [u32; 256] = narrow_decode_table::<256>(&FP8_E4M3FN);

/// Decodes an E4M3FN code to f32 (exact; NaN codes give a quiet NaN of the code's sign).
#[inline(always)]
pub fn e4m3fn_to_f32(code: u8) -> f32 {
    f32::from_bits(E4M3FN_TO_F32_BITS[code as usize])
}

/// Decodes an E4M3FN code to f64 (exact).
#[inline(always)]
pub fn e4m3fn_to_f64(code: u8) -> f64 {
    e4m3fn_to_f32(code) as f64
}

/// Decodes an E4M3FN code to an exact value.
#[inline]
pub fn e4m3fn_to_exact(code: u8) -> Exact {
    FP8_E4M3FN.decode(code as u64)
}

/// Rounds an exact value to E4M3FN in one step.
#[inline]
pub fn exact_to_e4m3fn(x: Exact, rounding: Rounding) -> u8 {
    x.round_to(&FP8_E4M3FN, rounding) as u8
}

/// Rounds an f32 to E4M3FN in one step.
#[inline]
pub fn f32_to_e4m3fn(x: f32, rounding: Rounding) -> u8 {
    exact_to_e4m3fn(Exact::of_f32(x), rounding)
}

/// Rounds an f64 to E4M3FN in one step.
#[inline]
pub fn f64_to_e4m3fn(x: f64, rounding: Rounding) -> u8 {
    exact_to_e4m3fn(Exact::of_f64(x), rounding)
}
