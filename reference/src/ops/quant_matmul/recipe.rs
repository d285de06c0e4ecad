//! `quant_matmul`'s recipe ([`QmmRecipe`]): the knobs of the A2 kernel's arithmetic, its
//! presets, and the arithmetic steps they name (the int32 to f32 conversion, the scale packing
//! of `npu_trans_quant_param`, the requantisation's rounding to an integer, the output cast).

use crate::formats::format::FLOAT32;
use crate::formats::{bf16, f16, Exact, Rounding, RoundingMode};
use crate::knob::Knob;
use crate::ops::ElemType;

/// How the int8 products are summed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accumulation {
    /// Exact int32 (the cube's integer accumulator).
    Int32,
    /// f32, one rounding per addition, in increasing k (a kernel that runs the products through
    /// a float unit; a bug).
    F32Sequential,
}

/// Where an int32 bias is added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntBiasPlace {
    /// Into the int32 accumulator, before the dequantisation (the kernel: the cube's bias).
    BeforeDequant,
    /// Converted to f32 and added after the scales (a bug: the bias is then not scaled).
    AfterDequant,
}

/// Where a float (f32 or bf16) bias is added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatBiasPlace {
    /// In f32 after both scales (the kernel's vector epilogue).
    AfterScales,
    /// To the f32 accumulator before the scales (a bug).
    BeforeScales,
}

/// What the packed (int64) scale keeps of the f32 scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalePack {
    /// The top 19 bits (sign, exponent, 10 mantissa bits), truncated: `bits & 0xFFFFE000`
    /// (`npu_trans_quant_param`, round mode 0).
    Truncate19,
    /// The top 19 bits rounded to nearest, ties to even (TransQuantParamV2's round mode 1).
    RoundEven19,
    /// The whole f32 (a packing that keeps every bit).
    FullF32,
}

/// The order of the two scale products (with a per-token scale).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleOrder {
    /// `fl32(fl32(acc * scale) * pertoken)` (the dequant-first kernels: `AscendDequant`, then
    /// the per-token Mul).
    ScaleThenToken,
    /// `fl32(acc * fl32(pertoken * scale))` (the small-M opt kernel: the two scales merged
    /// first, `MulPertokenAndScale`).
    MergedFirst,
}

impl ScaleOrder {
    /// The other order.
    pub fn swapped(self) -> ScaleOrder {
        match self {
            ScaleOrder::ScaleThenToken => ScaleOrder::MergedFirst,
            ScaleOrder::MergedFirst => ScaleOrder::ScaleThenToken,
        }
    }
}

/// Which element of `pertoken_scale` an output element takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenAxis {
    /// Its row's (the kernel).
    Row,
    /// The one at its column index modulo m (a bug: the scale broadcast along the wrong axis).
    ColumnModM,
}

/// Where the int8 output's offset enters (requantisation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetPlace {
    /// Added to the scaled value after its rounding to a 9-bit integer, before the int8
    /// saturation (the kernel's requantisation: `clip(s9(acc * scale) + offset, -128, 127)`).
    AfterRounding,
    /// Added to the accumulator before the scale, `(acc + offset) * scale` (a bug).
    BeforeScale,
}

