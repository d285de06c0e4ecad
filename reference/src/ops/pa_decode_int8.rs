//! `pa_decode_int8`: one decode step over an INT8 paged KV cache, as vLLM-Ascend's C8 path
//! runs it (docs/ascend.md, rows `c8.*`): the new tokens' K/V rows are quantised with static
//! antiquant scales and written into the INT8 cache at their slots (quantise-on-write), then
//! `npu_fused_infer_attention_score` decodes over the cache with `key_antiquant_scale` /
//! `value_antiquant_scale` (and offsets), dequantising inside attention.
//!
//! One op, not two: the write and the attention share the scales, the block table and the
//! cache, and a decode step always does both; both results are outputs of every case (the
//! caches bit for bit), so a fault of either half shows in the same case.
//!
//! Params (JSON, unknown keys rejected): `dtype` (`bf16` | `f16`, the query's and the new rows'),
//! `input_layout` (`BSND` default, `BNSD`, `BSH`), `batch`, `num_heads`, `num_key_value_heads`
//! (0 = `num_heads`), `head_dim`, `scale`, `actual_seq_lengths_kv` (context length per
//! sequence, the new tokens included), `block_size` (a multiple of 32 in 32..=512: the page's
//! INT8 alignment), `cache_layout` (`BnBsH` default, `BnNBsD` only with BNSD queries),
//! `num_blocks`, `max_blocks`, `new_tokens` (rows each sequence writes this step, default 1:
//! the last `new_tokens` positions of each context), `key_antiquant_mode` /
//! `value_antiquant_mode` (0 per-channel, 1 per-token; equal, or key 0 with value 1 and an
//! f16 query, as the page allows), `antiquant_offset` (bool: asymmetric, with offsets).
//!
//! Tensors: inputs `query`, `key` / `value` (`[B * new_tokens, KV_N, D]`, the dtype), `slot_mapping`
//! (I32 `[B * new_tokens]`), `key_cache_in` / `value_cache_in` (I8, layout shape), `block_table`
//! (I32 `[B, max_blocks]`), `key_antiquant_scale` / `value_antiquant_scale` (mode 0: the
//! dtype `[1, KV_N, D]`; mode 1: F32 `[1, B, max_blocks * block_size]`, one per (sequence,
//! position)), and the `*_antiquant_offset` twins when asked. Outputs `key_cache_out`,
//! `value_cache_out` (I8) and `attention_out`.
//!
//! Arithmetic ([`C8Recipe`]). Write (vLLM-Ascend `_quantize_kv_to_int8`, torch ops on the
//! rows' dtype): `inv = 1 / s` (per-channel: an f32 division rounded to the dtype, torch's
//! bf16/f16 division; per-token: f32), `y = clamp(round_half_even(fl(fl(x * inv) - o)), -128,
//! 127)` where `fl` rounds RNE to the promoted dtype (the dtype per-channel, f32 per-token) and
//! `o` is the FIA offset (vLLM adds its own offset, FIA's with the sign flipped, so that
//! dequantisation gives back `x`). Dequantisation (FIA, ops-transformer IFA kernel): `(y +
//! o) * s`; the `ascend_ifa_c8` recipe forms it in f32 (exact for the generated scales and
//! offsets) and runs the `ascend_ifa_bf16` attention recipe on the dequantised cache;
//! `c8_dequant_in_dtype` rounds each step to the query dtype, `dtype(dtype(y + o) * s)` with the
//! FIA offset `o` the inputs carry (vLLM-Ascend's host-side dense dequantisation, which writes
//! it `(key.to(dtype) - offset_vllm) * scale` with its own offset `offset_vllm = -o`).
//! `oracle`: the write as above (it is bit-defined by the torch ops, not a kernel's
//! approximation of `round(x / s - o)`), the exact
//! dequantisation and the f64 attention oracle. Writing the exact quotient instead would move an
//! oracle output by a whole scale step wherever the 16-bit arithmetic lands on the other side of
//! a near tie: the error ratio of the attention output would then measure which side the write
//! took (already judged on the caches), not the attention arithmetic.
//!
//! Regimes: `rounding_ties` (8 exact .5 ties with an even integer part per cache among the new
//! rows, on channels or tokens whose scale is a power of two, under the case's recipe) and
//! `kv_int8_edges` (8 new-row elements per cache beyond +127 and 8 beyond -128 after scaling,
//! so saturation shows; the shape has two or more KV heads, several blocks per sequence and a
//! partial last block). Scales always differ per channel and head (per token), offsets are
//! never zero. The attention half's regimes (`moderate_late_max`, `moderate_early_max`,
//! `subnormal_outputs`, `attention_ties`) are built on the cache's codes
//! (`pa_decode_int8/attention_half.rs`): steering key channels with power-of-two scales and integer offsets
//! carry the scores, value channels scaled into the subnormal range carry the subnormals.

