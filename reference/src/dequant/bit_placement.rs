//! The seed 002 two-step FP4 -> BF16 conversion ("bit placement"), as the Ascend soft-FP4
//! kernels run it.
//!
//! Step 1 places the FP4 fields in a wider format's fields with integer operations: for E2M1
//! (`s e1 e0 m`) the BF16 bits are `((c & 8) << 12) | ((c & 7) << 6)` (sign to bit 15, the two
//! exponent bits to the exponent's low bits, the mantissa bit to the fraction's top bit); for
//! E1M2 (`s e m1 m0`) `((c & 8) << 12) | ((c & 7) << 5)`. Read as BF16, the placed field is
//! `2^(E-127) (1 + m/2^M)` (or `m 2^-126 / 2^M` when `E = 0`), while the FP4 value is
//! `2^(E-1) (1 + m/2^M)` (or `m / 2^M`): the ratio is exactly `2^126` in EVERY case, normal or
//! subnormal, so step 2 multiplies by `2^126` (BF16 0x7E80), exactly. The f32 form places at
//! `<< 22` (E2M1) and the f16 form at `<< 9` with factor `2^14`.
//!
//! On hardware with denormals-are-zero the placed field of a subnormal code (E2M1 codes 1 and 9)
//! is a BF16 subnormal and is read as zero: ±0.5 becomes ±0. The
//! [`SubnormalPolicy::FlushToZero`] argument models exactly that, and the recipe's
//! `fp4_subnormals` field makes the table decode agree (tests check both, for every code).

use super::decode::{fp4_to_f32, round_f32_to_output};
use super::recipe::{Fp4DequantRecipe, Fp4Element};
use crate::formats::bf16::{bf16_to_f32, f32_to_bf16};
use crate::formats::f16::{f16_to_f32, f32_to_f16};
use crate::formats::{Rounding, SubnormalPolicy};

/// BF16 bits of 2^126, the step-2 factor.
pub const BF16_TWO_POW_126: u16 = 0x7E80;

/// f16 bits of 2^14, the step-2 factor of the f16 form.
pub const F16_TWO_POW_14: u16 = 0x7400;

/// Mantissa bits of the element format.
fn man_bits(element: Fp4Element) -> u32 {
    match element {
        Fp4Element::E2m1 => 1,
        Fp4Element::E1m2 => 2,
    }
}

/// Step 1 into BF16: the FP4 fields placed in the BF16 fields.
#[inline]
pub fn place_in_bf16(code: u8, element: Fp4Element) -> u16 {
    let c = (code & 0xF) as u16;
    ((c & 8) << 12) | ((c & 7) << (7 - man_bits(element)))
}

/// Step 1 into f32.
#[inline]
pub fn place_in_f32(code: u8, element: Fp4Element) -> u32 {
    let c = (code & 0xF) as u32;
    ((c & 8) << 28) | ((c & 7) << (23 - man_bits(element)))
}

/// Step 1 into f16.
#[inline]
pub fn place_in_f16(code: u8, element: Fp4Element) -> u16 {
    let c = (code & 0xF) as u16;
    ((c & 8) << 12) | ((c & 7) << (10 - man_bits(element)))
}

/// Reads a placed operand as the hardware does: a subnormal is zero under DAZ.
#[inline]
fn daz(x: f32, subnormals: SubnormalPolicy) -> f32 {
    if subnormals == SubnormalPolicy::FlushToZero && x != 0.0 && x.abs() < f32::MIN_POSITIVE {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// The two-step conversion to BF16 bits: place, then multiply by 2^126 in f32 (exact) and
/// narrow to BF16 (exact: no rounding happens). A BF16 subnormal placed operand is flushed
/// under DAZ.
pub fn fp4_to_bf16(code: u8, element: Fp4Element, subnormals: SubnormalPolicy) -> u16 {
    let placed = bf16_to_f32(place_in_bf16(code, element));
    // A BF16 subnormal is an f32 subnormal too, so the f32-level DAZ test is the BF16 one.
    let v = daz(placed, subnormals) * bf16_to_f32(BF16_TWO_POW_126);
    f32_to_bf16(v, Rounding::RNE)
}

/// The two-step conversion in f32: place at `<< 22`/`<< 21`, multiply by 2^126.
pub fn fp4_to_f32_two_step(code: u8, element: Fp4Element, subnormals: SubnormalPolicy) -> f32 {
    let placed = f32::from_bits(place_in_f32(code, element));
    daz(placed, subnormals) * bf16_to_f32(BF16_TWO_POW_126)
}

/// The two-step conversion to f16 bits: place in the f16 fields, multiply by 2^14 (exact).
pub fn fp4_to_f16(code: u8, element: Fp4Element, subnormals: SubnormalPolicy) -> u16 {
    let bits = place_in_f16(code, element);
    let placed = f16_to_f32(bits);
    let is_f16_subnormal = bits & 0x7C00 == 0 && bits & 0x03FF != 0;
    let placed = if subnormals == SubnormalPolicy::FlushToZero && is_f16_subnormal {
        0.0f32.copysign(placed)
    } else {
        placed
    };
    f32_to_f16(placed * f16_to_f32(F16_TWO_POW_14), Rounding::RNE)
}

/// One MXFP4 element computed the way a bit-placement kernel does: the f32 two-step value,
/// then a second f32 multiply by the E8M0 scale built exactly (`2^(e-127)`, a subnormal for
/// e = 0), then the recipe's rounding. Must equal [`mxfp4::element`](super::mxfp4::element) for
/// every recipe whose order forms the product in f32 (tested for all 16 x 256 pairs).
pub fn mxfp4_element(code: u8, scale: u8, recipe: &Fp4DequantRecipe) -> u16 {
    if scale == 0xFF && recipe.scale_decode != super::ScaleDecode::E8m0NanAsInf {
        return super::decode::output_nan(recipe.output, recipe.rounding);
    }
    let q = fp4_to_f32_two_step(code, recipe.element, recipe.fp4_subnormals);
    round_f32_to_output(
        q * recipe.scale_decode.e8m0(scale),
        recipe.output,
        recipe.rounding,
    )
}

/// The table decode that [`fp4_to_bf16`] must equal: the FP4 value under the same policy.
pub fn table_decode_to_bf16(code: u8, element: Fp4Element, subnormals: SubnormalPolicy) -> u16 {
    f32_to_bf16(fp4_to_f32(code, element, subnormals), Rounding::RNE)
}
