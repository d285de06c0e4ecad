//! What a real FP4 dequantisation kernel does, as data: element format, group size, packing
//! layout, scale-application order, FP4 subnormal handling, output type and the final rounding.
//!
//! Named presets reproduce specific kernels; see [`Fp4DequantRecipe::preset`] and
//! [`PRESET_NAMES`].

use super::error::DequantError;
use super::packing::{PackingLayout, TilePermutation};
use crate::formats::{Rounding, SubnormalPolicy};
use crate::knob::{rounding_name, Knob};

/// The 4-bit element format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fp4Element {
    /// OCP E2M1 (MXFP4, NVFP4): ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
    E2m1,
    /// E1M2 (torch_npu `float4_e1m2fn_x2`): ±{0, 0.25, .., 1.75}.
    E1m2,
}

/// The 16-bit output type of the dequantised weights: the 16-bit subset of
/// [`DType`](crate::formats::DType). Names, parsing and conversions are in [`crate::dtype`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HalfType {
    Bf16,
    F16,
}

/// How an NVFP4 element `q`, its E4M3 block scale `s` and the f32 per-tensor scale `g` are
/// combined before the final rounding to the output type. `q * s` is always exact (at most 6
/// significant bits), so rounding happens only where `g` enters.
///
/// MXFP4 has no `g`: under [`ScaleOrder::ExactOnce`] its product `q * 2^(e-127)` is rounded
/// once from the exact value; under every other order it is formed in f32 first (exact, or ±Inf
/// on overflow whatever the final mode) and then rounded. The two differ only on overflow in
/// the modes that do not round to infinity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaleOrder {
    /// (A) `round(f32(f32(q * s) * g))`: the block scale first, then the global scale, in f32.
    BlockThenGlobalF32,
    /// (B) `round(f32(q * f32(s * g)))`: the scales are combined first in f32 (vLLM).
    CombinedScaleF32,
    /// (C) `round(q * s * g)` with the product exact: one rounding in total.
    ExactOnce,
    /// (D) `round(f32(q * bf16_rne(f32(s * g))))`: the combined scale is handed to the kernel as
    /// bf16 (rounded to nearest even), then multiplied in f32 (QingCheng W4A16 grouped GEMM).
    CombinedScaleBf16,
}

impl ScaleOrder {
    /// Every order, for exhaustive tests.
    pub const ALL: [ScaleOrder; 4] = [
        ScaleOrder::BlockThenGlobalF32,
        ScaleOrder::CombinedScaleF32,
        ScaleOrder::ExactOnce,
        ScaleOrder::CombinedScaleBf16,
    ];
}

/// How a kernel decodes its scale codes. Every preset decodes them as their formats define
/// ([`ScaleDecode::Standard`]); the other variants are the decoding bugs the fault catalogue
/// models, kept here so that a fault is a recipe value and not a fork of the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaleDecode {
    /// OCP: E8M0 `e` is `2^(e-127)` (code 0 is 2^-127, 0xFF is NaN); E4M3FN 0x7F/0xFF is NaN.
    Standard,
    /// E8M0 0xFF read as +Inf (an exponent field of all ones taken as IEEE infinity).
    E8m0NanAsInf,
    /// E8M0 code 0 read as 0 (the scale built as `e << 23` with denormals flushed).
    E8m0ZeroAsZero,
    /// E4M3FN NaN code (S.1111.111) read as the finite 480 (as if it were IEEE-like E4M3).
    E4m3NanAsFinite,
}

impl ScaleDecode {
    /// The E8M0 scale `code` as this decoding sees it.
    pub fn e8m0(self, code: u8) -> f32 {
        match (self, code) {
            (ScaleDecode::E8m0NanAsInf, 0xFF) => f32::INFINITY,
            (ScaleDecode::E8m0ZeroAsZero, 0) => 0.0,
            _ => crate::formats::e8m0::e8m0_to_f32(code),
        }
    }

    /// The E4M3FN scale `code` as this decoding sees it.
    pub fn e4m3(self, code: u8) -> f32 {
        match (self, code & 0x7F) {
            (ScaleDecode::E4m3NanAsFinite, 0x7F) => {
                if code & 0x80 != 0 {
                    -480.0
                } else {
                    480.0
                }
            }
            _ => crate::formats::fp8_e4m3fn::e4m3fn_to_f32(code),
        }
    }
}

/// How W4A16 matmul accumulates `x * dequant(w)` along K (ignored by the dequant ops).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum W4a16Accumulation {
    /// f32 in the 16-lane order of `dot_f32`, rounded once at the end (every preset).
    F32,
    /// Fault model: each scale group's f32 partial sum is added into a bf16 accumulator
    /// (rounded to nearest even after every group). No preset uses it.
    Bf16PerGroup,
}

