//! `quant_matmul`: the W8A8 matmul `torch_npu.npu_quant_matmul` / `aclnnQuantMatmulV4` computes
//! (docs/ascend.md, rows `qmm.*`): int8 `x1 [m, k]` times int8 `x2 [k, n]` with an exact int32
//! accumulation, then the dequantisation epilogue and one rounding to the output dtype.
//!
//! Params (JSON, unknown keys rejected): `{"m": M, "k": K, "n": N, "out": "bf16"|"f16"|"int8",
//! "scale": "f32"|"bf16"|"packed", "pertoken": false, "bias": "none"|"i32"|"f32"|"bf16",
//! "offset": false}`. `out = "int8"` is the requantisation: only with the packed scale, no
//! `pertoken`, bias `i32` or none; `offset` (int8 only) adds an f32 `offset [n]` input that the
//! recipe packs as `npu_trans_quant_param` does (a 9-bit integer, ties to even, clamped).
//! `scale = "packed"` is the int64 form `npu_trans_quant_param` makes from an f32 scale (the
//! `scale` input is then that f32, and the recipe packs it); the combinations are the API
//! page's table: `packed` only with `out = "f16"`, no `pertoken`, bias `i32` or none; `bf16`
//! scale only with `out = "bf16"`; `out = "f16"` with an f32 scale needs `pertoken` (without it
//! the page requires the packed form); a `bf16` bias only with `out = "bf16"`. `k <= 65536`
//! (so no int32 accumulator can overflow: `128 * 128 * 65536 = 2^30`; the int32 bias add wraps,
//! assumed).
//!
//! Tensors: `x1` I8 `[m, k]`, `x2` I8 `[k, n]`, `scale` F32 or BF16 `[n]`, `pertoken_scale` F32
//! `[m]` (with `pertoken`), `bias` I32/F32/BF16 `[n]` (unless `none`); output `y` `[m, n]` in
//! the output dtype.
//!
//! The recipe ([`QmmRecipe`], preset `ascend_a2`) is the A2 kernel's arithmetic as ops-nn's
//! `quant_batch_matmul_v3` sources write it: the cube accumulates in int32 (an int32 bias
//! enters the cube's accumulator, before the dequantisation); the int32 result is converted to
//! f32 (ties to even, assumed), multiplied by the per-channel scale in f32 (a bf16 scale widened
//! exactly; the packed scale keeps the top 19 bits of the f32, truncated, as
//! `npu_trans_quant_param` writes them), then by the per-token scale in f32; a float bias is
//! added in f32 after both; one cast to the output dtype with CAST_RINT (ties to even). The int8
//! output instead rounds `fl32(fl32(acc) * scale)` to an integer (ties to even), clamps it to
//! [-256, 255], adds the 9-bit offset and clamps to [-128, 127] (ops-nn's requant golden). Every
//! step is one IEEE binary32 operation (Rust never contracts), no platform math.
//!
//! `oracle`: the exact integer accumulation and bias, times the scale the kernel is given (for
//! `packed`, the 19-bit value the packed word holds) and the per-token scale as an exact
//! product (at most 80 significant bits), plus the float bias, exactly whenever the two terms
//! aligned fit 126 bits, which fails only for magnitudes tens of binades apart (then the f64
//! sum of the two terms); returned as the f64 rounded to odd, so the harness's one rounding to
//! the output dtype is the correctly rounded result. For the int8 output: the exact `acc *
//! scale` rounded once to an integer (ties to even), then the clamps and the offset.
//!
//! Rows are computed independently in fixed chunks, each element by one fixed-order integer
//! dot product, so the result is the same for any thread count.
//!
//! Regimes: `rounding_ties` (output ties of the final cast on two rows) and `int_matmul_edges`
//! (rows whose int32 accumulation passes 2^24 and comes back, built of -128 operands; elements
//! where the two orders of the scale products round apart; per-channel scales that differ;
//! packed scales whose 19-bit truncation differs from rounding). See [`QuantMatmul::impose`].

use super::path::{odd_above_one, ParamPath};
use super::preset_family::{self, PresetFamily};
use super::quant_matmul_variants::QmmShape;
use super::regime::Regime;
use super::{
    input, parse_params, ElemType, GenContext, OpCost, OpDescription, OpError, OpFamily, Tensor,
    TensorMap, TensorSpec,
};
use crate::formats::format::{FLOAT32, FLOAT64};
use crate::formats::{bf16, f16, Exact, Rounding, RoundingMode};
use crate::knob::Knob;
use crate::parallel::{map_tasks, Threads};
use crate::variant::{Dispatch, Platform};

/// The op name.
pub const OP: &str = "quant_matmul";

/// The largest reduction length accepted: `128 * 128 * 65536 = 2^30`, so no int32 accumulator
/// overflows.
pub const MAX_K: usize = 65536;

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
/// the kernel variant it lands on, [`super::quant_matmul_variants`]) and the variant presets.
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
        let v = super::quant_matmul_variants::by_preset(name)?;
        Some(QmmRecipe::kernel(
            if std::ptr::eq(v, &super::quant_matmul_variants::PERTOKEN_OPT) {
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

#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    m: usize,
    k: usize,
    n: usize,
    #[serde(default = "default_out")]
    out: String,
    #[serde(default = "default_scale")]
    scale: String,
    #[serde(default)]
    pertoken: bool,
    #[serde(default = "default_bias")]
    bias: String,
    #[serde(default)]
    offset: bool,
}

fn default_out() -> String {
    "bf16".into()
}
fn default_scale() -> String {
    "f32".into()
}
fn default_bias() -> String {
    "none".into()
}

/// The scale's form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleKind {
    F32,
    Bf16,
    /// The int64 word of `npu_trans_quant_param` (the input is its f32 source).
    Packed,
}

/// The bias's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BiasKind {
    None,
    I32,
    F32,
    Bf16,
}

/// A validated case.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Case {
    m: usize,
    k: usize,
    n: usize,
    out: ElemType,
    scale: ScaleKind,
    pertoken: bool,
    bias: BiasKind,
    /// An f32 `offset [n]` input (int8 output only), packed with the scale.
    offset: bool,
}

impl Case {
    /// What the host tiling sees of the case.
    fn shape(&self) -> QmmShape {
        QmmShape {
            m: self.m,
            pertoken: self.pertoken,
            packed: self.scale == ScaleKind::Packed,
        }
    }
}

/// The kernel variant a case with these parameters runs on `platform` (the platform
/// [`DISPATCHING`] describes when `None`).
pub fn dispatch(
    params: &serde_json::Value,
    platform: Option<&Platform>,
) -> Result<Dispatch, OpError> {
    let c = QuantMatmul.case(params)?;
    Ok(super::quant_matmul_variants::dispatch(
        &c.shape(),
        platform.unwrap_or(&super::quant_matmul_variants::MODELLED),
    ))
}

/// The `quant_matmul` op family.
pub struct QuantMatmul;

fn invalid(param: &str, message: impl Into<String>) -> OpError {
    OpError::invalid_param(OP, param, message)
}

fn failed(message: impl std::fmt::Display) -> OpError {
    OpError::failed(OP, message)
}

/// Tie rows `rounding_ties` plants, and the tie columns (one tie per row and column).
const TIE_ROWS: usize = 2;
const TIE_COLS: usize = 8;
/// Rows and columns of the accumulator construction of `int_matmul_edges`.
const EDGE_ROWS: usize = 2;
const EDGE_COLS: usize = 8;
/// Products of 2^14 that bring the accumulator to 2^24, the +1 terms lost above it, and the
/// pairs that bring it back.
const EDGE_BIG: usize = 1024;
const EDGE_ONES: usize = 8;
/// Positions the accumulator construction takes along k.
pub const EDGE_K: usize = EDGE_BIG + EDGE_ONES + 2 * EDGE_BIG;
/// Columns `int_matmul_edges` saturates (int8 output), half to +127 and half to -128, on its
/// two rows.
const SAT_COLS: usize = 8;
/// Rows and columns of `subnormal_outputs` (every one of their elements a subnormal output).
const SUB_ROWS: usize = 2;
const SUB_COLS: usize = 8;
/// Scale-order witnesses (with a per-token scale), one element each.
const WITNESSES: usize = 10;
/// Columns whose scale `int_matmul_edges` keeps different from column 0's.
const DISTINCT_SCALES: usize = 8;

