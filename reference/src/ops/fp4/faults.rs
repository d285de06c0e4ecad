//! Faults of the FP4 weight path (`mxfp4_dequant`, `nvfp4_dequant`, `w4a16_matmul`): element
//! and scale decoding, nibble order, the NVFP4 operation order and the final rounding.

use crate::dequant::{Fp4DequantRecipe, Fp4Element, ScaleDecode, ScaleOrder, W4a16Accumulation};
use crate::formats::{Rounding, RoundingMode, SubnormalPolicy};
use crate::ops::fault::swap_rounding_ties;
use crate::ops::fault::tensors::{get_mut, set_element};
use crate::ops::fault::{Edit, Fault, Requirement};
use crate::ops::{OpError, TensorMap};

const FP4_OPS: &[&str] = &["mxfp4_dequant", "nvfp4_dequant", "w4a16_matmul"];
const MX_OPS: &[&str] = &["mxfp4_dequant", "w4a16_matmul"];
const NV_OPS: &[&str] = &["nvfp4_dequant", "w4a16_matmul"];

fn is_mx(r: &Fp4DequantRecipe) -> bool {
    r.group_size == crate::dequant::mxfp4::MX_GROUP_SIZE
}

fn set_order(r: &mut Fp4DequantRecipe, order: ScaleOrder) -> bool {
    if is_mx(r) || r.order == order {
        return false;
    }
    r.order = order;
    true
}

fn set_mode(r: &mut Rounding, mode: RoundingMode) -> bool {
    if r.mode == mode {
        return false;
    }
    r.mode = mode;
    true
}

fn swap_nibbles(_: &serde_json::Value, inputs: &mut TensorMap) -> Result<bool, OpError> {
    let w = get_mut("fp4", inputs, "weight")?;
    let before = w.data.clone();
    w.data.iter_mut().for_each(|b| *b = b.rotate_left(4));
    Ok(w.data != before)
}

fn drop_global_scale(_: &serde_json::Value, inputs: &mut TensorMap) -> Result<bool, OpError> {
    let Some(g) = inputs.get_mut("global_scale") else {
        return Ok(false);
    };
    if g.data == 1.0f32.to_le_bytes() {
        return Ok(false);
    }
    set_element(g, 0, &1.0f32.to_le_bytes());
    Ok(true)
}

/// Group `g` of every row takes the scale of group `g + 1` (the last takes the first).
fn neighbour_group_scale(_: &serde_json::Value, inputs: &mut TensorMap) -> Result<bool, OpError> {
    let s = get_mut("w4a16_matmul", inputs, "scale")?;
    let groups = *s.shape.last().unwrap_or(&1);
    if groups < 2 {
        return Ok(false);
    }
    let before = s.data.clone();
    s.data
        .chunks_exact_mut(groups)
        .for_each(|row| row.rotate_left(1));
    Ok(s.data != before)
}