mod attention_half;
mod compute;
mod preset;
mod recipe;
#[cfg(test)]
mod tests;

pub(crate) mod faults;

use super::fa_prefill::{attention_flops, invalid, op_error, oracle_outputs, output_specs};
use super::pa_decode::{check_new_tokens, PaDecodeParams, Plan};
use super::path::ParamPath;
use super::preset_family::{self, PresetFamily};
use super::regime::Regime;
use super::{
    input, parse_params, ElemType, GenContext, OpCost, OpDescription, OpError, OpFamily, Tensor,
    TensorMap, TensorSpec,
};
use crate::attention::{
    gather_contiguous, oracle, paged_attention, AttentionInputs, CacheData, InputLayout, PagedKv,
    Recipe,
};
use crate::formats::{bf16, f16, DType, Rounding};
use crate::kv::{CacheGeometry, KvCacheLayout};
use crate::parallel::{map_tasks, Threads};
pub use recipe::*;

/// The op name.
pub const OP: &str = "pa_decode_int8";

fn default_layout() -> InputLayout {
    InputLayout::Bsnd
}
fn default_block_size() -> usize {
    128
}
fn default_cache_layout() -> KvCacheLayout {
    KvCacheLayout::BnBsH
}
fn one() -> usize {
    1
}

#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    dtype: DType,
    #[serde(default = "default_layout")]
    input_layout: InputLayout,
    batch: usize,
    num_heads: usize,
    #[serde(default)]
    num_key_value_heads: usize,
    head_dim: usize,
    #[serde(default)]
    scale: Option<f64>,
    actual_seq_lengths_kv: Vec<i64>,
    #[serde(default = "default_block_size")]
    block_size: usize,
    #[serde(default = "default_cache_layout")]
    cache_layout: KvCacheLayout,
    #[serde(default)]
    num_blocks: Option<usize>,
    #[serde(default)]
    max_blocks: Option<usize>,
    #[serde(default = "one")]
    new_tokens: usize,
    #[serde(default)]
    key_antiquant_mode: u32,
    #[serde(default)]
    value_antiquant_mode: u32,
    #[serde(default)]
    antiquant_offset: bool,
    /// Vector cores of the SoC whose decode-kernel tiling the attention recipe follows (set
    /// by the harness from the suite's hardware profile, as for `pa_decode`).
    #[serde(default)]
    vector_cores: Option<usize>,
}

/// A validated case.
pub(crate) struct Case {
    p: Params,
    plan: Plan,
    key_mode: u32,
    value_mode: u32,
}

