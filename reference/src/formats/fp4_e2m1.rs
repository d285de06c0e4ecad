//! FP4 E2M1 (OCP Microscaling spec v1.0; PyTorch `float4_e2m1fn_x2`, ONNX `FLOAT4E2M1`).
//!
//! Bits `s e1 e0 m`, bias 1. `E = 0`: `m * 0.5` (subnormal); `E > 0`: `2^(E-1) * (1 + m/2)`.
//! Magnitudes of codes 0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6; codes 8..15 are their negatives (8 is
//! -0). No infinity and no NaN. A code is the LOW 4 bits of the `u8` argument; higher bits are
//! ignored by the decoders.
//!
//! Encoding (f32/f64 -> E2M1) rounds once through [`round_exact`](super::rounding::round_exact)
//! under the given [`Rounding`]:
//! - finite values round in the given mode (ties-to-even looks at the mantissa bit, so 2.5 -> 2,
//!   5 -> 4 and 0.25 -> +0 as in ml_dtypes);
//! - overflow and infinities SATURATE to ±6 under every policy and mode, because the format has
//!   no infinity (ml_dtypes and ONNX do the same);
//! - NaN: with [`NanPolicy::CanonicalQuiet`](super::NanPolicy) a NaN becomes a ZERO OF THE NaN's
//!   SIGN. This deliberately differs from ml_dtypes (every NaN -> -0, code 0x8) and from ONNX
//!   (NaN -> +6, code 0x7); pin either with `NanPolicy::Pinned(0x8)` or `Pinned(0x7)`;
//! - subnormal results (±0.5) are kept, or flushed to a signed zero under
//!   [`SubnormalPolicy::FlushToZero`](super::SubnormalPolicy).

use super::format::{narrow_decode_table, FP4_E2M1};
use super::rounding::{Exact, Rounding};

/// f32 bits of every code 0..16.
pub const E2M1_TO_F32_BITS: [u32; 16] = narrow_decode_table::<16>(&FP4_E2M1);

/// bf16 bits of every code 0..16 (exact: the f32 values have at most 2 significant bits).
pub const E2M1_TO_BF16_BITS: [u16; 16] = {
    let mut t = [0u16; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = (E2M1_TO_F32_BITS[i] >> 16) as u16;
        i += 1;
    }
    t
};

/// Decodes the low nibble of `code` to f32 (exact).
#[inline(always)]
pub fn e2m1_to_f32(code: u8) -> f32 {
    f32::from_bits(E2M1_TO_F32_BITS[(code & 0xF) as usize])
}

/// Decodes the low nibble of `code` to f64 (exact).
#[inline(always)]
pub fn e2m1_to_f64(code: u8) -> f64 {
    e2m1_to_f32(code) as f64
}

/// Decodes the low nibble of `code` to an exact value.
#[inline]
pub fn e2m1_to_exact(code: u8) -> Exact {
    FP4_E2M1.decode((code & 0xF) as u64)
}

/// Rounds an exact value to E2M1 in one step (see the module docs for the rules).
#[inline]
pub fn exact_to_e2m1(x: Exact, rounding: Rounding) -> u8 {
    x.round_to(&FP4_E2M1, rounding) as u8
}

/// Rounds an f32 to E2M1 in one step; the code is in the low nibble.
#[inline]
pub fn f32_to_e2m1(x: f32, rounding: Rounding) -> u8 {
    exact_to_e2m1(Exact::of_f32(x), rounding)
}

/// Rounds an f64 to E2M1 in one step (no intermediate f32 rounding).
#[inline]
pub fn f64_to_e2m1(x: f64, rounding: Rounding) -> u8 {
    exact_to_e2m1(Exact::of_f64(x), rounding)
}