impl QuantMatmul {
    fn specs(&self, c: &Case) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
        let mut inputs = vec![
            TensorSpec::new("x1", ElemType::I8, vec![c.m, c.k], &["m", "k"]),
            TensorSpec::new("x2", ElemType::I8, vec![c.k, c.n], &["k", "n"]),
            TensorSpec::new(
                "scale",
                if c.scale == ScaleKind::Bf16 {
                    ElemType::Bf16
                } else {
                    ElemType::F32
                },
                vec![c.n],
                &["n"],
            ),
        ];
        if c.pertoken {
            inputs.push(TensorSpec::new(
                "pertoken_scale",
                ElemType::F32,
                vec![c.m],
                &["m"],
            ));
        }
        let bias_type = match c.bias {
            BiasKind::None => None,
            BiasKind::I32 => Some(ElemType::I32),
            BiasKind::F32 => Some(ElemType::F32),
            BiasKind::Bf16 => Some(ElemType::Bf16),
        };
        if let Some(t) = bias_type {
            inputs.push(TensorSpec::new("bias", t, vec![c.n], &["n"]));
        }
        if c.offset {
            inputs.push(TensorSpec::new("offset", ElemType::F32, vec![c.n], &["n"]));
        }
        let outputs = vec![TensorSpec::new("y", c.out, vec![c.m, c.n], &["m", "n"])];
        (inputs, outputs)
    }

    /// The inputs decoded.
    fn decoded(&self, c: &Case, inputs: &TensorMap) -> Result<Decoded, OpError> {
        let (specs, _) = self.specs(c);
        let get = |name: &str| -> Result<Option<&Tensor>, OpError> {
            match specs.iter().find(|s| s.name == name) {
                None => Ok(None),
                Some(spec) => input(OP, inputs, spec).map(Some),
            }
        };
        let i8s = |t: &Tensor| -> Vec<i8> { t.data.iter().map(|&b| b as i8).collect() };
        let x1 = i8s(get("x1")?.ok_or_else(|| failed("no x1"))?);
        let x2 = i8s(get("x2")?.ok_or_else(|| failed("no x2"))?);
        let scale_t = get("scale")?.ok_or_else(|| failed("no scale"))?;
        let scale = scale_t.to_f32_vec().map_err(failed)?;
        if let Some(j) = scale.iter().position(|s| !s.is_finite()) {
            return Err(OpError::InvalidInput {
                op: OP.into(),
                input: "scale".into(),
                message: format!(
                    "element {j} is {}: the API asks for finite scales (no NaN or Inf)",
                    scale[j]
                ),
            });
        }
        let pertoken = match get("pertoken_scale")? {
            Some(t) => Some(t.to_f32_vec().map_err(failed)?),
            None => None,
        };
        let offset = match get("offset")? {
            Some(t) => {
                let o = t.to_f32_vec().map_err(failed)?;
                if let Some(j) = o.iter().position(|v| !v.is_finite()) {
                    return Err(OpError::InvalidInput {
                        op: OP.into(),
                        input: "offset".into(),
                        message: format!(
                            "element {j} is {}: npu_trans_quant_param packs a finite offset",
                            o[j]
                        ),
                    });
                }
                Some(o.into_iter().map(pack_offset).collect())
            }
            None => None,
        };
        let (ibias, fbias) = match get("bias")? {
            None => (None, None),
            Some(t) if t.dtype == ElemType::I32 => (
                Some(
                    t.to_i64_vec()
                        .map_err(failed)?
                        .into_iter()
                        .map(|v| v as i32)
                        .collect(),
                ),
                None,
            ),
            Some(t) => (None, Some(t.to_f32_vec().map_err(failed)?)),
        };
        Ok(Decoded {
            x1,
            x2,
            scale,
            pertoken,
            ibias,
            fbias,
            offset,
        })
    }
}

/// The decoded inputs of a case.
struct Decoded {
    x1: Vec<i8>,
    x2: Vec<i8>,
    scale: Vec<f32>,
    pertoken: Option<Vec<f32>>,
    ibias: Option<Vec<i32>>,
    fbias: Option<Vec<f32>>,
    /// The packed 9-bit offsets.
    offset: Option<Vec<i32>>,
}

/// A finite f32 as (negative, significand, exponent).
fn parts(x: f32) -> (bool, u128, i32) {
    match Exact::of_f32(x) {
        Exact::Finite { negative, sig, exp } => (negative, sig, exp),
        _ => (false, 0, 0),
    }
}

/// The exact int8 requantisation: `acc * s` exactly (at most 33 + 11 significant bits: the
/// packed scale keeps 11, so the f64 product is exact), rounded once to an integer (ties to
/// even), clamped to [-256, 255], plus the 9-bit offset, clamped to [-128, 127].
pub fn oracle_requant(acc: i64, s: f32, off: i32) -> f64 {
    let r = round_to_integer(acc as f64 * s as f64, RoundingMode::NearestTiesToEven);
    (r.clamp(-256, 255) + off as i64).clamp(-128, 127) as f64
}

/// `acc * s * t + fb` as the f64 rounded to odd from the exact value (the product is exact:
/// at most 32 + 24 + 24 bits; the sum is exact where both terms, aligned, fit 126 bits, an f64
/// addition of the two rounded-to-odd terms otherwise).
pub fn oracle_value(acc: i64, s: f32, t: Option<f32>, fb: Option<f32>) -> f64 {
    let (sn, ss, se) = parts(s);
    let (tn, ts, te) = t.map_or((false, 1, 0), parts);
    let pn = (acc < 0) ^ sn ^ tn;
    let ps = acc.unsigned_abs() as u128 * ss * ts;
    let pe = se + te;
    let odd = Rounding::ieee(RoundingMode::ToOdd);
    let to_f64 = |negative: bool, sig: u128, exp: i32| -> f64 {
        f64::from_bits(Exact::Finite { negative, sig, exp }.round_to(&FLOAT64, odd))
    };
    let Some(b) = fb else {
        return to_f64(pn, ps, pe);
    };
    let (bn, bs, be) = parts(b);
    if ps == 0 {
        return to_f64(bn, bs, be);
    }
    if bs == 0 {
        return to_f64(pn, ps, pe);
    }
    // Align both to the smaller exponent when the shifted values fit 127 bits.
    let e = pe.min(be);
    let (sp, sb) = ((pe - e) as u32, (be - e) as u32);
    let bits = |v: u128| 128 - v.leading_zeros();
    if bits(ps) + sp <= 126 && bits(bs) + sb <= 126 {
        let a = (ps << sp) as i128 * if pn { -1 } else { 1 };
        let c = (bs << sb) as i128 * if bn { -1 } else { 1 };
        let v = a + c;
        return to_f64(v < 0, v.unsigned_abs(), e);
    }
    to_f64(pn, ps, pe) + to_f64(bn, bs, be)
}

/// Claims about `quant_matmul` (the A2 kernel and `npu_trans_quant_param`) fixed in the code
/// rather than a recipe field.
pub const CLAIMS: [&str; 6] = [
    "qmm.claim.k_limit",
    "qmm.claim.bias_wrap",
    "qmm.claim.widening",
    "qmm.claim.packed_offset",
    "qmm.claim.opt_bound",
    "qmm.claim.f16_fixpipe",
];