/// The numerics of one `quant_matmul` computation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QmmRecipe {
    pub accumulation: Accumulation,
    /// The int32 -> f32 conversion of the accumulator.
    pub acc_to_f32: RoundingMode,
    pub int_bias: IntBiasPlace,
    pub float_bias: FloatBiasPlace,
    pub scale_pack: ScalePack,
    /// Column 0's scale for every column (a per-channel scale read as per-tensor; a bug).
    pub per_tensor_scale: bool,
    pub scale_order: ScaleOrder,
    pub token_axis: TokenAxis,
    /// The smallest int8 operand value as read (-128; -127 models a symmetric clamp, a bug).
    pub operand_min: i8,
    /// The final cast to the output dtype (bf16/f16 outputs).
    pub output_rounding: RoundingMode,
    /// The rounding of the scaled f32 value to an integer (int8 output).
    pub requant_rounding: RoundingMode,
    /// Where the int8 output's offset enters.
    pub offset_place: OffsetPlace,
    /// The offset is subtracted instead of added (a bug).
    pub offset_negated: bool,
    /// The int8 output saturates: the rounded value is clamped to the 9-bit range [-256, 255],
    /// and after the offset to [-128, 127]. Without it the value wraps to int8 (a bug).
    pub saturate: bool,
    /// Subnormal results are flushed to zero of their sign: every f32 operation of the
    /// epilogue and the final cast to bf16/f16 (a vector unit in flush-to-zero mode; a bug,
    /// the kernel keeps them).
    pub flush_subnormals: bool,
}

/// The recipe names: `ascend_a2` (the A2 host tiling's dispatch: each case runs the preset of
/// the kernel variant it lands on, [`crate::ops::quant_matmul_variants`]) and the variant presets.
pub const PRESETS: [&str; 5] = [
    "ascend_a2",
    "a2_pertoken_opt",
    "a2_pertoken",
    "a2_dequant",
    "a2_fixpipe",
];

/// The recipe name that dispatches by shape.
pub const DISPATCHING: &str = "ascend_a2";

impl QmmRecipe {
    /// The A2 kernels' arithmetic with the per-token scale applied in `scale_order`.
    pub fn kernel(scale_order: ScaleOrder) -> QmmRecipe {
        QmmRecipe {
            accumulation: Accumulation::Int32,
            acc_to_f32: RoundingMode::NearestTiesToEven,
            int_bias: IntBiasPlace::BeforeDequant,
            float_bias: FloatBiasPlace::AfterScales,
            scale_pack: ScalePack::Truncate19,
            per_tensor_scale: false,
            scale_order,
            token_axis: TokenAxis::Row,
            operand_min: -128,
            output_rounding: RoundingMode::NearestTiesToEven,
            requant_rounding: RoundingMode::NearestTiesToEven,
            offset_place: OffsetPlace::AfterRounding,
            offset_negated: false,
            saturate: true,
            flush_subnormals: false,
        }
    }

    /// A variant's preset by name (the opt kernel merges the scales first, the others
    /// dequantise first). `None` for [`DISPATCHING`], whose preset depends on the case.
    pub fn preset(name: &str) -> Option<QmmRecipe> {
        let v = crate::ops::quant_matmul_variants::by_preset(name)?;
        Some(QmmRecipe::kernel(
            if std::ptr::eq(v, &crate::ops::quant_matmul_variants::PERTOKEN_OPT) {
                ScaleOrder::MergedFirst
            } else {
                ScaleOrder::ScaleThenToken
            },
        ))
    }

    /// The ledger knobs of this recipe as preset `preset` (docs/ascend.md, ids
    /// `qmm.<preset>.<field>`); destructures the struct, so a new field does not compile until
    /// it has a knob.
    pub fn knobs(&self, preset: &str) -> Vec<Knob> {
        let QmmRecipe {
            accumulation,
            acc_to_f32,
            int_bias,
            float_bias,
            scale_pack,
            per_tensor_scale,
            scale_order,
            token_axis,
            operand_min,
            output_rounding,
            requant_rounding,
            offset_place,
            offset_negated,
            saturate,
            flush_subnormals,
        } = self;
        let k = |f: &str, v: String| Knob::new(format!("qmm.{preset}.{f}"), v);
        vec![
            k("accumulation", format!("{accumulation:?}")),
            k(
                "acc_to_f32",
                crate::knob::rounding_name(&Rounding::ieee(*acc_to_f32)),
            ),
            k("int_bias", format!("{int_bias:?}")),
            k("float_bias", format!("{float_bias:?}")),
            k("scale_pack", format!("{scale_pack:?}")),
            k("per_tensor_scale", format!("{per_tensor_scale}")),
            k("scale_order", format!("{scale_order:?}")),
            k("token_axis", format!("{token_axis:?}")),
            k("operand_min", format!("{operand_min}")),
            k(
                "output_rounding",
                crate::knob::rounding_name(&Rounding::ieee(*output_rounding)),
            ),
            k(
                "requant_rounding",
                crate::knob::rounding_name(&Rounding::ieee(*requant_rounding)),
            ),
            k("offset_place", format!("{offset_place:?}")),
            k("offset_negated", format!("{offset_negated}")),
            k("saturate", format!("{saturate}")),
            k("flush_subnormals", format!("{flush_subnormals}")),
        ]
    }