pub(crate) static FAULTS: &[Fault] = &[
    Fault {
        name: "fp4-subnormal-flushed",
        family: "fp4",
        ops: FP4_OPS,
        requirement: Requirement::Quick,
        description: "the E2M1/E1M2 subnormal codes (±0.5 for E2M1) decode to ±0 (a bit-placement decode on denormals-are-zero hardware)",
        edit: Edit::recipe(crate::recipe_edit!(crate::dequant::Fp4DequantRecipe, |r| {
            if r.fp4_subnormals == SubnormalPolicy::FlushToZero {
                return false;
            }
            r.fp4_subnormals = SubnormalPolicy::FlushToZero;
            true
        })),
    },
    Fault {
        name: "fp4-nibble-order-swapped",
        family: "fp4",
        ops: FP4_OPS,
        requirement: Requirement::Quick,
        description: "the two codes of each byte are read in the other order (high nibble first instead of low, or the reverse)",
        edit: Edit::inputs(swap_nibbles),
    },
    Fault {
        name: "fp4-e1m2-read-as-e2m1",
        family: "fp4",
        ops: FP4_OPS,
        requirement: Requirement::Quick,
        description: "E1M2 codes (torch_npu float4_e1m2fn_x2) decoded with the E2M1 table",
        edit: Edit::recipe(crate::recipe_edit!(crate::dequant::Fp4DequantRecipe, |r| {
            if r.element != Fp4Element::E1m2 {
                return false;
            }
            r.element = Fp4Element::E2m1;
            true
        })),
    },
    Fault {
        name: "e8m0-nan-as-inf",
        family: "fp4",
        ops: MX_OPS,
        requirement: Requirement::Quick,
        description: "the E8M0 NaN scale 0xFF is read as +Inf (an all-ones exponent field taken as IEEE infinity), so its group becomes ±Inf instead of NaN",
        edit: Edit::recipe(crate::recipe_edit!(crate::dequant::Fp4DequantRecipe, |r| {
            if !is_mx(r) || r.scale_decode != ScaleDecode::Standard {
                return false;
            }
            r.scale_decode = ScaleDecode::E8m0NanAsInf;
            true
        })),
    },
    Fault {
        name: "e8m0-code0-as-zero",
        family: "fp4",
        ops: MX_OPS,
        requirement: Requirement::Quick,
        description: "the E8M0 scale code 0 (2^-127, an f32 subnormal) is read as 0 (the scale built as `e << 23` with denormals flushed)",
        edit: Edit::recipe(crate::recipe_edit!(crate::dequant::Fp4DequantRecipe, |r| {
            if !is_mx(r) || r.scale_decode != ScaleDecode::Standard {
                return false;
            }
            r.scale_decode = ScaleDecode::E8m0ZeroAsZero;
            true
        })),
    },
    Fault {
        name: "e4m3-nan-as-finite",
        family: "fp4",
        ops: NV_OPS,
        requirement: Requirement::Quick,
        description: "the E4M3FN NaN code 0x7F is read as 480 (as if the format had infinities and no NaN code in that slot)",
        edit: Edit::recipe(crate::recipe_edit!(crate::dequant::Fp4DequantRecipe, |r| {
            if is_mx(r) || r.scale_decode != ScaleDecode::Standard {
                return false;
            }
            r.scale_decode = ScaleDecode::E4m3NanAsFinite;
            true
        })),
    },
    Fault {
        name: "nvfp4-global-scale-dropped",
        family: "fp4",
        ops: NV_OPS,
        requirement: Requirement::Quick,
        description: "the per-tensor f32 global scale is never applied",
        edit: Edit::inputs(drop_global_scale),
    },
    Fault {
        name: "nvfp4-order-a",
        family: "fp4",
        ops: NV_OPS,
        requirement: Requirement::Quick,
        description: "NVFP4 scales applied in order A, round(f32(f32(q * s) * g)), where the recipe uses another order",
        edit: Edit::recipe(crate::recipe_edit!(crate::dequant::Fp4DequantRecipe, |r| set_order(r, ScaleOrder::BlockThenGlobalF32))),
    },
    Fault {
        name: "nvfp4-order-b",
        family: "fp4",
        ops: NV_OPS,
        requirement: Requirement::Quick,
        description: "NVFP4 scales applied in order B, round(f32(q * f32(s * g))), where the recipe uses another order",
        edit: Edit::recipe(crate::recipe_edit!(crate::dequant::Fp4DequantRecipe, |r| set_order(r, ScaleOrder::CombinedScaleF32))),
    },
    Fault {
        name: "nvfp4-order-c",
        family: "fp4",
        ops: NV_OPS,
        requirement: Requirement::Quick,
        description: "NVFP4 scales applied in order C, one rounding of the exact q * s * g, where the recipe uses another order",
        edit: Edit::recipe(crate::recipe_edit!(crate::dequant::Fp4DequantRecipe, |r| set_order(r, ScaleOrder::ExactOnce))),
    },
    Fault {
        name: "nvfp4-order-d",
        family: "fp4",
        ops: NV_OPS,
        requirement: Requirement::Quick,
        description: "NVFP4 scales applied in order D, the combined scale s * g handed over as bf16, where the recipe uses another order",
        edit: Edit::recipe(crate::recipe_edit!(crate::dequant::Fp4DequantRecipe, |r| set_order(r, ScaleOrder::CombinedScaleBf16))),
    },
    Fault {
        name: "fp4-rounding-truncated",
        family: "fp4",
        ops: FP4_OPS,
        requirement: Requirement::Quick,
        description: "the final cast to bf16/f16 truncates (CAST_TRUNC) instead of rounding to nearest",
        edit: Edit::recipe(crate::recipe_edit!(crate::dequant::Fp4DequantRecipe, |r| set_mode(&mut r.rounding, RoundingMode::TowardZero))),
    },
    Fault {
        name: "fp4-rounding-ties-swapped",
        family: "fp4",
        ops: FP4_OPS,
        requirement: Requirement::Quick,
        description: "the final cast breaks ties the other way: away from zero (CAST_ROUND) where the recipe rounds ties to even (CAST_RINT), or the reverse",
        edit: Edit::recipe(crate::recipe_edit!(crate::dequant::Fp4DequantRecipe, |r| swap_rounding_ties(&mut r.rounding))),
    },
    Fault {
        name: "w4a16-accumulated-in-bf16",
        family: "w4a16",
        ops: &["w4a16_matmul"],
        requirement: Requirement::Quick,
        description: "the K reduction keeps its running sum in bf16 (each scale group's partial added and rounded) instead of f32",
        edit: Edit::recipe(crate::recipe_edit!(crate::dequant::Fp4DequantRecipe, |r| {
            if r.accumulation == W4a16Accumulation::Bf16PerGroup {
                return false;
            }
            r.accumulation = W4a16Accumulation::Bf16PerGroup;
            true
        })),
    },
    Fault {
        name: "w4a16-neighbour-group-scale",
        family: "w4a16",
        ops: &["w4a16_matmul"],
        requirement: Requirement::Quick,
        description: "each K group is dequantised with the scale of the next group (an off-by-one in the scale index)",
        edit: Edit::inputs(neighbour_group_scale),
    },
];