impl OpFamily for QuantMatmul {
    fn knob_family(&self) -> &'static str {
        "qmm"
    }
    fn kernel_variants(&self) -> &'static [&'static crate::variant::KernelVariant] {
        &super::quant_matmul_variants::VARIANTS
    }
    fn dispatch(
        &self,
        recipe: &str,
        params: &serde_json::Value,
        platform: Option<&crate::variant::Platform>,
    ) -> Option<crate::variant::Dispatch> {
        if recipe == DISPATCHING {
            return dispatch(params, platform).ok();
        }
        crate::variant::Dispatch::named(self.kernel_variants(), recipe)
    }
    fn preset_knobs(
        &self,
        preset: &str,
        dtype: crate::formats::DType,
        edit: Option<&crate::recipe_edit::RecipeEdit>,
    ) -> Option<Vec<crate::knob::Knob>> {
        let _ = dtype;
        super::quant_matmul_variants::by_preset(preset)?;
        QmmRecipe::preset(preset).map(|r| {
            let mut k = crate::recipe_edit::edited(r, edit).knobs(preset);
            k.extend(CLAIMS.iter().map(|&id| crate::knob::Knob::claim(id)));
            k
        })
    }
    fn knob_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = super::quant_matmul_variants::VARIANTS
            .iter()
            .filter_map(|v| QmmRecipe::preset(v.preset).map(|r| r.knobs(v.preset)))
            .flat_map(|k| k.into_iter().map(|k| k.id))
            .collect();
        ids.extend(CLAIMS.iter().map(|id| id.to_string()));
        ids
    }

    fn name(&self) -> &'static str {
        OP
    }

    fn recipes(&self) -> Vec<&'static str> {
        PRESETS.to_vec()
    }

    fn paths(&self, params: &serde_json::Value) -> Result<Vec<ParamPath>, OpError> {
        let p: Params = parse_params(OP, params)?;
        Ok(vec![
            ParamPath::new(
                "requant_offset",
                "an int8 output with an offset: where the offset is added and its sign",
                p.offset,
            ),
            ParamPath::new(
                "n_above_64",
                "more than 64 output columns, the quick cases' usual width: the per-channel scale, bias and output offsets of later column tiles are judged",
                p.n > 64,
            ),
            ParamPath::new(
                "odd_m",
                "an odd number of rows above 1: the per-token scale's stride and a row loop that assumes pairs show",
                odd_above_one(p.m),
            ),
        ])
    }

    fn describe(&self, params: &serde_json::Value) -> Result<OpDescription, OpError> {
        let c = self.case(params)?;
        let (inputs, outputs) = self.specs(&c);
        let bytes = super::io_bytes(&inputs, &outputs);
        Ok(OpDescription {
            inputs,
            outputs,
            cost: OpCost {
                // The int8 multiply-adds (the epilogue's few operations per output are not
                // counted); the profile's int8 peak is in TOPS.
                flops: 2.0 * (c.m * c.k * c.n) as f64,
                bytes,
                compute: ElemType::I8,
            },
        })
    }

    fn generate(
        &self,
        params: &serde_json::Value,
        ctx: &mut GenContext,
    ) -> Result<TensorMap, OpError> {
        let c = self.case(params)?;
        if !matches!(ctx.dist, super::ValueDist::Uniform { .. }) {
            return Err(failed(
                "the int8 operands are drawn uniformly over the whole int8 range and the scales from the op's own rule; a case names no input distribution",
            ));
        }
        let (specs, _) = self.specs(&c);
        let mut out = TensorMap::new();
        // Typical |acc| (uniform int8: standard deviation about 74 * 74 * sqrt(k)).
        let typical = 5476.0 * (c.k as f64).sqrt();
        for s in &specs {
            let t = match s.name.as_str() {
                "x1" | "x2" => {
                    let len: usize = s.shape.iter().product();
                    let v: Vec<i8> = (0..len).map(|_| ctx.next_u64() as u8 as i8).collect();
                    Tensor::from_i8(s.shape.clone(), &v)
                }
                "scale" if c.out == ElemType::I8 => {
                    // Requantisation: outputs of a few tens, so few saturate (|acc| about
                    // 2^e; the scale 2^(5 - e) times a uniform mantissa).
                    let e = 64 - (typical as u64).leading_zeros() as i32;
                    let v: Vec<f64> = (0..c.n).map(|_| (1.0 + ctx.unit()) * pow2(4 - e)).collect();
                    scale_tensor(&c, &v)
                }
                "scale" => {
                    // Positive, 2^-10..2^-6 times a uniform mantissa: outputs of order 1..100.
                    let v: Vec<f64> = (0..c.n)
                        .map(|_| (1.0 + ctx.unit()) * pow2(-10 + ctx.below(4) as i32))
                        .collect();
                    scale_tensor(&c, &v)
                }
                "offset" => {
                    // Offsets of either sign up to 32 in magnitude, not integers (the packing
                    // rounds them).
                    let v: Vec<f32> = (0..c.n)
                        .map(|_| ((2.0 * ctx.unit() - 1.0) * 32.0) as f32)
                        .collect();
                    Tensor::from_f32(vec![c.n], &v)
                }
                "pertoken_scale" => {
                    // Per-token dequantisation factors (dynamic_quant's row max / 127).
                    let v: Vec<f32> = (0..c.m)
                        .map(|_| ((0.25 + 0.75 * ctx.unit()) * pow2(-6)) as f32)
                        .collect();
                    Tensor::from_f32(vec![c.m], &v)
                }
                "bias" => match c.bias {
                    BiasKind::I32 => {
                        let v: Vec<i32> = (0..c.n)
                            .map(|_| (ctx.below(1 << 17) as i64 - (1 << 16)) as i32)
                            .collect();
                        Tensor::from_i32(vec![c.n], &v)
                    }
                    _ => {
                        // Of the outputs' magnitude.
                        let mag = typical * pow2(-8) * if c.pertoken { pow2(-7) } else { 1.0 };
                        let v: Vec<f64> =
                            (0..c.n).map(|_| (2.0 * ctx.unit() - 1.0) * mag).collect();
                        float_bias_tensor(&c, &v)
                    }
                },
                other => return Err(failed(format!("no generator for `{other}`"))),
            };
            out.insert(s.name.clone(), t);
        }
        Ok(out)
    }

    fn regimes(&self) -> &'static [Regime] {
        &[
            Regime::RoundingTies,
            Regime::SubnormalOutputs,
            Regime::IntMatmulEdges,
        ]
    }

    fn check_regimes(&self, params: &serde_json::Value, regimes: &[Regime]) -> Result<(), OpError> {
        preset_family::only_own_regimes(OP, regimes)?;
        let c = self.case(params)?;
        let (rows, cols) = needs(&c, regimes);
        let short = |what: &str, need: usize, have: usize| -> Result<(), OpError> {
            if need > have {
                return Err(OpError::Regime {
                    op: OP.into(),
                    regime: regimes.last().map_or("", |r| r.name()).into(),
                    message: format!(
                        "the declared regimes take {need} {what} of their own, the case has {have}"
                    ),
                });
            }
            Ok(())
        };
        short("rows (m)", rows, c.m)?;
        short("columns (n)", cols, c.n)?;
        if regimes.contains(&Regime::SubnormalOutputs) {
            if c.out == ElemType::I8 {
                return Err(super::range_regimes::regime_err(
                    OP,
                    Regime::SubnormalOutputs,
                    "needs a bf16 or f16 output (the int8 output has no subnormals)",
                ));
            }
            if c.scale == ScaleKind::Bf16 && !c.pertoken {
                return Err(super::range_regimes::regime_err(
                    OP,
                    Regime::SubnormalOutputs,
                    "a bf16 scale needs a per-token scale here: without one the column scale would be far below the smallest bf16 subnormal",
                ));
            }
        }
        if regimes.contains(&Regime::IntMatmulEdges) {
            short("positions along k", EDGE_K, c.k)?;
        } else if !regimes.is_empty() {
            short("positions along k", 2, c.k)?;
        }
        Ok(())
    }

    preset_family::preset_family_methods!();
}