impl Case {
    fn cache(&self) -> CacheGeometry {
        self.plan.cache
    }
    fn rows(&self) -> usize {
        self.p.batch * self.p.new_tokens
    }
    /// Positions per sequence in a per-token parameter tensor.
    fn token_len(&self) -> usize {
        self.plan.max_blocks * self.p.block_size
    }
    /// (batch, position) of new row `r`.
    fn row_position(&self, r: usize) -> (usize, usize) {
        let b = r / self.p.new_tokens;
        let i = r % self.p.new_tokens;
        (b, self.plan.g.lk[b] - self.p.new_tokens + i)
    }
    fn param_shape(&self, mode: u32) -> (ElemType, Vec<usize>, &'static [&'static str]) {
        if mode == 0 {
            (
                ElemType::from(self.p.dtype),
                vec![1, self.plan.g.kv_heads, self.plan.g.head_dim],
                &["one", "n", "d"],
            )
        } else {
            (
                ElemType::F32,
                vec![1, self.p.batch, self.token_len()],
                &["one", "b", "s"],
            )
        }
    }
}

/// The kernel variant a `pa_decode_int8` case judged against `recipe` runs (the decode
/// kernel's antiquant path on every release read); `None` for a recipe that models no CANN
/// kernel.
pub fn dispatch(
    params: &serde_json::Value,
    recipe: &str,
) -> Result<Option<crate::variant::Dispatch>, OpError> {
    if recipe != "ascend_ifa_c8" {
        return Ok(None);
    }
    let c = PaDecodeInt8.case(params)?;
    Ok(Some(super::attention_variants::dispatch_decode_int8(
        c.plan.g.head_dim,
        &c.plan.tiling_shape(),
        c.p.vector_cores,
    )))
}

/// The `pa_decode_int8` family.
pub struct PaDecodeInt8;

fn failed(message: impl std::fmt::Display) -> OpError {
    OpError::failed(OP, message)
}

fn round_to(dtype: DType, v: f32) -> f32 {
    match dtype {
        DType::F16 => f16::f16_to_f32(f16::f64_to_f16(v as f64, Rounding::RNE)),
        _ => bf16::bf16_to_f32(bf16::f64_to_bf16(v as f64, Rounding::RNE)),
    }
}

/// The parameters (scale, offset) of one K or V tensor, decoded to f32 (exact widening).
struct QuantParams {
    mode: u32,
    scale: Vec<f32>,
    offset: Option<Vec<f32>>,
}

impl QuantParams {
    /// Index of the parameter for (batch, position, head, d) under `r`.
    fn index(&self, c: &Case, r: &C8Recipe, b: usize, pos: usize, h: usize, d: usize) -> usize {
        if r.per_tensor {
            return 0;
        }
        if self.mode == 0 {
            let kvh = c.plan.g.kv_heads;
            ((h + r.head_shift) % kvh) * c.plan.g.head_dim + d
        } else {
            match r.token_index {
                TokenIndex::BatchThenPosition => b * c.token_len() + pos,
                TokenIndex::PositionThenBatch => pos * c.p.batch + b,
            }
        }
    }
    fn at(&self, i: usize) -> (f32, f32) {
        (self.scale[i], self.offset.as_ref().map_or(0.0, |o| o[i]))
    }
}

/// The inputs of a case, decoded.
struct Decoded {
    query: Vec<f32>,
    key: Vec<u16>,
    value: Vec<u16>,
    slots: Vec<i64>,
    key_cache: Vec<i8>,
    value_cache: Vec<i8>,
    table: Vec<i64>,
    kp: QuantParams,
    vp: QuantParams,
}

fn i8_values(t: &Tensor) -> Vec<i8> {
    t.data.iter().map(|&b| b as i8).collect()
}

/// The write of one element: `x` (a dtype value), the scale `s` and FIA offset `o` of its
/// channel (mode 0, dtype values) or token (mode 1, f32).
pub fn quantise(dtype: DType, mode: u32, r: &C8Recipe, x: f32, s: f32, o: f32) -> i8 {
    let o = if r.write_subtracts_offset { -o } else { o };
    // inv = 1 / s: an f32 division (IEEE, RNE), rounded to the dtype per-channel (torch's
    // bf16/f16 division computes in f32 and rounds the result once more).
    let inv = 1.0f32 / s;
    let v = if mode == 0 {
        let inv = round_to(dtype, inv);
        // x * inv is exact in f32 (two 16-bit significands); one rounding to the dtype.
        let p = round_to(dtype, x * inv);
        // p + o in f32 (RNE), then to the dtype (RNE): torch's 16-bit add.
        round_to(dtype, p + o)
    } else {
        // bf16/f16 x with f32 parameters: torch promotes to f32; two f32 operations.
        x * inv + o
    };
    let i = super::dynamic_quant::round_to_int(v, r.rounding);
    if r.saturate {
        i.clamp(-128, 127) as i8
    } else {
        // The low 8 bits of the two's-complement integer: a cast without saturation.
        (i & 0xFF) as u8 as i8
    }
}

