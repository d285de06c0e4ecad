//! Number formats and the rounding points between them.
//!
//! One file per format. Every conversion names a [`Rounding`] (mode + subnormal, NaN and
//! overflow policies) and rounds exactly once, through [`rounding::round_exact`] or a fast path
//! proven equal to it by the exhaustive tests.

pub mod bf16;
pub mod e8m0;
pub mod exact;
pub mod f16;
pub mod f32;
pub mod format;
pub mod fp4_e1m2;
pub mod fp4_e2m1;
pub mod fp8_e4m3fn;
pub mod fp8_e5m2;
pub mod narrow_f64;
pub mod rounding;

pub use format::{
    FloatFormat, Specials, BFLOAT16, FLOAT16, FLOAT32, FLOAT64, FP4_E1M2, FP4_E2M1, FP8_E4M3FN,
    FP8_E5M2,
};
pub use rounding::{Exact, NanPolicy, OverflowPolicy, Rounding, RoundingMode, SubnormalPolicy};

/// The element types that reference kernels read and write: the float subset of
/// [`ElemType`](crate::ops::ElemType). Names, parsing and conversions are in [`crate::dtype`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DType {
    F32,
    F16,
    Bf16,
}

impl DType {
    /// Size of one element in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::Bf16 => 2,
        }
    }

    /// Rounds an f32 to this dtype and back to f32 (the identity for f32).
    #[inline(always)]
    pub fn quantize_f32(self, x: f32, rounding: Rounding) -> f32 {
        match self {
            DType::F32 => x,
            DType::F16 => f16::quantize_f32_f16(x, rounding),
            DType::Bf16 => bf16::quantize_f32_bf16(x, rounding),
        }
    }

    /// Rounds an f64 to this dtype ONCE and returns the value as f64.
    #[inline]
    pub fn quantize_f64(self, x: f64, rounding: Rounding) -> f64 {
        match self {
            DType::F32 => self::f32::f64_to_f32(x, rounding) as f64,
            DType::F16 => f16::f16_to_f64(f16::f64_to_f16(x, rounding)),
            DType::Bf16 => bf16::bf16_to_f64(bf16::f64_to_bf16(x, rounding)),
        }
    }
}