impl PresetFamily for QuantMatmul {
    type Case = Case;
    type Recipe = QmmRecipe;
    const PRESETS: &'static [&'static str] = &PRESETS;

    fn case(&self, v: &serde_json::Value) -> Result<Case, OpError> {
        let p: Params = parse_params(OP, v)?;
        for (name, val) in [("m", p.m), ("k", p.k), ("n", p.n)] {
            if val == 0 {
                return Err(invalid(name, "must be positive"));
            }
        }
        if p.k > MAX_K {
            return Err(invalid(
                "k",
                format!("{} is above {MAX_K}: conform refuses a k where an int32 accumulator of int8 products could overflow (128 * 128 * k >= 2^31), rather than model the wrap", p.k),
            ));
        }
        let big = |a: usize, b: usize| a.checked_mul(b).is_none_or(|x| x > 1 << 28);
        if big(p.m, p.k) || big(p.k, p.n) || big(p.m, p.n) {
            return Err(invalid("m/k/n", "a tensor of more than 2^28 elements"));
        }
        let out = match p.out.as_str() {
            "bf16" => ElemType::Bf16,
            "f16" => ElemType::F16,
            "int8" => ElemType::I8,
            other => {
                return Err(invalid(
                    "out",
                    format!("`{other}`: bf16, f16 or int8 (the int32 output is not modelled)"),
                ))
            }
        };
        let scale = match p.scale.as_str() {
            "f32" => ScaleKind::F32,
            "bf16" => ScaleKind::Bf16,
            "packed" => ScaleKind::Packed,
            other => {
                return Err(invalid(
                    "scale",
                    format!("`{other}`: f32, bf16 or packed (npu_trans_quant_param's int64)"),
                ))
            }
        };
        let bias = match p.bias.as_str() {
            "none" => BiasKind::None,
            "i32" => BiasKind::I32,
            "f32" => BiasKind::F32,
            "bf16" => BiasKind::Bf16,
            other => {
                return Err(invalid(
                    "bias",
                    format!("`{other}`: none, i32, f32 or bf16"),
                ))
            }
        };
        // The API page's table of accepted combinations.
        if p.offset && out != ElemType::I8 {
            return Err(invalid(
                "offset",
                "an offset is for the int8 output only (the API's table)",
            ));
        }
        match (scale, out) {
            (ScaleKind::Packed, ElemType::F16 | ElemType::I8) => {
                if p.pertoken {
                    return Err(invalid("pertoken", "the packed (int64) scale takes no pertoken_scale (the API's table)"));
                }
                if !matches!(bias, BiasKind::None | BiasKind::I32) {
                    return Err(invalid("bias", "with the packed scale the bias is int32 or none (the API's table)"));
                }
            }
            (_, ElemType::I8) => {
                return Err(invalid("scale", "the int8 output needs the packed (int64) scale: the API page requires npu_trans_quant_param first"))
            }
            (ScaleKind::Packed, _) => {
                return Err(invalid("scale", "the packed (int64) scale is for an f16 (or int8) output (the API's table)"))
            }
            (ScaleKind::Bf16, ElemType::F16) => {
                return Err(invalid("scale", "a bf16 scale is for a bf16 output (the API's table)"))
            }
            (ScaleKind::F32, ElemType::F16) if !p.pertoken => {
                return Err(invalid("scale", "an f16 output without pertoken_scale needs the packed scale: the API page requires npu_trans_quant_param first"))
            }
            _ => {}
        }
        if out == ElemType::F16 && bias == BiasKind::Bf16 {
            return Err(invalid(
                "bias",
                "a bf16 bias is for a bf16 output (the API's table)",
            ));
        }
        Ok(Case {
            m: p.m,
            k: p.k,
            n: p.n,
            out,
            scale,
            pertoken: p.pertoken,
            bias,
            offset: p.offset,
        })
    }

    fn run_oracle(
        &self,
        c: &Case,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let d = self.decoded(c, inputs)?;
        let (m, k, n) = (c.m, c.k, c.n);
        // Only the packing of the scale is read here, the same in every variant.
        let kernel = QmmRecipe::kernel(ScaleOrder::ScaleThenToken);
        let x2t = transpose_widened(&d.x2, k, n, i32::MIN);
        let parts = map_tasks(m, threads, |i| {
            let a: Vec<i16> = d.x1[i * k..(i + 1) * k].iter().map(|&v| v as i16).collect();
            (0..n)
                .map(|j| {
                    // Exact: |sum| <= 2^14 * k <= 2^30.
                    let mut acc = dot_i16(&a, &x2t[j * k..(j + 1) * k]) as i64;
                    if let Some(b) = d.ibias.as_ref() {
                        acc += b[j] as i64;
                    }
                    let s = if c.scale == ScaleKind::Packed {
                        kernel.pack(d.scale[j])
                    } else {
                        d.scale[j]
                    };
                    if c.out == ElemType::I8 {
                        let off = d.offset.as_ref().map_or(0, |o| o[j]);
                        return oracle_requant(acc, s, off);
                    }
                    let t = d.pertoken.as_ref().map(|p| p[i]);
                    let fb = d.fbias.as_ref().map(|v| v[j]);
                    oracle_value(acc, s, t, fb)
                })
                .collect::<Vec<f64>>()
        });
        let y: Vec<f64> = parts.into_iter().flatten().collect();
        Ok(TensorMap::from([(
            "y".to_string(),
            Tensor::of_f64(vec![m, n], &y),
        )]))
    }

    /// Runs `r` (edited or not) on the inputs.
    fn run_recipe(
        &self,
        c: &Case,
        r: &QmmRecipe,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let d = self.decoded(c, inputs)?;
        let (m, k, n) = (c.m, c.k, c.n);
        let read = |v: i8| -> i32 { (v as i32).max(r.operand_min as i32) };
        let x2t = transpose_widened(&d.x2, k, n, r.operand_min as i32);
        let scales: Vec<f32> = (0..n)
            .map(|j| {
                let s = d.scale[if r.per_tensor_scale { 0 } else { j }];
                if c.scale == ScaleKind::Packed {
                    r.pack(s)
                } else {
                    s
                }
            })
            .collect();
        const ROWS: usize = 4;
        let parts = map_tasks(m.div_ceil(ROWS), threads, |task| {
            let mut out = Vec::with_capacity(ROWS * n);
            let mut a = vec![0i16; k];
            for i in task * ROWS..((task + 1) * ROWS).min(m) {
                for (p, v) in a.iter_mut().enumerate() {
                    *v = read(d.x1[i * k + p]) as i16;
                }
                for j in 0..n {
                    let b = &x2t[j * k..(j + 1) * k];
                    let ib = d.ibias.as_ref().map_or(0, |v| v[j]);
                    let before = r.int_bias == IntBiasPlace::BeforeDequant;
                    let acc = match r.accumulation {
                        Accumulation::Int32 => {
                            let s = dot_i16(&a, b);
                            i32_to_f32(if before { s.wrapping_add(ib) } else { s }, r.acc_to_f32)
                        }
                        Accumulation::F32Sequential => {
                            let mut s = 0.0f32;
                            for (&x, &y) in a.iter().zip(b) {
                                s += (x as i32 * y as i32) as f32; // exact products (< 2^15)
                            }
                            if before {
                                s + i32_to_f32(ib, r.acc_to_f32)
                            } else {
                                s
                            }
                        }
                    };
                    let t = d.pertoken.as_ref().map(|p| match r.token_axis {
                        TokenAxis::Row => p[i],
                        TokenAxis::ColumnModM => p[j % m],
                    });
                    let fb = d.fbias.as_ref().map(|v| v[j]);
                    let after = if before {
                        0.0
                    } else {
                        i32_to_f32(ib, r.acc_to_f32)
                    };
                    if c.out == ElemType::I8 {
                        let off = d.offset.as_ref().map_or(0, |o| o[j]);
                        out.push(r.requant(acc, scales[j], off) as u8 as u16);
                        continue;
                    }
                    let y = r.epilogue(acc, scales[j], t, fb, after);
                    out.push(r.cast_out(c.out, y));
                }
            }
            out
        });
        let y: Vec<u16> = parts.into_iter().flatten().collect();
        let y = if c.out == ElemType::I8 {
            let b: Vec<i8> = y.iter().map(|&v| v as u8 as i8).collect();
            Tensor::from_i8(vec![m, n], &b)
        } else {
            Tensor::from_bits16(c.out, vec![m, n], &y)
        };
        Ok(TensorMap::from([("y".to_string(), y)]))
    }

    /// Makes every regime of `regimes` true (see the module doc and docs/suites.md).
    ///
    /// Rows and columns are drawn from the stream, distinct across constructions; the
    /// constructed rows of `x1` are zero except at the positions a construction names, and
    /// only the constructed (row, column) elements are planned: the rest of those rows and
    /// columns is whatever the draw and the constructions give.
    /// - `rounding_ties`: 2 rows with a power-of-two per-token scale (when there is one),
    ///   8 columns with a power-of-two scale and no float bias, `x1[i, p0] = 64`,
    ///   `x1[i, p1] = 1`, and `x2[p0, j]`, `x2[p1, j]` chosen so that the accumulator (with
    ///   the int32 bias, drawn small there) is `+-(2q + 1)` with `q` even and `2q` one more
    ///   bit than the output has: an exact tie of the final cast, rounded apart by ties to
    ///   even and ties away, in every order of the scale products.
    /// - `int_matmul_edges`: 2 rows and 8 columns (no bias there) whose accumulator takes
    ///   1024 products `(-128) * (-128) = 2^14` (reaching 2^24), then 8 products `1 * 1`, then
    ///   1024 pairs `(-128) * 127 + (-128) * 1 = -2^14` (back to 8): exactly 8 in int32, 0 in a
    ///   sequential f32 sum (each `+1` at 2^24 is a tie that rounds to even, back to 2^24);
    ///   with a per-token scale, 10 elements (own rows and columns, no bias there) whose
    ///   accumulator, scale and per-token scale are searched so that `fl(fl(acc * s) * t)` and
    ///   `fl(acc * fl(s * t))` round to different outputs; 8 further columns whose scale
    ///   differs from column 0's.
    fn impose(
        &self,
        c: &Case,
        regimes: &[Regime],
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError> {
        // The case's recipe, or the variant its shape lands on when it is judged against the
        // oracle.
        let rec = ctx
            .recipe
            .as_deref()
            .and_then(|name| QuantMatmul::recipe_preset(c, name))
            .or_else(|| QuantMatmul::recipe_preset(c, DISPATCHING))
            .expect("every case dispatches to a variant preset");
        let (mm, k, n) = (c.m, c.k, c.n);
        let get_i8 = |m: &TensorMap, name: &str| -> Result<Vec<i8>, OpError> {
            Ok(m.get(name)
                .ok_or_else(|| failed(format!("no {name}")))?
                .data
                .iter()
                .map(|&b| b as i8)
                .collect())
        };
        let mut x1 = get_i8(m, "x1")?;
        let mut x2 = get_i8(m, "x2")?;
        let mut scale: Vec<f32> = m
            .get("scale")
            .ok_or_else(|| failed("no scale"))?
            .to_f32_vec()
            .map_err(failed)?;
        let mut pertoken: Option<Vec<f32>> = match m.get("pertoken_scale") {
            Some(t) => Some(t.to_f32_vec().map_err(failed)?),
            None => None,
        };
        let mut ibias: Option<Vec<i32>> = match (c.bias, m.get("bias")) {
            (BiasKind::I32, Some(t)) => Some(
                t.to_i64_vec()
                    .map_err(failed)?
                    .into_iter()
                    .map(|v| v as i32)
                    .collect(),
            ),
            _ => None,
        };
        let mut fbias: Option<Vec<f32>> = match (c.bias, m.get("bias")) {
            (BiasKind::F32 | BiasKind::Bf16, Some(t)) => Some(t.to_f32_vec().map_err(failed)?),
            _ => None,
        };
        // Column 0 is never taken (the per-tensor fault reads its scale).
        let mut cols: Vec<usize> = (1..n).collect();
        ctx.shuffle(&mut cols);
        let mut cols = cols.into_iter();
        let mut rows: Vec<usize> = (0..mm).collect();
        ctx.shuffle(&mut rows);
        let mut rows = rows.into_iter();
        let short = || failed("out of rows or columns (checked before)");
        let zero_bias = |j: usize, ib: &mut Option<Vec<i32>>, fb: &mut Option<Vec<f32>>| {
            if let Some(b) = ib.as_mut() {
                b[j] = 0;
            }
            if let Some(b) = fb.as_mut() {
                b[j] = 0.0;
            }
        };
        let scale_exact = |v: f32| -> f32 {
            match c.scale {
                ScaleKind::Bf16 => bf16::bf16_to_f32(bf16::f32_to_bf16(v, Rounding::RNE)),
                _ => v,
            }
        };
        let offset: Option<Vec<f32>> = match m.get("offset") {
            Some(t) => Some(t.to_f32_vec().map_err(failed)?),
            None => None,
        };
        let sign = |ctx: &mut GenContext| if ctx.below(2) == 0 { 1i64 } else { -1 };
        for r in regimes {
            match r {
                Regime::RoundingTies => {
                    let p0 = ctx.below(k as u64) as usize;
                    let p1 = (p0 + 1 + ctx.below(k as u64 - 1) as usize) % k;
                    let tie_rows: Vec<usize> = (0..TIE_ROWS)
                        .map(|_| rows.next().ok_or_else(short))
                        .collect::<Result<_, _>>()?;
                    for &i in &tie_rows {
                        x1[i * k..(i + 1) * k].fill(0);
                        x1[i * k + p0] = 64;
                        x1[i * k + p1] = 1;
                        if let Some(t) = pertoken.as_mut() {
                            t[i] = pow2(-7 - ctx.below(3) as i32) as f32;
                        }
                    }
                    if c.out == ElemType::I8 {
                        self.int8_ties(
                            c,
                            &rec,
                            ctx,
                            &tie_rows,
                            (p0, p1),
                            &mut cols,
                            &mut x2,
                            &mut scale,
                            &mut ibias,
                            offset.as_deref(),
                        )?;
                        continue;
                    }
                    // Mantissa bits the output keeps (bf16 8, f16 11).
                    let keep = if c.out == ElemType::F16 { 11 } else { 8 };
                    for _ in 0..TIE_COLS {
                        let j = cols.next().ok_or_else(short)?;
                        scale[j] = pow2(-6 - ctx.below(4) as i32) as f32;
                        if let Some(b) = fbias.as_mut() {
                            b[j] = 0.0;
                        }
                        let ib = match ibias.as_mut() {
                            Some(b) => {
                                b[j] = ctx.below(2049) as i32 - 1024;
                                b[j] as i64
                            }
                            None => 0,
                        };
                        // Both tie rows share x2's column: one target per column.
                        let q = (1i64 << (keep - 1)) + 2 * ctx.below(1 << (keep - 2)) as i64;
                        let target = sign(ctx) * (2 * q + 1);
                        let want = target - ib;
                        let (hi, lo) = (want.div_euclid(64), want.rem_euclid(64));
                        if !(-128..=127).contains(&hi) {
                            return Err(failed(format!("rounding_ties: {want} is out of reach")));
                        }
                        x2[p0 * n + j] = hi as i8;
                        x2[p1 * n + j] = lo as i8;
                        for &i in &tie_rows {
                            // Check with the recipe's own arithmetic: an exact tie.
                            let acc = i32_to_f32(target as i32, rec.acc_to_f32);
                            let s = if c.scale == ScaleKind::Packed {
                                rec.pack(scale[j])
                            } else {
                                scale[j]
                            };
                            let t = pertoken.as_ref().map(|t| t[i]);
                            let y = rec.epilogue(acc, s, t, fbias.as_ref().map(|_| 0.0), 0.0);
                            let even = round_out(c.out, y, RoundingMode::NearestTiesToEven);
                            let away = round_out(c.out, y, RoundingMode::NearestTiesAway);
                            if even == away {
                                return Err(failed(format!(
                                    "rounding_ties: {target} at row {i}, column {j} is not a tie of the output"
                                )));
                            }
                        }
                    }
                }
                Regime::IntMatmulEdges => {
                    // k positions in increasing order: the big block, the ones, the pairs.
                    let mut pos: Vec<usize> = (0..k).collect();
                    ctx.shuffle(&mut pos);
                    let mut pos = pos[..EDGE_K].to_vec();
                    pos.sort_unstable();
                    let (big, rest) = pos.split_at(EDGE_BIG);
                    let (ones, pairs) = rest.split_at(EDGE_ONES);
                    let edge_rows: Vec<usize> = (0..EDGE_ROWS)
                        .map(|_| rows.next().ok_or_else(short))
                        .collect::<Result<_, _>>()?;
                    for &i in &edge_rows {
                        let row = &mut x1[i * k..(i + 1) * k];
                        row.fill(0);
                        for &p in big.iter().chain(pairs) {
                            row[p] = -128;
                        }
                        for &p in ones {
                            row[p] = 1;
                        }
                    }
                    for _ in 0..EDGE_COLS {
                        let j = cols.next().ok_or_else(short)?;
                        zero_bias(j, &mut ibias, &mut fbias);
                        for &p in big {
                            x2[p * n + j] = -128;
                        }
                        for &p in ones {
                            x2[p * n + j] = 1;
                        }
                        for (q, &p) in pairs.iter().enumerate() {
                            x2[p * n + j] = if q % 2 == 0 { 127 } else { 1 };
                        }
                    }
                    if c.out == ElemType::I8 {
                        // Saturation: SAT_COLS columns whose x2 is -1 or +1 at the big block
                        // (and 0 at the other constructed positions), so the edge rows'
                        // accumulator is +2^17 or -2^17; a scale that puts the rounded value
                        // at 180..215, beyond 127 + |offset|, so the clamp decides it and a
                        // wrap gives a negative (positive) int8.
                        for q in 0..SAT_COLS {
                            let j = cols.next().ok_or_else(short)?;
                            zero_bias(j, &mut ibias, &mut fbias);
                            let v: i8 = if q % 2 == 0 { -1 } else { 1 };
                            for &p in ones.iter().chain(pairs) {
                                x2[p * n + j] = 0;
                            }
                            for &p in big {
                                x2[p * n + j] = v;
                            }
                            scale[j] = ((1.4 + 0.25 * ctx.unit()) * pow2(-10)) as f32;
                            let acc = -128 * EDGE_BIG as i32 * v as i32;
                            let off = offset.as_ref().map_or(0, |o| pack_offset(o[j]));
                            let sat =
                                rec.requant(acc as f32, rec.pack(scale_bits(c, scale[j])), off);
                            let wrap = QmmRecipe {
                                saturate: false,
                                ..rec
                            }
                            .requant(
                                acc as f32,
                                rec.pack(scale_bits(c, scale[j])),
                                off,
                            );
                            if sat == wrap || !(sat == 127 || sat == -128) {
                                return Err(failed(format!("int_matmul_edges: column {j} does not saturate ({sat}, wrapped {wrap})")));
                            }
                        }
                    }
                    if let Some(t) = pertoken.as_mut() {
                        // Witnesses: x1 row zero but 64 at w0 and 1 at w1; x2 column set there.
                        let w0 = ctx.below(k as u64) as usize;
                        let w1 = (w0 + 1 + ctx.below(k as u64 - 1) as usize) % k;
                        for _ in 0..WITNESSES {
                            let i = rows.next().ok_or_else(short)?;
                            let j = cols.next().ok_or_else(short)?;
                            zero_bias(j, &mut ibias, &mut fbias);
                            let (acc, s, tv) = self.witness(c, &rec, ctx, &scale_exact)?;
                            let row = &mut x1[i * k..(i + 1) * k];
                            row.fill(0);
                            row[w0] = 64;
                            row[w1] = 1;
                            x2[w0 * n + j] = acc.div_euclid(64) as i8;
                            x2[w1 * n + j] = acc.rem_euclid(64) as i8;
                            scale[j] = s;
                            t[i] = tv;
                        }
                    }
                    for _ in 0..DISTINCT_SCALES {
                        let j = cols.next().ok_or_else(short)?;
                        while scale[j] == scale[0] || rec.pack(scale[j]) == rec.pack(scale[0]) {
                            scale[j] = scale_exact(((1.0 + ctx.unit()) * pow2(-9)) as f32);
                            if c.scale == ScaleKind::Packed {
                                scale[j] = f32::from_bits(scale[j].to_bits() | 0x1001);
                            }
                        }
                    }
                }
                Regime::SubnormalOutputs => {
                    let sub_rows: Vec<usize> = (0..SUB_ROWS)
                        .map(|_| rows.next().ok_or_else(short))
                        .collect::<Result<_, _>>()?;
                    let sub_cols: Vec<usize> = (0..SUB_COLS)
                        .map(|_| cols.next().ok_or_else(short))
                        .collect::<Result<_, _>>()?;
                    for &j in &sub_cols {
                        zero_bias(j, &mut ibias, &mut fbias);
                    }
                    self.subnormal_outputs(
                        c,
                        &rec,
                        ctx,
                        (&sub_rows, &sub_cols),
                        &mut x1,
                        &mut x2,
                        &mut scale,
                        pertoken.as_deref_mut(),
                        fbias.is_some(),
                    )?;
                }
                other => {
                    return Err(OpError::Regime {
                        op: OP.into(),
                        regime: other.name().into(),
                        message: "does not apply to this op".into(),
                    })
                }
            }
        }
        m.insert("x1".into(), Tensor::from_i8(vec![mm, k], &x1));
        m.insert("x2".into(), Tensor::from_i8(vec![k, n], &x2));
        let sv: Vec<f64> = scale.iter().map(|&s| s as f64).collect();
        let st = scale_tensor(c, &sv);
        // The packed-scale bits were already set; scale_tensor sets them again (idempotent).
        m.insert("scale".into(), st);
        if let Some(t) = pertoken {
            m.insert("pertoken_scale".into(), Tensor::from_f32(vec![mm], &t));
        }
        if let Some(b) = ibias {
            m.insert("bias".into(), Tensor::from_i32(vec![n], &b));
        }
        if let Some(b) = fbias {
            let bv: Vec<f64> = b.iter().map(|&x| x as f64).collect();
            m.insert("bias".into(), float_bias_tensor(c, &bv));
        }
        Ok(())
    }

    /// An edit of a knob this case does not reach changes nothing.
    fn edit_reaches(&self, c: &Case, r: &QmmRecipe, kernel: &QmmRecipe) -> bool {
        if r.int_bias != kernel.int_bias {
            c.bias == BiasKind::I32
        } else if r.float_bias != kernel.float_bias {
            matches!(c.bias, BiasKind::F32 | BiasKind::Bf16)
        } else if r.scale_pack != kernel.scale_pack {
            c.scale == ScaleKind::Packed
        } else if r.scale_order != kernel.scale_order || r.token_axis != kernel.token_axis {
            c.pertoken
        } else if r.offset_place != kernel.offset_place || r.offset_negated != kernel.offset_negated
        {
            c.offset
        } else if r.requant_rounding != kernel.requant_rounding || r.saturate != kernel.saturate {
            c.out == ElemType::I8
        } else if r.output_rounding != kernel.output_rounding {
            c.out != ElemType::I8
        } else {
            true
        }
    }

    fn recipe_preset(c: &Case, name: &str) -> Option<QmmRecipe> {
        if name == DISPATCHING {
            let d = super::quant_matmul_variants::dispatch(
                &c.shape(),
                &super::quant_matmul_variants::MODELLED,
            );
            return QmmRecipe::preset(d.variant.preset);
        }
        QmmRecipe::preset(name)
    }
}

