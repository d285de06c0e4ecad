//! The element-level semantics shared by MXFP4 and NVFP4: FP4 codes as the kernel sees them,
//! exact products, and the final rounding to the 16-bit output type.

use super::recipe::{Fp4Element, HalfType};
use crate::formats::bf16::{exact_to_bf16, f32_to_bf16};
use crate::formats::f16::f32_to_f16;
use crate::formats::format::{BFLOAT16, FLOAT16};
use crate::formats::fp4_e1m2::E1M2_TO_F32_BITS;
use crate::formats::fp4_e2m1::E2M1_TO_F32_BITS;
use crate::formats::rounding::nan_encoding;
use crate::formats::{Exact, Rounding, SubnormalPolicy};

/// The f32 value of the FP4 `code` (low nibble) of `element`, with subnormal codes flushed to a
/// zero of their sign under [`SubnormalPolicy::FlushToZero`] (denormals-are-zero on the placed
/// field, see [`bit_placement`](super::bit_placement)).
#[inline]
pub fn fp4_to_f32(code: u8, element: Fp4Element, subnormals: SubnormalPolicy) -> f32 {
    let code = code & 0xF;
    let subnormal_code = match element {
        Fp4Element::E2m1 => code & 0x6 == 0 && code & 0x1 != 0,
        Fp4Element::E1m2 => code & 0x4 == 0 && code & 0x3 != 0,
    };
    if subnormals == SubnormalPolicy::FlushToZero && subnormal_code {
        return if code & 0x8 != 0 { -0.0 } else { 0.0 };
    }
    f32::from_bits(match element {
        Fp4Element::E2m1 => E2M1_TO_F32_BITS[code as usize],
        Fp4Element::E1m2 => E1M2_TO_F32_BITS[code as usize],
    })
}

/// The output type's NaN under `rounding` (positive canonical quiet NaN, or the pinned code).
///
/// NaN results are always produced with a positive sign: the sign of a NaN made by f32
/// arithmetic is platform-dependent (x86's default NaN is negative, AArch64's positive), and the
/// reference must not depend on the platform.
#[inline]
pub fn output_nan(output: HalfType, rounding: Rounding) -> u16 {
    let format = match output {
        HalfType::Bf16 => &BFLOAT16,
        HalfType::F16 => &FLOAT16,
    };
    nan_encoding(format, rounding.nan, false) as u16
}

/// Rounds an f32 to the output type once (NaN -> [`output_nan`]).
#[inline(always)]
pub fn round_f32_to_output(x: f32, output: HalfType, rounding: Rounding) -> u16 {
    if x.is_nan() {
        return output_nan(output, rounding);
    }
    match output {
        HalfType::Bf16 => f32_to_bf16(x, rounding),
        HalfType::F16 => f32_to_f16(x, rounding),
    }
}

/// Rounds an exact value to the output type once (NaN -> [`output_nan`]).
#[inline]
pub fn round_exact_to_output(x: Exact, output: HalfType, rounding: Rounding) -> u16 {
    if let Exact::Nan { .. } = x {
        return output_nan(output, rounding);
    }
    match output {
        HalfType::Bf16 => exact_to_bf16(x, rounding),
        HalfType::F16 => x.round_to(&FLOAT16, rounding) as u16,
    }
}

/// The exact product of f32 factors (IEEE special cases: NaN if any factor is NaN or if an
/// infinity meets a zero; otherwise infinity if any factor is infinite).
pub fn exact_product(factors: &[f32]) -> Exact {
    let mut negative = false;
    let mut sig: u128 = 1;
    let mut exp: i32 = 0;
    let mut infinite = false;
    let mut zero = false;
    for &f in factors {
        match Exact::of_f32(f) {
            Exact::Nan { .. } => return Exact::Nan { negative: false },
            Exact::Infinity { negative: n } => {
                negative ^= n;
                infinite = true;
            }
            Exact::Finite {
                negative: n,
                sig: s,
                exp: e,
            } => {
                negative ^= n;
                if s == 0 {
                    zero = true;
                } else {
                    // Strip trailing zeros so at most 24 bits per factor accumulate (5 factors
                    // fit in u128 with room to spare; callers use at most 3).
                    let tz = s.trailing_zeros();
                    sig *= s >> tz;
                    exp += e + tz as i32;
                }
            }
        }
    }
    match (infinite, zero) {
        (true, true) => Exact::Nan { negative: false },
        (true, false) => Exact::Infinity { negative },
        (false, true) => Exact::Finite {
            negative,
            sig: 0,
            exp: 0,
        },
        (false, false) => Exact::Finite { negative, sig, exp },
    }
}