/// A complete description of one FP4 -> 16-bit dequantisation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Fp4DequantRecipe {
    /// The 4-bit element format.
    pub element: Fp4Element,
    /// Elements per scale along the reduction axis K (32 for MX, 16 for NVFP4). Must be even
    /// and non-zero.
    pub group_size: usize,
    /// How the codes are packed two per byte.
    pub layout: PackingLayout,
    /// NVFP4 scale-application order (ignored by MXFP4, see [`ScaleOrder`]).
    pub order: ScaleOrder,
    /// FP4 subnormal codes (±0.5 for E2M1) as the kernel sees them: kept, or flushed to ±0 as
    /// when the seed's bit-placement decode runs on hardware with denormals-are-zero (the
    /// placed BF16 field of a subnormal code is itself subnormal).
    pub fp4_subnormals: SubnormalPolicy,
    /// The output type.
    pub output: HalfType,
    /// The final rounding point (mode, output FTZ, NaN encoding, overflow).
    pub rounding: Rounding,
    /// How the scale codes are decoded (always [`ScaleDecode::Standard`] in the presets).
    pub scale_decode: ScaleDecode,
    /// How W4A16 matmul accumulates (always [`W4a16Accumulation::F32`] in the presets).
    pub accumulation: W4a16Accumulation,
}

/// The names [`Fp4DequantRecipe::preset`] accepts.
pub const PRESET_NAMES: [&str; 4] = [
    "mx_ocp",
    "vllm_nvfp4",
    "ascend_qingcheng_fp4_dequant",
    "ascend_qingcheng_w4a16",
];

/// The split-halves tile (bytes) used by the `ascend_qingcheng_fp4_dequant` preset: one
/// scale group's worth of bytes. The kernel (`dequant_kernels/fp4_to_bf16_custom.cpp`,
/// `Compute`) moves the high nibbles of `BLOCK_SIZE` consecutive bytes to the first
/// `BLOCK_SIZE` outputs and their low nibbles to the next `BLOCK_SIZE`; its callers pass
/// `BLOCK_SIZE = 16` (the NVFP4 group). An earlier guess of 64 bytes was wrong (ledger row
/// `dq.ascend_qingcheng_fp4_dequant.layout`). A kernel with another tile is
/// `PackingLayout::split_halves(B)` with its own `B`.
pub const QINGCHENG_SPLIT_HALVES_BYTES: usize = 16;

impl Fp4DequantRecipe {
    /// OCP Microscaling v1.0 MXFP4 -> BF16: E2M1 elements, groups of 32 along K sharing one
    /// E8M0 scale X, `v = X * P` formed exactly and rounded once to BF16 with ties to even;
    /// overflow gives ±Inf, a NaN scale (0xFF) makes the whole group NaN, subnormal results
    /// (e.g. 0.5 * 2^-127) are kept. Low-nibble-first packing as PyTorch `float4_e2m1fn_x2`.
    pub fn mx_ocp() -> Fp4DequantRecipe {
        Fp4DequantRecipe {
            element: Fp4Element::E2m1,
            group_size: 32,
            layout: PackingLayout::LOW_FIRST,
            order: ScaleOrder::ExactOnce,
            fp4_subnormals: SubnormalPolicy::Keep,
            output: HalfType::Bf16,
            rounding: Rounding::RNE,
            scale_decode: ScaleDecode::Standard,
            accumulation: W4a16Accumulation::F32,
        }
    }

    /// vLLM's NVFP4 weight dequantisation (its Python NVFP4 reference path, as recorded in
    /// the project's numerics notes): E2M1 codes low nibble first, groups of 16 with an E4M3FN block scale, the f32 global
    /// scale folded into the block scale first (`q * f32(s * g)`, order B), cast to BF16 with
    /// round-to-nearest-even.
    pub fn vllm_nvfp4() -> Fp4DequantRecipe {
        Fp4DequantRecipe {
            element: Fp4Element::E2m1,
            group_size: 16,
            layout: PackingLayout::LOW_FIRST,
            order: ScaleOrder::CombinedScaleF32,
            fp4_subnormals: SubnormalPolicy::Keep,
            output: HalfType::Bf16,
            rounding: Rounding::RNE,
            scale_decode: ScaleDecode::Standard,
            accumulation: W4a16Accumulation::F32,
        }
    }

