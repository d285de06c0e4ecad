//! E8M0 (OCP Microscaling spec v1.0 shared scale; PyTorch/ml_dtypes `float8_e8m0fnu`).
//!
//! Eight exponent bits, no sign, no mantissa: code `e` is `2^(e - 127)` for `e = 0..=254`, and
//! 0xFF is NaN. There is no zero, no negative value and no infinity.
//!
//! `e = 0` is `2^-127`, an f32 SUBNORMAL (bits 0x00400000): building the scale as `e << 23`
//! gives 0 for `e = 0` (and +Inf for 0xFF) — a real bug class in shipped kernels. The decoders
//! here are exact for every code.
//!
//! Encoding (f32/f64 -> E8M0), documented rule (E8M0 is not a sign/exponent/mantissa
//! [`FloatFormat`](super::FloatFormat), so this is its own small routine on an
//! [`Exact`] value, tested against a rational oracle):
//! - positive finite `x` in `[2^k, 2^(k+1))`: if `x` is a power of two it is exact; otherwise the
//!   mode chooses between `2^k` and `2^(k+1)` on the LINEAR value (the midpoint is `1.5 * 2^k`).
//!   Ties to even pick the even biased exponent, which is what ml_dtypes' bit rounding does for
//!   a format without mantissa bits; round-to-odd picks the odd biased exponent when inexact;
//! - results below `2^-127` (including every positive value smaller than it) give 0x00 in every
//!   mode: there is nothing smaller to round to;
//! - results above `2^127` and `+Inf`: 0xFE under [`OverflowPolicy::Saturate`] or in a mode
//!   that does not overflow to infinity (toward zero, toward -inf, to odd), otherwise NaN 0xFF
//!   (no infinity to give);
//! - NaN, zero, negative values and `-Inf` have no encoding and give NaN 0xFF (or the pinned
//!   code under [`NanPolicy::Pinned`]). NaN -> 0xFF is what ml_dtypes does; for zero and
//!   negative inputs this rule is our own, pinned here rather than inherited from any library
//!   version.
//!
//! The subnormal policy does not apply (E8M0 has no subnormals).

use super::rounding::{Exact, NanPolicy, OverflowPolicy, Rounding, RoundingMode};

/// The NaN code.
pub const E8M0_NAN: u8 = 0xFF;

/// Decodes an E8M0 code to f32: exact for every code, `2^-127` = 0x00400000 for code 0,
/// quiet NaN 0x7FC00000 for 0xFF.
#[inline(always)]
pub fn e8m0_to_f32(code: u8) -> f32 {
    f32::from_bits(match code {
        0 => 0x0040_0000,
        0xFF => 0x7FC0_0000,
        e => (e as u32) << 23,
    })
}

/// Decodes an E8M0 code to f64 (exact; NaN for 0xFF).
#[inline(always)]
pub fn e8m0_to_f64(code: u8) -> f64 {
    if code == 0xFF {
        return f64::NAN;
    }
    f64::from_bits(((code as u64) + 1023 - 127) << 52)
}

/// Decodes an E8M0 code to an exact value (`1 * 2^(e-127)`, or NaN).
#[inline]
pub fn e8m0_to_exact(code: u8) -> Exact {
    if code == 0xFF {
        Exact::Nan { negative: false }
    } else {
        Exact::Finite {
            negative: false,
            sig: 1,
            exp: code as i32 - 127,
        }
    }
}

fn nan_code(rounding: Rounding) -> u8 {
    match rounding.nan {
        NanPolicy::CanonicalQuiet => E8M0_NAN,
        NanPolicy::Pinned(code) => code as u8,
    }
}

fn overflow_code(rounding: Rounding) -> u8 {
    if rounding.overflow == OverflowPolicy::Saturate || !rounding.mode.overflows_to_infinity(false)
    {
        0xFE
    } else {
        nan_code(rounding)
    }
}

/// Rounds an exact value to E8M0 in one step under the rules in the module docs.
pub fn exact_to_e8m0(x: Exact, rounding: Rounding) -> u8 {
    let (sig, exp) = match x {
        Exact::Nan { .. } => return nan_code(rounding),
        Exact::Infinity { negative: false } => return overflow_code(rounding),
        Exact::Infinity { negative: true } => return nan_code(rounding),
        Exact::Finite { negative, sig, exp } => {
            if negative || sig == 0 {
                return nan_code(rounding);
            }
            (sig, exp)
        }
    };
    let msb = 127 - sig.leading_zeros() as i32;
    let k = exp + msb; // 2^k <= x < 2^(k+1)
    let field = k as i64 + 127;
    let rem = sig - (1u128 << msb);
    let up = if rem == 0 {
        false
    } else {
        let half = 1u128 << (msb - 1); // msb >= 1 because rem != 0
        if rounding.mode == RoundingMode::ToOdd {
            field & 1 == 0
        } else {
            rounding
                .mode
                .rounds_up(false, field & 1 == 1, rem > half, rem == half, true)
        }
    };
    let field = field + up as i64;
    if field < 0 {
        0
    } else if field > 254 {
        overflow_code(rounding)
    } else {
        field as u8
    }
}

/// Rounds an f32 to E8M0 in one step.
#[inline]
pub fn f32_to_e8m0(x: f32, rounding: Rounding) -> u8 {
    exact_to_e8m0(Exact::of_f32(x), rounding)
}

/// Rounds an f64 to E8M0 in one step.
#[inline]
pub fn f64_to_e8m0(x: f64, rounding: Rounding) -> u8 {
    exact_to_e8m0(Exact::of_f64(x), rounding)
}
