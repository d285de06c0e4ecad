//! Faults of `quant_matmul` (W8A8): the accumulator's type, the place of each bias, the reach
//! of the per-channel and per-token scales, the order of the two scale products, the packing of
//! the scale `npu_trans_quant_param` makes, the int8 minimum, the tie rule of the output cast and
//! subnormal results flushed to zero; for the int8 output, the offset's sign and place, the tie
//! rule of the requantisation and its saturation.

use crate::formats::RoundingMode;
use crate::ops::fault::{Edit, Fault, Requirement};
use crate::ops::quant_matmul::{
    Accumulation, FloatBiasPlace, IntBiasPlace, OffsetPlace, QmmRecipe, ScalePack, TokenAxis,
};

const OPS: &[&str] = &["quant_matmul"];

pub(crate) static FAULTS: &[Fault] = &[
    Fault {
        name: "qmm-accumulate-f32",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the int8 products are summed in f32 (one rounding per addition, in k order) instead of an exact int32 accumulator: terms added while the sum is above 2^24 are lost",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if r.accumulation == Accumulation::F32Sequential {
                return false;
            }
            r.accumulation = Accumulation::F32Sequential;
            true
        })),
    },
    Fault {
        name: "qmm-scale-per-tensor",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the per-channel scale is read as per-tensor: column 0's scale dequantises every column",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if r.per_tensor_scale {
                return false;
            }
            r.per_tensor_scale = true;
            true
        })),
    },
    Fault {
        name: "qmm-pertoken-wrong-axis",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "pertoken_scale is broadcast along the wrong axis: element (i, j) takes the per-token scale at index j mod m instead of row i's",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if r.token_axis != TokenAxis::Row {
                return false;
            }
            r.token_axis = TokenAxis::ColumnModM;
            true
        })),
    },
    Fault {
        name: "qmm-scale-order-swapped",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the per-token scale enters in the other kernels' order: (acc * scale) * pertoken where the variant's kernel merges the scales first (the small-M opt kernel, acc * fl32(pertoken * scale)), and the merged order where the kernel dequantises first; the model that read the large-M kernel for every M",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            r.scale_order = r.scale_order.swapped();
            true
        })),
    },
    Fault {
        name: "qmm-int-bias-after-dequant",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the int32 bias is added after the dequantisation (unscaled) instead of into the int32 accumulator before it",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if r.int_bias != IntBiasPlace::BeforeDequant {
                return false;
            }
            r.int_bias = IntBiasPlace::AfterDequant;
            true
        })),
    },
    Fault {
        name: "qmm-float-bias-before-dequant",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the f32/bf16 bias is added to the accumulator before the scales (so it is scaled) instead of after them",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if r.float_bias != FloatBiasPlace::AfterScales {
                return false;
            }
            r.float_bias = FloatBiasPlace::BeforeScales;
            true
        })),
    },
    Fault {
        name: "qmm-output-ties-away",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the final cast to bf16/f16 rounds exact ties away from zero (CAST_ROUND) instead of to even (CAST_RINT)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if r.output_rounding != RoundingMode::NearestTiesToEven {
                return false;
            }
            r.output_rounding = RoundingMode::NearestTiesAway;
            true
        })),
    },
    Fault {
        name: "qmm-packed-scale-rounded",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the packed (int64) scale rounds the f32 to its top 19 bits (ties to even) instead of truncating them as npu_trans_quant_param does",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if r.scale_pack != ScalePack::Truncate19 {
                return false;
            }
            r.scale_pack = ScalePack::RoundEven19;
            true
        })),
    },
    Fault {
        name: "qmm-packed-scale-full-f32",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the packed scale is applied with all 32 bits of the f32 instead of the 19 the packed word keeps",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if r.scale_pack == ScalePack::FullF32 {
                return false;
            }
            r.scale_pack = ScalePack::FullF32;
            true
        })),
    },
    Fault {
        name: "qmm-int8-min-clamped",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "an int8 operand of -128 is read as -127 (a symmetric clamp of the operands)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if r.operand_min != -128 {
                return false;
            }
            r.operand_min = -127;
            true
        })),
    },
    Fault {
        name: "qmm-offset-negated",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the int8 output's offset is subtracted instead of added",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if r.offset_negated {
                return false;
            }
            r.offset_negated = true;
            true
        })),
    },
    Fault {
        name: "qmm-offset-before-scale",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the int8 output's offset is added to the accumulator before the scale, (acc + offset) * scale, instead of to the rounded scaled value",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if r.offset_place != OffsetPlace::AfterRounding {
                return false;
            }
            r.offset_place = OffsetPlace::BeforeScale;
            true
        })),
    },
    Fault {
        name: "qmm-requant-ties-away",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the int8 requantisation rounds exact ties of the scaled value away from zero instead of to even",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if r.requant_rounding != RoundingMode::NearestTiesToEven {
                return false;
            }
            r.requant_rounding = RoundingMode::NearestTiesAway;
            true
        })),
    },
    Fault {
        name: "qmm-int8-wraps",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the int8 output does not saturate: a requantised value beyond [-128, 127] wraps in two's complement",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if !r.saturate {
                return false;
            }
            r.saturate = false;
            true
        })),
    },
    Fault {
        name: "qmm-subnormals-flushed",
        family: "quant_matmul",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the dequantisation epilogue runs with flush-to-zero: every f32 product or sum that is subnormal, and a bf16/f16 output cast whose result is subnormal, gives zero of its sign instead of the subnormal",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::quant_matmul::QmmRecipe, |r: &mut QmmRecipe| {
            if r.flush_subnormals {
                return false;
            }
            r.flush_subnormals = true;
            true
        })),
    },
];
