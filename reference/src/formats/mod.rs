//! Number formats and the rounding points between them.
//!
//! One file per format. Every conversion names a [`Rounding`] (mode + subnormal, NaN and
//! overflow policies) and rounds exactly once, through [`rounding::round_exact`] or a fast path
//! proven equal to it by the exhaustive tests.

pub mod bf16;
pub mod e8m0;
pub mod f16;
pub mod f32;
pub mod format;
pub mod fp4_e1m2;
pub mod fp4_e2m1;
pub mod fp8_e4m3fn;
pub mod fp8_e5m2;
pub mod rounding;

pub use format::{
    FloatFormat, Specials, BFLOAT16, FLOAT16, FLOAT32, FLOAT64, FP4_E1M2, FP4_E2M1, FP8_E4M3FN,
    FP8_E5M2,
};
pub use rounding::{Exact, NanPolicy, OverflowPolicy, Rounding, RoundingMode, SubnormalPolicy};

/// The element types that reference kernels read and write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DType {
    F32,
    F16,
    Bf16,
}

impl DType {
    /// The suite/safetensors-style name (`f32`, `f16`, `bf16`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
        }
    }

    /// Parses `f32`, `f16`/`float16`/`half`, `bf16`/`bfloat16`.
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s.to_ascii_lowercase().as_str() {
            "f32" | "float32" | "fp32" => DType::F32,
            "f16" | "float16" | "fp16" | "half" => DType::F16,
            "bf16" | "bfloat16" => DType::Bf16,
            _ => return None,
        })
    }

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