    /// The scale value a packed word holds for the f32 scale `s` (finite).
    pub fn pack(&self, s: f32) -> f32 {
        pack_scale(s, self.scale_pack)
    }

    /// The f32 epilogue of one element: `acc` the accumulator as f32 (after an int32 bias
    /// where the recipe adds it there), `s` the column's scale, `t` the row's per-token scale,
    /// `fb` a float bias (0 when none), `ib` an int32 bias the recipe adds after the scales.
    pub fn epilogue(&self, acc: f32, s: f32, t: Option<f32>, fb: Option<f32>, ib: f32) -> f32 {
        // Each f32 operation's result, flushed when the recipe flushes subnormals.
        let f = |x: f32| self.flushed_f32(x);
        let mut v = acc;
        if let (Some(b), FloatBiasPlace::BeforeScales) = (fb, self.float_bias) {
            v = f(v + b);
        }
        v = match t {
            None => f(v * s),
            Some(t) => match self.scale_order {
                ScaleOrder::ScaleThenToken => f(f(v * s) * t),
                ScaleOrder::MergedFirst => f(v * f(s * t)),
            },
        };
        if let (Some(b), FloatBiasPlace::AfterScales) = (fb, self.float_bias) {
            v = f(v + b);
        }
        if self.int_bias == IntBiasPlace::AfterDequant {
            v = f(v + ib);
        }
        v
    }

    /// `x`, or zero of its sign when it is subnormal and the recipe flushes subnormals.
    pub fn flushed_f32(&self, x: f32) -> f32 {
        if self.flush_subnormals && x.is_subnormal() {
            f32::from_bits(x.to_bits() & 0x8000_0000)
        } else {
            x
        }
    }

    /// The final cast of the f32 result `y` to the bf16/f16 output `out` (bits), with
    /// `output_rounding`, a subnormal result flushed to zero of its sign when the recipe
    /// flushes subnormals.
    pub fn cast_out(&self, out: ElemType, y: f32) -> u16 {
        let bits = round_out(out, y, self.output_rounding);
        if self.flush_subnormals && out.is_half_subnormal(bits) {
            bits & 0x8000
        } else {
            bits
        }
    }
}

impl QmmRecipe {
    /// The int8 requantisation of one element: `acc` the accumulator as f32 (with an int32
    /// bias), `s` the scale the packed word holds, `off` the packed 9-bit offset (0 when none).
    /// `fl32(acc * s)` rounded to an integer with `requant_rounding`, clamped to [-256, 255],
    /// plus the offset, clamped to [-128, 127] (ops-nn's requant golden: `clip(f32_2_s9(out *
    /// scale) + f32_2_s9(offset), -128, 127)`).
    pub fn requant(&self, acc: f32, s: f32, off: i32) -> i8 {
        let off = if self.offset_negated { -off } else { off };
        let v = match self.offset_place {
            OffsetPlace::AfterRounding => acc * s,
            OffsetPlace::BeforeScale => (acc + off as f32) * s,
        };
        let mut r = round_to_integer(v as f64, self.requant_rounding);
        if self.saturate {
            r = r.clamp(-256, 255);
        }
        if self.offset_place == OffsetPlace::AfterRounding {
            r += off as i64;
        }
        if self.saturate {
            r.clamp(-128, 127) as i8
        } else {
            r as i8 // two's complement wrap
        }
    }
}