/// Rows and columns a set of regimes takes.
fn needs(c: &Case, regimes: &[Regime]) -> (usize, usize) {
    let mut rows = 0;
    let mut cols = 0;
    for r in regimes {
        match r {
            Regime::RoundingTies => {
                rows += TIE_ROWS;
                cols += TIE_COLS;
            }
            Regime::SubnormalOutputs => {
                rows += SUB_ROWS;
                cols += SUB_COLS;
            }
            Regime::IntMatmulEdges => {
                rows += EDGE_ROWS;
                cols += EDGE_COLS + DISTINCT_SCALES;
                if c.out == ElemType::I8 {
                    cols += SAT_COLS;
                }
                if c.pertoken {
                    rows += WITNESSES;
                    cols += WITNESSES;
                }
            }
            _ => {}
        }
    }
    // Column 0 keeps its drawn scale (the per-tensor fault reads it).
    (rows, cols + usize::from(cols > 0))
}

/// `x [k, n]` transposed to `[n, k]` and widened, each value raised to at least `min`.
fn transpose_widened(x: &[i8], k: usize, n: usize, min: i32) -> Vec<i16> {
    let mut t = vec![0i16; n * k];
    for p in 0..k {
        // A strided pass over up to 2^28 elements takes seconds: a cancellation point per row.
        crate::cancel::checkpoint();
        for j in 0..n {
            t[j * k + p] = (x[p * n + j] as i32).max(min) as i16;
        }
    }
    t
}

