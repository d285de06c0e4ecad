//! Faults of `pa_decode_int8` (quantise-on-write into an INT8 paged cache, then decode
//! attention dequantising with antiquant scales): which scale and offset an element reads (head,
//! tensor-wide, per-token axis, key for value), the dequantisation formula (offset sign, offset
//! after the scale, its precision), and the write (tie rule, saturation, offset sign, slot).

use crate::formats::RoundingMode;
use crate::ops::fault::{Edit, Fault, Requirement};
use crate::ops::pa_decode_int8::{C8Recipe, DequantForm, DequantPrecision, TokenIndex};

const OPS: &[&str] = &["pa_decode_int8"];

pub(crate) static FAULTS: &[Fault] = &[
    Fault {
        name: "c8-scale-wrong-head",
        family: "pa_decode_int8",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "per-channel antiquant scale and offset read for the next KV head ((h + 1) % KV_N) in the write and the dequantisation",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::pa_decode_int8::C8Recipe, |r: &mut C8Recipe| {
            r.head_shift = 1;
            true
        })),
    },
    Fault {
        name: "c8-scale-per-tensor",
        family: "pa_decode_int8",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "one scale and offset (the tensor's first) for every channel or token instead of one each",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::pa_decode_int8::C8Recipe, |r: &mut C8Recipe| {
            if r.per_tensor {
                return false;
            }
            r.per_tensor = true;
            true
        })),
    },
    Fault {
        name: "c8-per-token-wrong-axis",
        family: "pa_decode_int8",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the per-token [1, B, S] scale read at position * B + b instead of b * S + position (the batch and sequence strides swapped)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::pa_decode_int8::C8Recipe, |r: &mut C8Recipe| {
            if r.token_index != TokenIndex::BatchThenPosition {
                return false;
            }
            r.token_index = TokenIndex::PositionThenBatch;
            true
        })),
    },
    Fault {
        name: "c8-offset-sign",
        family: "pa_decode_int8",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "attention dequantises with (y - offset) * scale instead of FIA's (y + offset) * scale (vLLM's offset convention handed to FIA unchanged)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::pa_decode_int8::C8Recipe, |r: &mut C8Recipe| {
            if r.dequant != DequantForm::AddThenScale {
                return false;
            }
            r.dequant = DequantForm::SubtractThenScale;
            true
        })),
    },
    Fault {
        name: "c8-offset-after-scale",
        family: "pa_decode_int8",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "attention dequantises with y * scale + offset instead of (y + offset) * scale",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::pa_decode_int8::C8Recipe, |r: &mut C8Recipe| {
            if r.dequant != DequantForm::AddThenScale {
                return false;
            }
            r.dequant = DequantForm::ScaleThenAdd;
            true
        })),
    },
    Fault {
        name: "c8-dequant-in-dtype",
        family: "pa_decode_int8",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the dequantised K and V rounded to the query dtype after each step instead of kept in f32",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::pa_decode_int8::C8Recipe, |r: &mut C8Recipe| {
            if r.dequant_precision != DequantPrecision::F32 {
                return false;
            }
            r.dequant_precision = DequantPrecision::QueryDtype;
            true
        })),
    },
    Fault {
        name: "c8-value-uses-key-scale",
        family: "pa_decode_int8",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the value cache dequantised with the key's antiquant scale and offset",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::pa_decode_int8::C8Recipe, |r: &mut C8Recipe| {
            if r.value_uses_key_params {
                return false;
            }
            r.value_uses_key_params = true;
            true
        })),
    },
    Fault {
        name: "c8-write-ties-away",
        family: "pa_decode_int8",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the write's cast to int8 rounds exact .5 ties away from zero (CAST_ROUND) instead of to even (torch.round)",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::pa_decode_int8::C8Recipe, |r: &mut C8Recipe| {
            if r.rounding != RoundingMode::NearestTiesToEven {
                return false;
            }
            r.rounding = RoundingMode::NearestTiesAway;
            true
        })),
    },
    Fault {
        name: "c8-write-no-saturation",
        family: "pa_decode_int8",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the write keeps the low 8 bits of the rounded integer instead of clamping it to [-128, 127]",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::pa_decode_int8::C8Recipe, |r: &mut C8Recipe| {
            if !r.saturate {
                return false;
            }
            r.saturate = false;
            true
        })),
    },
    Fault {
        name: "c8-write-offset-sign",
        family: "pa_decode_int8",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the write adds the FIA offset (x / s + o) instead of subtracting it, so dequantisation does not give x back",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::pa_decode_int8::C8Recipe, |r: &mut C8Recipe| {
            if !r.write_subtracts_offset {
                return false;
            }
            r.write_subtracts_offset = false;
            true
        })),
    },
    Fault {
        name: "c8-slot-off-by-one",
        family: "pa_decode_int8",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "the quantised write goes to slot_mapping + 1: the right slot keeps its stale value and the next one is overwritten",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::pa_decode_int8::C8Recipe, |r: &mut C8Recipe| {
            r.slot_shift = 1;
            true
        })),
    },
    Fault {
        name: "c8-dequant-subnormals-flushed",
        family: "pa_decode_int8",
        ops: OPS,
        requirement: Requirement::Quick,
        description: "dequantised values below the query dtype's smallest normal read as zero (a kernel that flushes subnormals after (y + offset) * scale): the value columns of subnormal_outputs then give zeros",
        edit: Edit::recipe(crate::recipe_edit!(crate::ops::pa_decode_int8::C8Recipe, |r: &mut C8Recipe| {
            if r.dequant_flushes_subnormals {
                return false;
            }
            r.dequant_flushes_subnormals = true;
            true
        })),
    },
];
