//! `pa_decode_int8`'s recipe ([`C8Recipe`]): how the INT8 cache write quantises and how the
//! decode dequantises (form, precision, the token index of a per-token scale), and its
//! presets; the attention half runs the attention recipe the preset names.

use crate::formats::{Rounding, RoundingMode};
use crate::knob::Knob;

/// The recipe presets.
pub const PRESETS: [&str; 2] = ["ascend_ifa_c8", "c8_dequant_in_dtype"];

/// How the dequantised value is formed from the int8 `y`, the scale `s` and the offset `o`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DequantForm {
    /// `(y + o) * s` (the IFA kernel: Add of the offset, then Mul of the scale).
    AddThenScale,
    /// `y * s + o` (the offset applied after the scale; a bug).
    ScaleThenAdd,
    /// `(y - o) * s` (the offset's sign flipped; vLLM's own convention passed to FIA unchanged).
    SubtractThenScale,
}

/// The precision the dequantisation runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DequantPrecision {
    /// f32 (the kernel widens int8 and the parameters exactly, then Add and Mul in f32).
    F32,
    /// Each step rounded to the query dtype (RNE).
    QueryDtype,
}

/// Where a per-token scale is read in its `[1, B, S]` tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenIndex {
    /// `b * S + position`.
    BatchThenPosition,
    /// `position * B + b` (the two axes' strides swapped; a bug).
    PositionThenBatch,
}

/// The numerics of one `pa_decode_int8` step.
#[derive(Clone, Debug, PartialEq)]
pub struct C8Recipe {
    /// The write's cast to an integer.
    pub rounding: RoundingMode,
    /// Whether the write clamps to [-128, 127] (false: the low 8 bits are kept, a bug).
    pub saturate: bool,
    /// The write subtracts the FIA offset (`x * inv - o`); false adds it (a sign bug).
    pub write_subtracts_offset: bool,
    /// Added to every slot of the slot mapping (0; 1 is an off-by-one).
    pub slot_shift: usize,
    pub dequant: DequantForm,
    pub dequant_precision: DequantPrecision,
    /// One scale and offset for the whole tensor (element 0) instead of per channel (a bug).
    pub per_tensor: bool,
    /// Per-channel parameters read for KV head `(h + head_shift) % KV_N` (0; 1 is a bug).
    pub head_shift: usize,
    pub token_index: TokenIndex,
    /// The value cache dequantised with the key's scale and offset (a bug).
    pub value_uses_key_params: bool,
    /// Dequantised values below the query dtype's smallest normal read as zero of their sign
    /// (true: a kernel that flushes subnormals after the dequantisation, a bug).
    pub dequant_flushes_subnormals: bool,
    /// The attention recipe run on the dequantised cache.
    pub attention: &'static str,
}

impl C8Recipe {
    /// A preset by name.
    pub fn preset(name: &str) -> Option<C8Recipe> {
        let kernel = C8Recipe {
            rounding: RoundingMode::NearestTiesToEven,
            saturate: true,
            write_subtracts_offset: true,
            slot_shift: 0,
            dequant: DequantForm::AddThenScale,
            dequant_precision: DequantPrecision::F32,
            per_tensor: false,
            head_shift: 0,
            token_index: TokenIndex::BatchThenPosition,
            value_uses_key_params: false,
            dequant_flushes_subnormals: false,
            attention: "ascend_ifa_bf16",
        };
        match name {
            "ascend_ifa_c8" => Some(kernel),
            "c8_dequant_in_dtype" => Some(C8Recipe {
                dequant_precision: DequantPrecision::QueryDtype,
                ..kernel
            }),
            _ => None,
        }
    }

    /// The ledger knobs of this recipe as preset `preset` (docs/ascend.md, ids
    /// `c8.<preset>.<field>`); destructures the struct, so a new field does not compile until
    /// it has a knob.
    pub fn knobs(&self, preset: &str) -> Vec<Knob> {
        let C8Recipe {
            rounding,
            saturate,
            write_subtracts_offset,
            slot_shift,
            dequant,
            dequant_precision,
            per_tensor,
            head_shift,
            token_index,
            value_uses_key_params,
            dequant_flushes_subnormals,
            attention,
        } = self;
        vec![
            Knob::new(
                format!("c8.{preset}.rounding"),
                crate::knob::rounding_name(&Rounding::ieee(*rounding)),
            ),
            Knob::new(format!("c8.{preset}.saturate"), format!("{saturate}")),
            Knob::new(
                format!("c8.{preset}.write_subtracts_offset"),
                format!("{write_subtracts_offset}"),
            ),
            Knob::new(format!("c8.{preset}.slot_shift"), format!("{slot_shift}")),
            Knob::new(format!("c8.{preset}.dequant"), format!("{dequant:?}")),
            Knob::new(
                format!("c8.{preset}.dequant_precision"),
                format!("{dequant_precision:?}"),
            ),
            Knob::new(format!("c8.{preset}.per_tensor"), format!("{per_tensor}")),
            Knob::new(format!("c8.{preset}.head_shift"), format!("{head_shift}")),
            Knob::new(
                format!("c8.{preset}.token_index"),
                format!("{token_index:?}"),
            ),
            Knob::new(
                format!("c8.{preset}.value_uses_key_params"),
                format!("{value_uses_key_params}"),
            ),
            Knob::new(
                format!("c8.{preset}.dequant_flushes_subnormals"),
                format!("{dequant_flushes_subnormals}"),
            ),
            Knob::new(format!("c8.{preset}.attention"), attention.to_string()),
        ]
    }
}