/// The recipe's dequantisation of one int8 value `y` (as f32, exact).
pub fn dequantise_one(dtype: DType, r: &C8Recipe, y: f32, s: f32, o: f32) -> f32 {
    let rd = |v: f32| match r.dequant_precision {
        DequantPrecision::F32 => v,
        DequantPrecision::QueryDtype => round_to(dtype, v),
    };
    let v = match r.dequant {
        DequantForm::AddThenScale => rd(rd(y + o) * s),
        DequantForm::SubtractThenScale => rd(rd(y - o) * s),
        DequantForm::ScaleThenAdd => rd(rd(y * s) + o),
    };
    let min_normal = match dtype {
        DType::F16 => f16::f16_to_f32(0x0400),
        _ => f32::MIN_POSITIVE,
    };
    if r.dequant_flushes_subnormals && v.abs() < min_normal {
        0.0f32.copysign(v)
    } else {
        v
    }
}

/// The preset that models FIA's antiquant decode.
const ASCEND_IFA_C8: &str = PRESETS[0];

/// Claims about `pa_decode_int8` (the INT8 KV cache write and FIA's antiquant decode) fixed in
/// the code rather than a recipe field.
pub const CLAIMS: [&str; 7] = [
    "c8.claim.param_shapes",
    "c8.claim.modes",
    "c8.claim.block_size",
    "c8.claim.inverse_scale",
    "c8.claim.write_precision",
    "c8.claim.msd",
    "c8.claim.offset_fold",
];

