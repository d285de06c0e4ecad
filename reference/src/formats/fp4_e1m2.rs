//! FP4 E1M2 (torch_npu `float4_e1m2fn_x2`; CANN `op::Float4E1M2`).
//!
//! Bits `s e m1 m0`, bias 1. `E = 0`: `m * 0.25` (subnormal); `E = 1`: `1 + m/4`.
//! Magnitudes of codes 0..7: 0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75; codes 8..15 are their
//! negatives (8 is -0). No infinity and no NaN. A code is the LOW 4 bits of the `u8` argument.
//!
//! Encoding rules are those of [`fp4_e2m1`](super::fp4_e2m1) (same machinery, same policies):
//! round once in the given mode; overflow and infinities saturate to ±1.75; NaN becomes a zero
//! of the NaN's sign under the canonical policy (ml_dtypes has no E1M2 type, so nothing to
//! follow there); subnormal results (±0.25, ±0.5, ±0.75) are kept unless flushed.

use super::format::{narrow_decode_table, FP4_E1M2};
use super::rounding::{Exact, Rounding};

/// f32 bits of every code 0..16.
pub const E1M2_TO_F32_BITS: [u32; 16] = narrow_decode_table::<16>(&FP4_E1M2);

/// bf16 bits of every code 0..16 (exact: the f32 values have at most 3 significant bits).
pub const E1M2_TO_BF16_BITS: [u16; 16] = {
    let mut t = [0u16; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = (E1M2_TO_F32_BITS[i] >> 16) as u16;
        i += 1;
    }
    t
};

/// Decodes the low nibble of `code` to f32 (exact).
#[inline(always)]
pub fn e1m2_to_f32(code: u8) -> f32 {
    f32::from_bits(E1M2_TO_F32_BITS[(code & 0xF) as usize])
}

/// Decodes the low nibble of `code` to f64 (exact).
#[inline(always)]
pub fn e1m2_to_f64(code: u8) -> f64 {
    e1m2_to_f32(code) as f64
}

/// Decodes the low nibble of `code` to an exact value.
#[inline]
pub fn e1m2_to_exact(code: u8) -> Exact {
    FP4_E1M2.decode((code & 0xF) as u64)
}

/// Rounds an exact value to E1M2 in one step.
#[inline]
pub fn exact_to_e1m2(x: Exact, rounding: Rounding) -> u8 {
    x.round_to(&FP4_E1M2, rounding) as u8
}

/// Rounds an f32 to E1M2 in one step; the code is in the low nibble.
#[inline]
pub fn f32_to_e1m2(x: f32, rounding: Rounding) -> u8 {
    exact_to_e1m2(Exact::of_f32(x), rounding)
}

/// Rounds an f64 to E1M2 in one step.
#[inline]
pub fn f64_to_e1m2(x: f64, rounding: Rounding) -> u8 {
    exact_to_e1m2(Exact::of_f64(x), rounding)
}