/// The integer dot product of two int8-valued rows in int32: exact, since `|x * y| <= 2^14`
/// and `k <= 2^16` keep every partial sum below 2^30 (the order of an exact sum does not
/// matter).
fn dot_i16(a: &[i16], b: &[i16]) -> i32 {
    // 32 independent lanes (the compiler turns them into vector multiply-adds).
    let mut lanes = [0i32; 32];
    let (ca, cb) = (a.chunks_exact(32), b.chunks_exact(32));
    let tail: i32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(&x, &y)| x as i32 * y as i32)
        .sum();
    for (x, y) in ca.zip(cb) {
        for ((l, &p), &q) in lanes.iter_mut().zip(x).zip(y) {
            *l += p as i32 * q as i32;
        }
    }
    lanes.iter().sum::<i32>() + tail
}

/// 2^k exactly (k within f64's normal range).
fn pow2(k: i32) -> f64 {
    f64::from_bits(((1023 + k as i64) as u64) << 52)
}

/// The f32 a scale input holds once written (the packed form's marker bits set, as
/// [`scale_tensor`] writes them).
fn scale_bits(c: &Case, s: f32) -> f32 {
    if c.scale == ScaleKind::Packed {
        f32::from_bits(s.to_bits() | 0x1001)
    } else {
        s
    }
}