/// The 9-bit offset `npu_trans_quant_param` packs for the f32 offset `o` (finite): rounded to
/// an integer, ties to even, clamped to [-256, 255].
pub fn pack_offset(o: f32) -> i32 {
    round_to_integer(o as f64, RoundingMode::NearestTiesToEven).clamp(-256, 255) as i32
}

/// `x` (finite; an f32 or an exact product of at most 53 bits) rounded to an integer with
/// `mode`, saturated to the i64 range: integer arithmetic on the exact value, no platform math.
pub fn round_to_integer(x: f64, mode: RoundingMode) -> i64 {
    if x.abs() >= 9.0e15 {
        return x as i64; // already an integer (2^53 and beyond); `as` saturates
    }
    let t = x as i64; // toward zero, exact for |x| < 2^53
    let frac = x - t as f64; // exact
    if frac == 0.0 {
        return t;
    }
    let away = if x > 0.0 { t + 1 } else { t - 1 };
    let half = frac.abs().partial_cmp(&0.5);
    match mode {
        RoundingMode::TowardZero => t,
        RoundingMode::TowardPositive => t.max(away),
        RoundingMode::TowardNegative => t.min(away),
        RoundingMode::ToOdd => {
            if t % 2 != 0 {
                t
            } else {
                away
            }
        }
        RoundingMode::NearestTiesAway => match half {
            Some(std::cmp::Ordering::Less) => t,
            _ => away,
        },
        RoundingMode::NearestTiesToEven => match half {
            Some(std::cmp::Ordering::Less) => t,
            Some(std::cmp::Ordering::Equal) if t % 2 == 0 => t,
            _ => away,
        },
    }
}

/// The scale a packed word holds for `s` under `pack` (TransQuantParamV2's two round modes;
/// in the rounding mode, exponent 0 gives a signed zero and a carry out of the largest finite
/// binade infinity, as its source computes them).
pub fn pack_scale(s: f32, pack: ScalePack) -> f32 {
    let b = s.to_bits();
    match pack {
        ScalePack::FullF32 => s,
        ScalePack::Truncate19 => f32::from_bits(b & 0xFFFF_E000),
        ScalePack::RoundEven19 => {
            let exp = (b >> 23) & 0xFF;
            if exp == 0 {
                return f32::from_bits(b & 0x8000_0000);
            }
            if exp == 0xFF {
                return f32::from_bits(b & 0xFFFF_E000);
            }
            let low = b & 0x1FFF;
            let mut hi = b >> 13; // sign, exponent, 10 mantissa bits
            if low > 0x1000 || (low == 0x1000 && hi & 1 == 1) {
                hi += 1; // a carry into the exponent is the right result
            }
            // A carry out of exponent 254 gives infinity: the source's saturation test
            // (exponent above 255) cannot fire on an 8-bit exponent.
            f32::from_bits(hi << 13)
        }
    }
}

/// `v` as f32 rounded with `mode` (one rounding).
pub fn i32_to_f32(v: i32, mode: RoundingMode) -> f32 {
    if mode == RoundingMode::NearestTiesToEven || v.unsigned_abs() <= 1 << 24 {
        return v as f32; // Rust's int -> float cast rounds to nearest, ties to even
    }
    let x = Exact::Finite {
        negative: v < 0,
        sig: v.unsigned_abs() as u128,
        exp: 0,
    };
    f32::from_bits(x.round_to(&FLOAT32, Rounding::ieee(mode)) as u32)
}

/// `y` rounded to the output dtype under `mode`, as bits.
pub(crate) fn round_out(out: ElemType, y: f32, mode: RoundingMode) -> u16 {
    match out {
        ElemType::F16 => f16::f32_to_f16(y, Rounding::ieee(mode)),
        _ => bf16::f32_to_bf16(y, Rounding::ieee(mode)),
    }
}
