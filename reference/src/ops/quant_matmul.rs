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
//! packed scales whose 19-bit truncation differs from rounding). See `quant_matmul/regimes.rs`.

pub(crate) mod faults;
mod oracle;
mod preset;
mod recipe;
mod regimes;
#[cfg(test)]
mod tests;

use super::path::{odd_above_one, ParamPath};
use super::preset_family::{self, PresetFamily};
use super::quant_matmul_variants::QmmShape;
use super::regime::Regime;
use super::{
    input, parse_params, ElemType, GenContext, OpCost, OpDescription, OpError, OpFamily, Tensor,
    TensorMap, TensorSpec,
};
use crate::formats::{bf16, f16, Rounding, RoundingMode};
use crate::parallel::{map_tasks, Threads};
use crate::variant::{Dispatch, Platform};
pub use oracle::{oracle_requant, oracle_value};
pub use recipe::*;

/// The op name.
pub const OP: &str = "quant_matmul";

/// The largest reduction length accepted: `128 * 128 * 65536 = 2^30`, so no int32 accumulator
/// overflows.
pub const MAX_K: usize = 65536;

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
    fn faults(&self) -> Vec<&'static crate::ops::fault::Fault> {
        faults::FAULTS.iter().collect()
    }

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
        let variants = self.kernel_variants();
        preset_family::variant_preset_knobs(
            variants,
            preset,
            edit,
            QmmRecipe::preset,
            QmmRecipe::knobs,
            &CLAIMS,
        )
    }
    fn knob_ids(&self) -> Vec<String> {
        preset_family::variant_knob_ids(
            self.kernel_variants(),
            QmmRecipe::preset,
            QmmRecipe::knobs,
            &CLAIMS,
        )
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