fn scale_tensor(c: &Case, v: &[f64]) -> Tensor {
    match c.scale {
        ScaleKind::Bf16 => {
            let b: Vec<u16> = v
                .iter()
                .map(|&x| bf16::f64_to_bf16(x, Rounding::RNE))
                .collect();
            Tensor::from_bits16(ElemType::Bf16, vec![c.n], &b)
        }
        _ => {
            let mut f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            if c.scale == ScaleKind::Packed {
                // Bit 12 set and a nonzero bit below it: truncation, rounding and the whole
                // f32 give three different scales.
                for s in &mut f {
                    *s = f32::from_bits(s.to_bits() | 0x1001);
                }
            }
            Tensor::from_f32(vec![c.n], &f)
        }
    }
}

fn float_bias_tensor(c: &Case, v: &[f64]) -> Tensor {
    match c.bias {
        BiasKind::Bf16 => {
            let b: Vec<u16> = v
                .iter()
                .map(|&x| bf16::f64_to_bf16(x, Rounding::RNE))
                .collect();
            Tensor::from_bits16(ElemType::Bf16, vec![c.n], &b)
        }
        _ => {
            let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            Tensor::from_f32(vec![c.n], &f)
        }
    }
}

/// The output dtype's two neighbours of `y` (finite, inside the dtype's range) and their
/// midpoint, exactly.
fn midpoint_near(out: ElemType, y: f64) -> f64 {
    let (lo, hi) = match out {
        ElemType::F16 => (
            f16::f16_to_f64(f16::f64_to_f16(
                y,
                Rounding::ieee(RoundingMode::TowardNegative),
            )),
            f16::f16_to_f64(f16::f64_to_f16(
                y,
                Rounding::ieee(RoundingMode::TowardPositive),
            )),
        ),
        _ => (
            bf16::bf16_to_f64(bf16::f64_to_bf16(
                y,
                Rounding::ieee(RoundingMode::TowardNegative),
            )),
            bf16::bf16_to_f64(bf16::f64_to_bf16(
                y,
                Rounding::ieee(RoundingMode::TowardPositive),
            )),
        ),
    };
    (lo + hi) / 2.0
}

/// `y` rounded to the output dtype under `mode`, as bits.
fn round_out(out: ElemType, y: f32, mode: RoundingMode) -> u16 {
    match out {
        ElemType::F16 => f16::f32_to_f16(y, Rounding::ieee(mode)),
        _ => bf16::f32_to_bf16(y, Rounding::ieee(mode)),
    }
}

impl QuantMatmul {
    /// `subnormal_outputs` (bf16/f16 outputs): on the `SUB_ROWS` rows (`x1` zero but for one
    /// position `p` the seed chooses, holding `u` in 64..=127) and the `SUB_COLS` columns
    /// (their bias zero; `x2[p, j] = +-v`, `v` in 16..=127, the signs alternating), every
    /// accumulator is the single product `+-u v`, and the column's scale (with a per-token
    /// scale, the rows' shared power of two `2^-e`) puts the exact output at `(1.25 + 0.75 w)
    /// 2^E` to twice that in magnitude, `E` three binades or more below the smallest normal and
    /// at least the lower end of [`super::range_regimes::band`]: a nonzero subnormal of the
    /// output, computed from the recipe's f32 products (bf16: the products themselves are f32
    /// subnormals, and the merged-scales order rounds `scale * pertoken` as one), then rounded
    /// into the subnormal range by the output cast. Checked with the recipe's own arithmetic:
    /// each of the elements is a nonzero subnormal of the output.
    ///
    /// bf16: with a per-token scale of `2^-(18..21)` the column scale stays a normal f32
    /// (about 2^-120); without one it is an f32 subnormal (a bf16 scale cannot hold it).
    #[allow(clippy::too_many_arguments)]
    fn subnormal_outputs(
        &self,
        c: &Case,
        rec: &QmmRecipe,
        ctx: &mut GenContext,
        (sub_rows, sub_cols): (&[usize], &[usize]),
        x1: &mut [i8],
        x2: &mut [i8],
        scale: &mut [f32],
        pertoken: Option<&mut [f32]>,
        float_bias: bool,
    ) -> Result<(), OpError> {
        let (k, n) = (c.k, c.n);
        let r = Regime::SubnormalOutputs;
        let (lo, hi) = super::range_regimes::band(r, c.out).ok_or_else(|| {
            failed("subnormal_outputs: needs a bf16 or f16 output (checked before)")
        })?;
        let p = ctx.below(k as u64) as usize;
        let mut us = Vec::with_capacity(sub_rows.len());
        for &i in sub_rows {
            let row = &mut x1[i * k..(i + 1) * k];
            row.fill(0);
            let u = 64 + ctx.below(64) as i8;
            row[p] = u;
            us.push(u as i64);
        }
        // The rows' per-token scale: a power of two (f16: of the drawn size; bf16: small
        // enough that the column scale stays normal).
        let t = pertoken.map(|t| {
            let e = if c.out == ElemType::Bf16 {
                18 + ctx.below(4) as i32
            } else {
                7 + ctx.below(3) as i32
            };
            let tv = pow2(-e) as f32;
            for &i in sub_rows {
                t[i] = tv;
            }
            tv
        });
        for (q, &j) in sub_cols.iter().enumerate() {
            let v = 16 + ctx.below(112) as i64;
            let sign = if q % 2 == 0 { 1 } else { -1 };
            x2[p * n + j] = (sign * v) as i8;
            // The target for the smallest u (64): 2^E (1.25 + 0.75 w), E in [lo, hi - 3], so
            // that the scale's rounding (a bf16 or f32 subnormal scale: a few bits) keeps it
            // at least 2^lo and u up to 127 keeps it below 2^(hi - 1).
            let e = lo + ctx.below((hi - 3 - lo + 1) as u64) as i32;
            let target = (1.25 + 0.75 * ctx.unit()) * pow2(e);
            let s = target / (64.0 * v as f64 * t.map_or(1.0, |t| t as f64));
            scale[j] = match c.scale {
                ScaleKind::Bf16 => bf16::bf16_to_f32(bf16::f64_to_bf16(s, Rounding::RNE)),
                _ => s as f32,
            };
            let s_kernel = if c.scale == ScaleKind::Packed {
                rec.pack(scale_bits(c, scale[j]))
            } else {
                scale[j]
            };
            for (&i, &u) in sub_rows.iter().zip(&us) {
                let acc = sign * u * v;
                let exact = acc as f64 * s_kernel as f64 * t.map_or(1.0, |t| t as f64);
                let y = rec.epilogue(
                    i32_to_f32(acc as i32, rec.acc_to_f32),
                    s_kernel,
                    t,
                    float_bias.then_some(0.0),
                    0.0,
                );
                let bits = rec.cast_out(c.out, y);
                if !super::range_regimes::holds(r, c.out, &[exact, -exact])
                    || !c.out.is_half_subnormal(bits)
                {
                    return Err(failed(format!(
                        "subnormal_outputs: row {i}, column {j} (exact {exact:e}) is not a nonzero subnormal of the output (bits {bits:#06x})"
                    )));
                }
            }
        }
        Ok(())
    }

    /// `rounding_ties` for the int8 output: on the two tie rows (`x1 = 64` at `p0`, 1 at `p1`),
    /// `TIE_COLS` columns with a power-of-two scale `2^-(1 + d)` and an accumulator (int32 bias
    /// included) `+-(2q + 1) * 2^d`, `q` even and at most 58: the scaled value is `+-(q + 1/2)`,
    /// an exact tie of the rounding to an integer that ties to even and ties away round apart,
    /// and with an offset of at most 32 nothing saturates.
    #[allow(clippy::too_many_arguments)]
    fn int8_ties(
        &self,
        c: &Case,
        rec: &QmmRecipe,
        ctx: &mut GenContext,
        tie_rows: &[usize],
        (p0, p1): (usize, usize),
        cols: &mut impl Iterator<Item = usize>,
        x2: &mut [i8],
        scale: &mut [f32],
        ibias: &mut Option<Vec<i32>>,
        offset: Option<&[f32]>,
    ) -> Result<(), OpError> {
        let n = c.n;
        for _ in 0..TIE_COLS {
            let j = cols
                .next()
                .ok_or_else(|| failed("out of columns (checked before)"))?;
            let d = ctx.below(4) as i32;
            scale[j] = pow2(-1 - d) as f32;
            let ib = match ibias.as_mut() {
                Some(b) => {
                    b[j] = ctx.below(2049) as i32 - 1024;
                    b[j] as i64
                }
                None => 0,
            };
            let q = 2 * ctx.below(30) as i64;
            let target = (if ctx.below(2) == 0 { 1 } else { -1 } * (2 * q + 1)) << d;
            let want = target - ib;
            let (hi, lo) = (want.div_euclid(64), want.rem_euclid(64));
            if !(-128..=127).contains(&hi) {
                return Err(failed(format!("rounding_ties: {want} is out of reach")));
            }
            x2[p0 * n + j] = hi as i8;
            x2[p1 * n + j] = lo as i8;
            // Check with the recipe's own arithmetic: an exact tie, not saturated.
            let off = offset.map_or(0, |o| pack_offset(o[j]));
            let s = rec.pack(scale_bits(c, scale[j]));
            let acc = i32_to_f32(target as i32, rec.acc_to_f32);
            let even = rec.requant(acc, s, off);
            let away = QmmRecipe {
                requant_rounding: RoundingMode::NearestTiesAway,
                ..*rec
            }
            .requant(acc, s, off);
            if even == away || even.unsigned_abs() >= 127 || away.unsigned_abs() >= 127 {
                return Err(failed(format!(
                    "rounding_ties: {target} at column {j} (rows {tie_rows:?}) is not an unsaturated tie of the int8 rounding"
                )));
            }
        }
        Ok(())
    }