impl OpFamily for PaDecodeInt8 {
    fn faults(&self) -> Vec<&'static crate::ops::fault::Fault> {
        super::attention_faults::FAULTS
            .iter()
            .chain(faults::FAULTS)
            .collect()
    }

    fn knob_family(&self) -> &'static str {
        "c8"
    }
    fn kernel_variants(&self) -> &'static [&'static crate::variant::KernelVariant] {
        static VARIANTS: [&crate::variant::KernelVariant; 1] = [&super::attention_variants::IFA_C8];
        &VARIANTS
    }
    fn dispatch(
        &self,
        recipe: &str,
        params: &serde_json::Value,
        platform: Option<&crate::variant::Platform>,
    ) -> Option<crate::variant::Dispatch> {
        let _ = platform;
        dispatch(params, recipe).ok().flatten()
    }
    fn preset_knobs(
        &self,
        preset: &str,
        dtype: crate::formats::DType,
        edit: Option<&crate::recipe_edit::RecipeEdit>,
    ) -> Option<Vec<crate::knob::Knob>> {
        if preset != ASCEND_IFA_C8 {
            return None;
        }
        C8Recipe::preset(preset).map(|r| {
            let r = crate::recipe_edit::edited(r, edit);
            let mut k = r.knobs(preset);
            k.extend(CLAIMS.iter().map(|&id| crate::knob::Knob::claim(id)));
            if let Some(a) = crate::attention::Recipe::preset(r.attention, dtype) {
                let a = crate::recipe_edit::edited(a, edit);
                k.extend(crate::attention::ascend_knobs::knobs(&a));
            }
            k
        })
    }
    fn knob_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = C8Recipe::preset(ASCEND_IFA_C8)
            .map(|r| r.knobs(ASCEND_IFA_C8).into_iter().map(|k| k.id).collect())
            .unwrap_or_default();
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
                "per_token_key",
                "key_antiquant_mode 1: the key cache's scales are per token, read through the block table",
                p.key_antiquant_mode == 1,
            ),
            ParamPath::new(
                "antiquant_offset",
                "an antiquant offset subtracted before the scale",
                p.antiquant_offset,
            ),
            super::path::odd_heads(p.num_heads, p.num_key_value_heads),
        ])
    }

    fn describe(&self, params: &serde_json::Value) -> Result<OpDescription, OpError> {
        let c = self.case(params)?;
        let (inputs, outputs) = self.specs(&c);
        let g = &c.plan.g;
        let es = g.dtype.size_bytes() as f64;
        let keys: usize = g.lk.iter().sum();
        let kvh_d = (g.kv_heads * g.head_dim) as f64;
        let param_bytes: f64 = inputs
            .iter()
            .filter(|s| s.name.contains("antiquant"))
            .map(|s| s.bytes() as f64)
            .sum();
        // Minimum traffic: the query, the INT8 K and V of every valid key (1 byte each), the
        // new rows read (dtype) and written (int8), the parameters, slot mapping, block table
        // and output. The rest of the cache is neither read nor written by a kernel.
        let rows = c.rows() as f64;
        let bytes = g.q_len() as f64 * es
            + 2.0 * keys as f64 * kvh_d
            + 2.0 * rows * kvh_d * (es + 1.0)
            + rows * 4.0
            + param_bytes
            + (g.batch * c.plan.max_blocks * 4) as f64
            + (g.q_len() as f64) * es;
        // Attention, plus 2 per dequantised element (add, multiply) and 3 per written one.
        let flops = attention_flops(g) + 2.0 * 2.0 * keys as f64 * kvh_d + 3.0 * 2.0 * rows * kvh_d;
        Ok(OpDescription {
            inputs,
            outputs,
            cost: OpCost {
                flops,
                bytes,
                compute: ElemType::from(g.dtype),
            },
        })
    }

    fn generate(
        &self,
        params: &serde_json::Value,
        ctx: &mut GenContext,
    ) -> Result<TensorMap, OpError> {
        let c = self.case(params)?;
        let g = &c.plan.g;
        let cg = c.cache();
        let dtype = g.dtype;
        let et = ElemType::from(dtype);
        let mut m = TensorMap::new();
        let q: Vec<f64> = ctx.values(g.q_len(), &super::special_values(et));
        m.insert(
            "query".into(),
            Tensor::round_values(et, g.q_shape(), &q, Rounding::RNE),
        );
        // Block table: a shuffled permutation of physical blocks, handed out in order.
        let mut perm: Vec<usize> = (0..cg.num_blocks).collect();
        ctx.shuffle(&mut perm);
        let width = c.plan.max_blocks;
        let mut table = vec![0i32; g.batch * width];
        let mut next = 0;
        for b in 0..g.batch {
            for j in 0..c.plan.used[b] {
                table[b * width + j] = perm[next] as i32;
                next += 1;
            }
        }
        // Old cache contents: random int8 everywhere (stale data at the new tokens' slots too,
        // so a write to the wrong slot leaves it visible).
        let n = cg.num_blocks * cg.block_size * cg.kv_heads * cg.head_dim;
        let shape = c.p.cache_layout.shape(&cg);
        for name in ["key_cache_in", "value_cache_in"] {
            let vals: Vec<i8> = (0..n).map(|_| ctx.below(256) as u8 as i8).collect();
            m.insert(name.into(), Tensor::from_i8(shape.clone(), &vals));
        }
        // Slot mapping of the new rows: the slots of their positions.
        let slots: Vec<i32> = (0..c.rows())
            .map(|r| {
                let (b, pos) = c.row_position(r);
                table[b * width + pos / cg.block_size] * cg.block_size as i32
                    + (pos % cg.block_size) as i32
            })
            .collect();
        m.insert(
            "slot_mapping".into(),
            Tensor::from_i32(vec![c.rows()], &slots),
        );
        m.insert(
            "block_table".into(),
            Tensor::from_i32(vec![g.batch, width], &table),
        );
        // Parameters: scales distinct per channel (or token) in [1/128, 1/16), offsets
        // nonzero multiples of 1/16 in [-4, 4] (so (y + o) * s is exact in f32).
        for (which, mode) in [("key", c.key_mode), ("value", c.value_mode)] {
            let (dt, pshape, _) = c.param_shape(mode);
            let count: usize = pshape.iter().product();
            let scale: Vec<f64> = (0..count).map(|_| draw_scale(ctx, mode)).collect();
            m.insert(
                format!("{which}_antiquant_scale"),
                param_tensor(dt, pshape.clone(), &scale),
            );
            if c.p.antiquant_offset {
                let off: Vec<f64> = (0..count).map(|_| draw_offset(ctx)).collect();
                m.insert(
                    format!("{which}_antiquant_offset"),
                    param_tensor(dt, pshape, &off),
                );
            }
        }
        // New rows: values whose quantised magnitude spreads over the int8 range: x = u * 120
        // * s of their own channel or token (before rounding to the dtype).
        let d = (
            self.quant_params(&c, &m, "key", c.key_mode)?,
            self.quant_params(&c, &m, "value", c.value_mode)?,
        );
        let kernel = C8Recipe::preset("ascend_ifa_c8").expect("the kernel preset exists");
        for (which, qp) in [("key", &d.0), ("value", &d.1)] {
            let mut vals = Vec::with_capacity(c.rows() * g.kv_heads * g.head_dim);
            for r in 0..c.rows() {
                let (b, pos) = c.row_position(r);
                for h in 0..g.kv_heads {
                    for e in 0..g.head_dim {
                        let (s, _) = qp.at(qp.index(&c, &kernel, b, pos, h, e));
                        vals.push((2.0 * ctx.unit() - 1.0) * 120.0 * s as f64);
                    }
                }
            }
            m.insert(
                which.into(),
                Tensor::round_values(
                    et,
                    vec![c.rows(), g.kv_heads, g.head_dim],
                    &vals,
                    Rounding::RNE,
                ),
            );
        }
        Ok(m)
    }

    fn regimes(&self) -> &'static [Regime] {
        &[
            Regime::RoundingTies,
            Regime::SubnormalOutputs,
            Regime::KvInt8Edges,
            Regime::ModerateLateMax,
            Regime::ModerateEarlyMax,
            Regime::AttentionTies,
        ]
    }

    fn check_regimes(&self, params: &serde_json::Value, regimes: &[Regime]) -> Result<(), OpError> {
        preset_family::only_own_regimes(OP, regimes)?;
        let c = self.case(params)?;
        let err = |r: &Regime, message: String| OpError::Regime {
            op: OP.into(),
            regime: r.name().into(),
            message,
        };
        attention_half::check(&c, regimes)?;
        for r in regimes {
            let per_row = c.plan.g.kv_heads * c.plan.g.head_dim;
            if c.rows() * per_row < 2 * TIE_ELEMENTS + 2 * EDGE_ELEMENTS {
                return Err(err(
                    r,
                    format!(
                        "the new rows hold {} elements per cache, the constructions need {}",
                        c.rows() * per_row,
                        2 * TIE_ELEMENTS + 2 * EDGE_ELEMENTS
                    ),
                ));
            }
            if *r == Regime::KvInt8Edges {
                let g = &c.plan.g;
                if g.kv_heads < 2 {
                    return Err(err(
                        r,
                        "needs two or more KV heads (a head mix-up of the parameters shows only then)".into(),
                    ));
                }
                if !c.plan.used.iter().any(|&u| u >= 2) {
                    return Err(err(r, "needs a sequence spanning several blocks".into()));
                }
                if !g.lk.iter().any(|&l| !l.is_multiple_of(c.p.block_size)) {
                    return Err(err(
                        r,
                        "needs a sequence whose last block is partial".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    preset_family::preset_family_methods!();
}

impl PaDecodeInt8 {
    /// The attention recipe `r` runs on the dequantised cache (on the case's vector cores).
    fn attention_recipe(&self, c: &Case, r: &C8Recipe) -> Result<Recipe, OpError> {
        Ok(Recipe::preset(r.attention, c.plan.g.dtype)
            .ok_or_else(|| failed(format!("no attention preset `{}`", r.attention)))?
            .on_vector_cores(c.p.vector_cores))
    }

    /// [`Self::run_recipe`] with the attention recipe `attn` (an edit of `r`'s).
    fn run_recipe_with(
        &self,
        c: &Case,
        r: &C8Recipe,
        attn: &Recipe,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let d = self.decoded(c, inputs)?;
        self.check_table(c, &d.table)?;
        let (kc, vc) = self.write(c, r, &d)?;
        let [kf, vf] = self.dequantise(c, r, &d, [&kc, &vc], threads)?;
        let g = &c.plan.g;
        let kv = PagedKv {
            key_cache: CacheData::F32(&kf),
            value_cache: CacheData::F32(&vf),
            layout: c.p.cache_layout,
            cache: c.cache(),
            block_table: &d.table,
            max_blocks: c.plan.max_blocks,
        };
        let o =
            paged_attention(g, attn, &d.query, None, &kv, threads).map_err(|e| op_error(OP, e))?;
        let mut m = super::fa_prefill::recipe_outputs(g, &o.out, o.lse.as_deref());
        let shape = c.p.cache_layout.shape(&c.cache());
        m.insert("key_cache_out".into(), Tensor::from_i8(shape.clone(), &kc));
        m.insert("value_cache_out".into(), Tensor::from_i8(shape, &vc));
        Ok(m)
    }
}

/// Ties `rounding_ties` plants per cache, and elements `kv_int8_edges` saturates per sign.
const TIE_ELEMENTS: usize = 8;
const EDGE_ELEMENTS: usize = 8;

/// A scale in [1/128, 1/16) with at most 8 significant bits (exact in bf16, f16 and f32).
fn draw_scale(ctx: &mut GenContext, _mode: u32) -> f64 {
    let m = 128 + ctx.below(128) as i32; // 8 bits
    let e = 3 + ctx.below(4) as i32; // 2^-3 .. 2^-6 times m / 256
    m as f64 / 256.0 * pow2(-e)
}

/// A nonzero multiple of 1/16 in [-4, 4].
fn draw_offset(ctx: &mut GenContext) -> f64 {
    let k = 1 + ctx.below(64) as i32;
    let sign = if ctx.below(2) == 0 { 1.0 } else { -1.0 };
    sign * k as f64 / 16.0
}

fn param_tensor(dt: ElemType, shape: Vec<usize>, v: &[f64]) -> Tensor {
    if dt == ElemType::F32 {
        let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
        Tensor::from_f32(shape, &f)
    } else {
        Tensor::round_values(dt, shape, v, Rounding::RNE)
    }
}

/// 2^k exactly (k within f64's normal range).
fn pow2(k: i32) -> f64 {
    f64::from_bits(((1023 + k as i64) as u64) << 52)
}

/// The recipe the regimes are constructed for (both presets share the write).
fn regime_recipe(ctx: &GenContext) -> C8Recipe {
    ctx.recipe
        .as_deref()
        .and_then(C8Recipe::preset)
        .unwrap_or_else(|| C8Recipe::preset("ascend_ifa_c8").expect("the kernel preset exists"))
}

/// The write's value before the cast to an integer (what [`quantise`] rounds).
fn pre_cast(dtype: DType, mode: u32, r: &C8Recipe, x: f32, s: f32, o: f32) -> f32 {
    let o = if r.write_subtracts_offset { -o } else { o };
    let inv = 1.0f32 / s;
    if mode == 0 {
        let inv = round_to(dtype, inv);
        round_to(dtype, round_to(dtype, x * inv) + o)
    } else {
        x * inv + o
    }
}