    /// The open-source Ascend soft-FP4 dequant kernel (QingCheng ascend-kernel,
    /// `dequant_kernels/fp4_to_bf16_custom.cpp`, the seed 002 talk), as its source reads:
    /// codes in the "split halves" layout ([`QINGCHENG_SPLIT_HALVES_BYTES`] bytes per tile);
    /// the E4M3 block scale built by bit placement, so the NaN codes 0x7F/0xFF read as ±480
    /// ([`ScaleDecode::E4m3NanAsFinite`]); the global scale folded into the block scale first
    /// in f32 (order B: the placed scale times `g * 2^120`, which is `f32(s * g)` while
    /// `|g| < 2^8`); the value built by bit placement and multiplied by that scale in f32;
    /// the final cast to BF16 with CAST_ROUND (nearest, ties AWAY from zero). FP4 subnormals
    /// are kept (IEEE behaviour of the vector unit, an assumption); a DAZ build is this recipe
    /// with `fp4_subnormals = FlushToZero`. Sources and status per field: docs/ascend.md.
    pub fn ascend_qingcheng_fp4_dequant() -> Fp4DequantRecipe {
        Fp4DequantRecipe {
            element: Fp4Element::E2m1,
            group_size: 16,
            layout: PackingLayout::split_halves(QINGCHENG_SPLIT_HALVES_BYTES),
            order: ScaleOrder::CombinedScaleF32,
            fp4_subnormals: SubnormalPolicy::Keep,
            output: HalfType::Bf16,
            rounding: Rounding::RNA,
            scale_decode: ScaleDecode::E4m3NanAsFinite,
            accumulation: W4a16Accumulation::F32,
        }
    }

    /// The QingCheng W4A16 grouped GEMM on Atlas A2 (seed 002, used through chitu): groups of
    /// 16, element `2i` in the low nibble and `2i + 1` in the high nibble (chitu's packing),
    /// the scale passed to the kernel as `bf16(e4m3 * g)` (order D), the dequant multiply in
    /// f32 and the cast to BF16 with CAST_RINT (ties to even).
    pub fn ascend_qingcheng_w4a16() -> Fp4DequantRecipe {
        Fp4DequantRecipe {
            element: Fp4Element::E2m1,
            group_size: 16,
            layout: PackingLayout::LOW_FIRST,
            order: ScaleOrder::CombinedScaleBf16,
            fp4_subnormals: SubnormalPolicy::Keep,
            output: HalfType::Bf16,
            rounding: Rounding::RNE,
            scale_decode: ScaleDecode::Standard,
            accumulation: W4a16Accumulation::F32,
        }
    }

    /// Every field as a ledger knob `dq.<preset>.<field>` (docs/ascend.md); `preset` is the
    /// name the recipe was built from. The destructuring makes a new field a compile error
    /// until it is a knob.
    pub fn knobs(&self, preset: &str) -> Vec<Knob> {
        let Fp4DequantRecipe {
            element,
            group_size,
            layout,
            order,
            fp4_subnormals,
            output,
            rounding,
            scale_decode,
            accumulation,
        } = self;
        let k = |field: &str, value: String| Knob::new(format!("dq.{preset}.{field}"), value);
        let layout = match (&layout.nibble_order, &layout.permutation) {
            (n, TilePermutation::Identity) => format!("{n:?}"),
            (_, TilePermutation::SplitHalves { bytes }) => format!("split halves, {bytes} bytes"),
            (n, TilePermutation::Explicit(p)) => format!("{n:?}, permutation of {}", p.len()),
        };
        vec![
            k("element", format!("{element:?}")),
            k("group_size", group_size.to_string()),
            k("layout", layout),
            k("order", format!("{order:?}")),
            k("fp4_subnormals", format!("{fp4_subnormals:?}")),
            k("output", format!("{output:?}")),
            k("rounding", rounding_name(rounding)),
            k("scale_decode", format!("{scale_decode:?}")),
            k("accumulation", format!("{accumulation:?}")),
        ]
    }

    /// The preset called `name` (one of [`PRESET_NAMES`]), or `None`.
    pub fn preset(name: &str) -> Option<Fp4DequantRecipe> {
        Some(match name {
            "mx_ocp" => Self::mx_ocp(),
            "vllm_nvfp4" => Self::vllm_nvfp4(),
            "ascend_qingcheng_fp4_dequant" => Self::ascend_qingcheng_fp4_dequant(),
            "ascend_qingcheng_w4a16" => Self::ascend_qingcheng_w4a16(),
            _ => return None,
        })
    }

    /// Checks the recipe's own fields (group size, layout).
    pub fn validate(&self) -> Result<(), DequantError> {
        if self.group_size == 0 || !self.group_size.is_multiple_of(2) {
            return Err(DequantError::InvalidRecipe {
                field: "group_size",
                reason: "must be a positive even number",
            });
        }
        self.layout.slot_table().map(|_| ())
    }
}