    /// An accumulator (`-8128..=8191`, reachable as `64 * x + y` with int8 `x` and `y` in
    /// `0..64`), a scale and a per-token scale whose two product orders round to different
    /// outputs, drawn from the stream until found (the per-token scale is set so that the
    /// exact product lies on a midpoint of the output dtype, where a few f32 ulps decide).
    fn witness(
        &self,
        c: &Case,
        rec: &QmmRecipe,
        ctx: &mut GenContext,
        scale_exact: &dyn Fn(f32) -> f32,
    ) -> Result<(i64, f32, f32), OpError> {
        let other = QmmRecipe {
            scale_order: match rec.scale_order {
                ScaleOrder::ScaleThenToken => ScaleOrder::MergedFirst,
                ScaleOrder::MergedFirst => ScaleOrder::ScaleThenToken,
            },
            ..*rec
        };
        for _ in 0..100_000 {
            let acc = (1024 + ctx.below(7104) as i64) * if ctx.below(2) == 0 { 1 } else { -1 };
            let s = scale_exact(((1.0 + ctx.unit()) * pow2(-9)) as f32);
            let t0 = (0.25 + 0.75 * ctx.unit()) * pow2(-6);
            let mid = midpoint_near(c.out, acc as f64 * s as f64 * t0);
            let t = (mid / (acc as f64 * s as f64)) as f32;
            let a = acc as f32;
            let y1 = rec.epilogue(a, s, Some(t), None, 0.0);
            let y2 = other.epilogue(a, s, Some(t), None, 0.0);
            let mode = rec.output_rounding;
            if round_out(c.out, y1, mode) != round_out(c.out, y2, mode) {
                return Ok((acc, s, t));
            }
        }
        Err(failed(
            "int_matmul_edges: no scale-order witness found within the search bound",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_keeps_19_bits_by_truncation_or_rounding() {
        let s = f32::from_bits(0x3C00_1FFF);
        assert_eq!(pack_scale(s, ScalePack::Truncate19).to_bits(), 0x3C00_0000);
        assert_eq!(pack_scale(s, ScalePack::RoundEven19).to_bits(), 0x3C00_2000);
        assert_eq!(pack_scale(s, ScalePack::FullF32), s);
        // An exact tie rounds to the even 19-bit value.
        let tie = f32::from_bits(0x3C00_1000);
        assert_eq!(
            pack_scale(tie, ScalePack::RoundEven19).to_bits(),
            0x3C00_0000
        );
        let tie_odd = f32::from_bits(0x3C00_3000);
        assert_eq!(
            pack_scale(tie_odd, ScalePack::RoundEven19).to_bits(),
            0x3C00_4000
        );
        // A carry out of the largest finite binade gives infinity in the rounding mode.
        let top = f32::from_bits(0x7F7F_F000);
        assert_eq!(pack_scale(top, ScalePack::RoundEven19), f32::INFINITY);
        assert_eq!(
            pack_scale(top, ScalePack::Truncate19).to_bits(),
            0x7F7F_E000
        );
        // A subnormal scale packs to a signed zero in the rounding mode.
        assert_eq!(
            pack_scale(f32::from_bits(0x8000_1234), ScalePack::RoundEven19).to_bits(),
            0x8000_0000
        );
    }

    #[test]
    fn rounding_to_an_integer_and_the_offset_packing() {
        let e = RoundingMode::NearestTiesToEven;
        let a = RoundingMode::NearestTiesAway;
        assert_eq!(round_to_integer(2.5, e), 2);
        assert_eq!(round_to_integer(2.5, a), 3);
        assert_eq!(round_to_integer(-3.5, e), -4);
        assert_eq!(round_to_integer(-2.5, a), -3);
        assert_eq!(round_to_integer(-2.4999, e), -2);
        assert_eq!(round_to_integer(7.0, a), 7);
        assert_eq!(round_to_integer(-1.25, RoundingMode::TowardNegative), -2);
        assert_eq!(round_to_integer(1e300, e), i64::MAX);
        // npu_trans_quant_param's offset: ties to even, clamped to 9 bits.
        assert_eq!(pack_offset(0.5), 0);
        assert_eq!(pack_offset(-1.5), -2);
        assert_eq!(pack_offset(300.0), 255);
        assert_eq!(pack_offset(-300.7), -256);
        // The requantisation: 9-bit clamp before the offset, int8 clamp after it.
        let k = QmmRecipe::preset("a2_fixpipe").unwrap();
        assert_eq!(k.requant(1000.0, 1.0, -200), 55);
        assert_eq!(k.requant(5.0, 0.5, 0), 2);
        assert_eq!(k.requant(-300.0, 1.0, 100), -128);
    }

    #[test]
    fn int_to_f32_rounds_above_2_24_with_the_mode() {
        let v = (1 << 24) + 1;
        assert_eq!(i32_to_f32(v, RoundingMode::NearestTiesToEven), 16777216.0);
        assert_eq!(i32_to_f32(v, RoundingMode::NearestTiesAway), 16777218.0);
        assert_eq!(i32_to_f32(-v, RoundingMode::TowardZero), -16777216.0);
        assert_eq!(i32_to_f32(12345, RoundingMode::TowardPositive), 12345.0);
    }

    #[test]
    fn the_oracle_is_the_exact_value_rounded_to_odd() {
        // 3 * 0.5 * 0.25 + 1 = 1.375 exactly.
        assert_eq!(oracle_value(3, 0.5, Some(0.25), Some(1.0)), 1.375);
        // A product that needs more than 53 bits: rounded to odd (the last bit set).
        let acc = (1i64 << 30) + 1;
        let s = f32::from_bits(0x3F80_0001); // 1 + 2^-23
        let t = f32::from_bits(0x3F80_0001);
        let v = oracle_value(acc, s, Some(t), None);
        assert_eq!(v.to_bits() & 1, 1);
        // 2^-23 and 2^-52 written exactly (no platform pow in the reference crate).
        let ulp23 = 1.0 / 8_388_608.0;
        let exact = (acc as f64) * (1.0 + ulp23) * (1.0 + ulp23);
        assert!((v - exact).abs() <= exact * f64::EPSILON);
        // Far-apart terms still give the larger one (and the sign of the sum).
        assert_eq!(oracle_value(0, 1.0, None, Some(-2.0)), -2.0);
    }

    #[test]
    fn the_kernel_multiplies_the_scale_first_then_the_token() {
        let k = QmmRecipe::preset("a2_pertoken").unwrap();
        let opt = QmmRecipe::preset("a2_pertoken_opt").unwrap();
        let (a, s, t) = (1000.0f32, 0.1f32, 0.3f32);
        assert_eq!(opt.epilogue(a, s, Some(t), None, 0.0), a * (t * s));
        assert_eq!(k.epilogue(a, s, Some(t), None, 0.0), (a * s) * t);
        let merged = QmmRecipe {
            scale_order: ScaleOrder::MergedFirst,
            ..k
        };
        assert_eq!(merged.epilogue(a, s, Some(t), None, 0.0), a * (s * t));
        assert_eq!(k.epilogue(a, s, None, Some(2.0), 0.0), a * s + 2.0);
    }
}
