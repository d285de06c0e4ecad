//! Faults of the output range: infinities saturated to the largest finite value, subnormal
//! outputs flushed to zero (each per output dtype, as kernels get them wrong per cast), and a
//! dequantisation that clamps the E8M0 scale exponent into the f32 normal range. They show
//! only in the range regimes (`overflow_to_inf`, `subnormal_outputs`, `format_extremes`),
//! which the cases that declare them hold on every seed.

use super::{Edit, Fault, Requirement};
use crate::ops::fault::tensors::get_mut;
use crate::ops::{ElemType, OpError, TensorMap};

/// The ops whose outputs the range regimes reach.
const RANGE_OPS: &[&str] = &[
    "mxfp4_dequant",
    "nvfp4_dequant",
    "w4a16_matmul",
    "mc2_matmul_allreduce",
];

/// Rewrites every element of the 16-bit float outputs of dtype `dtype` with `f` (bits in,
/// bits out); whether any element changed.
fn map_bits(outputs: &mut TensorMap, dtype: ElemType, f: impl Fn(u16) -> u16) -> bool {
    let mut changed = false;
    for t in outputs.values_mut().filter(|t| t.dtype == dtype) {
        for pair in t.data.chunks_exact_mut(2) {
            let b = u16::from_le_bytes([pair[0], pair[1]]);
            let nb = f(b);
            if nb != b {
                pair.copy_from_slice(&nb.to_le_bytes());
                changed = true;
            }
        }
    }
    changed
}

/// The exponent mask and the largest finite magnitude's bits of f16 / bf16.
fn layout(dtype: ElemType) -> (u16, u16) {
    match dtype {
        ElemType::F16 => (0x7C00, 0x7BFF),
        _ => (0x7F80, 0x7F7F),
    }
}

/// +-Inf becomes +-the largest finite value (a cast with saturation).
fn saturate(dtype: ElemType, outputs: &mut TensorMap) -> bool {
    let (exp, max) = layout(dtype);
    map_bits(outputs, dtype, |b| {
        if b & 0x7FFF == exp {
            (b & 0x8000) | max
        } else {
            b
        }
    })
}

/// Nonzero subnormals become zero of the same sign (flush-to-zero on the output cast).
fn flush(dtype: ElemType, outputs: &mut TensorMap) -> bool {
    let (exp, _) = layout(dtype);
    map_bits(outputs, dtype, |b| {
        if b & exp == 0 && b & 0x7FFF != 0 {
            b & 0x8000
        } else {
            b
        }
    })
}

fn saturate_f16(_: &serde_json::Value, _: &TensorMap, o: &mut TensorMap) -> Result<bool, OpError> {
    Ok(saturate(ElemType::F16, o))
}
fn saturate_bf16(_: &serde_json::Value, _: &TensorMap, o: &mut TensorMap) -> Result<bool, OpError> {
    Ok(saturate(ElemType::Bf16, o))
}
fn flush_f16(_: &serde_json::Value, _: &TensorMap, o: &mut TensorMap) -> Result<bool, OpError> {
    Ok(flush(ElemType::F16, o))
}
fn flush_bf16(_: &serde_json::Value, _: &TensorMap, o: &mut TensorMap) -> Result<bool, OpError> {
    Ok(flush(ElemType::Bf16, o))
}

/// E8M0 code 0 (2^-127, an f32 subnormal) read as code 1 (2^-126): the scale's exponent
/// clamped to the f32 normal range.
fn clamp_e8m0(params: &serde_json::Value, inputs: &mut TensorMap) -> Result<bool, OpError> {
    // mxfp4_dequant has no `format`; w4a16_matmul names its own.
    let mx = match params.get("format").and_then(|f| f.as_str()) {
        None => true,
        Some(f) => f == "mxfp4",
    };
    if !mx {
        return Ok(false);
    }
    let s = get_mut("fp4", inputs, "scale")?;
    let mut changed = false;
    for b in s.data.iter_mut().filter(|b| **b == 0) {
        *b = 1;
        changed = true;
    }
    Ok(changed)
}

pub(super) static FAULTS: &[Fault] = &[
    Fault {
        name: "range-inf-saturated-f16",
        family: "range",
        ops: RANGE_OPS,
        requirement: Requirement::Quick,
        description: "f16 outputs that overflow come out as +-65504 instead of +-Inf (a saturating cast)",
        edit: Edit::outputs(saturate_f16),
    },
    Fault {
        name: "range-inf-saturated-bf16",
        family: "range",
        ops: RANGE_OPS,
        requirement: Requirement::Quick,
        description: "bf16 outputs that overflow come out as +-bf16::MAX (0x7F7F) instead of +-Inf (a saturating cast)",
        edit: Edit::outputs(saturate_bf16),
    },
    Fault {
        name: "range-subnormals-flushed-f16",
        family: "range",
        ops: RANGE_OPS,
        requirement: Requirement::Quick,
        description: "f16 subnormal outputs are flushed to zero of the same sign (flush-to-zero on the output cast)",
        edit: Edit::outputs(flush_f16),
    },
    Fault {
        name: "range-subnormals-flushed-bf16",
        family: "range",
        ops: RANGE_OPS,
        requirement: Requirement::Quick,
        description: "bf16 subnormal outputs are flushed to zero of the same sign (flush-to-zero on the output cast)",
        edit: Edit::outputs(flush_bf16),
    },
    Fault {
        name: "e8m0-exponent-clamped",
        family: "fp4",
        ops: &["mxfp4_dequant", "w4a16_matmul"],
        requirement: Requirement::Quick,
        description: "the E8M0 scale exponent is clamped to the f32 normal range: code 0 (2^-127) is read as 2^-126, doubling its group",
        edit: Edit::inputs(clamp_e8m0),
    },
];
