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
use crate::formats::{bf16, f16, DType, Rounding, RoundingMode};
use crate::knob::Knob;
use crate::kv::{CacheGeometry, KvCacheLayout};
use crate::parallel::{map_tasks, Threads};

/// The op name.
pub const OP: &str = "pa_decode_int8";

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

impl PaDecodeInt8 {
    fn specs(&self, c: &Case) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
        let g = &c.plan.g;
        let et = ElemType::from(g.dtype);
        let cache_axes: &[&str] = match c.p.cache_layout {
            KvCacheLayout::BnNBsD => &["block", "n", "slot", "d"],
            _ => &["block", "slot", "h"],
        };
        let cshape = c.p.cache_layout.shape(&c.cache());
        let rows = c.rows();
        let mut inputs = vec![
            TensorSpec::new("query", et, g.q_shape(), g.in_axes()),
            TensorSpec::new(
                "key",
                et,
                vec![rows, g.kv_heads, g.head_dim],
                &["t", "n", "d"],
            ),
            TensorSpec::new(
                "value",
                et,
                vec![rows, g.kv_heads, g.head_dim],
                &["t", "n", "d"],
            ),
            TensorSpec::new("slot_mapping", ElemType::I32, vec![rows], &["t"]),
            TensorSpec::new("key_cache_in", ElemType::I8, cshape.clone(), cache_axes),
            TensorSpec::new("value_cache_in", ElemType::I8, cshape.clone(), cache_axes),
            TensorSpec::new(
                "block_table",
                ElemType::I32,
                vec![g.batch, c.plan.max_blocks],
                &["b", "block"],
            ),
        ];
        for (which, mode) in [("key", c.key_mode), ("value", c.value_mode)] {
            let (dt, shape, axes) = c.param_shape(mode);
            inputs.push(TensorSpec::new(
                &format!("{which}_antiquant_scale"),
                dt,
                shape.clone(),
                axes,
            ));
            if c.p.antiquant_offset {
                inputs.push(TensorSpec::new(
                    &format!("{which}_antiquant_offset"),
                    dt,
                    shape,
                    axes,
                ));
            }
        }
        let mut outputs = vec![
            TensorSpec::new("key_cache_out", ElemType::I8, cshape.clone(), cache_axes),
            TensorSpec::new("value_cache_out", ElemType::I8, cshape, cache_axes),
        ];
        outputs.extend(output_specs(g));
        (inputs, outputs)
    }

    fn decoded(&self, c: &Case, inputs: &TensorMap) -> Result<Decoded, OpError> {
        let (specs, _) = self.specs(c);
        let get = |name: &str| -> Result<&Tensor, OpError> {
            let spec = specs
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| failed(format!("no input `{name}`")))?;
            input(OP, inputs, spec)
        };
        let f32s = |name: &str| -> Result<Vec<f32>, OpError> {
            get(name)?.to_f32_vec().map_err(|e| OpError::InvalidInput {
                op: OP.into(),
                input: name.into(),
                message: e.to_string(),
            })
        };
        let ints = |name: &str| -> Result<Vec<i64>, OpError> {
            get(name)?.to_i64_vec().map_err(|e| OpError::InvalidInput {
                op: OP.into(),
                input: name.into(),
                message: e.to_string(),
            })
        };
        Ok(Decoded {
            query: f32s("query")?,
            key: get("key")?.bits16().map_err(failed)?,
            value: get("value")?.bits16().map_err(failed)?,
            slots: ints("slot_mapping")?,
            key_cache: i8_values(get("key_cache_in")?),
            value_cache: i8_values(get("value_cache_in")?),
            table: ints("block_table")?,
            kp: self.quant_params(c, inputs, "key", c.key_mode)?,
            vp: self.quant_params(c, inputs, "value", c.value_mode)?,
        })
    }

    /// The scale and offset of `which` (`key` / `value`), checked: scales finite and
    /// positive, offsets finite.
    fn quant_params(
        &self,
        c: &Case,
        inputs: &TensorMap,
        which: &str,
        mode: u32,
    ) -> Result<QuantParams, OpError> {
        let (specs, _) = self.specs(c);
        let f32s = |name: &str| -> Result<Vec<f32>, OpError> {
            let spec = specs
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| failed(format!("no input `{name}`")))?;
            input(OP, inputs, spec)?
                .to_f32_vec()
                .map_err(|e| OpError::InvalidInput {
                    op: OP.into(),
                    input: name.into(),
                    message: e.to_string(),
                })
        };
        let sname = format!("{which}_antiquant_scale");
        let scale = f32s(&sname)?;
        if let Some(i) = scale.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(OpError::InvalidInput {
                op: OP.into(),
                input: sname,
                message: format!(
                    "element {i} is {}: scales must be finite and positive",
                    scale[i]
                ),
            });
        }
        let offset = if c.p.antiquant_offset {
            let oname = format!("{which}_antiquant_offset");
            let o = f32s(&oname)?;
            if let Some(i) = o.iter().position(|v| !v.is_finite()) {
                return Err(OpError::InvalidInput {
                    op: OP.into(),
                    input: oname,
                    message: format!("element {i} is {}: offsets must be finite", o[i]),
                });
            }
            Some(o)
        } else {
            None
        };
        Ok(QuantParams {
            mode,
            scale,
            offset,
        })
    }

    fn decode16(c: &Case, bits: u16) -> f32 {
        match c.p.dtype {
            DType::F16 => f16::f16_to_f32(bits),
            _ => bf16::bf16_to_f32(bits),
        }
    }

    /// The (block, slot) of slot-mapping entry `r`, after `shift`.
    fn slot_of(c: &Case, slots: &[i64], r: usize, shift: usize) -> Result<(usize, usize), OpError> {
        let cg = c.cache();
        let total = cg.num_blocks * cg.block_size;
        let s = slots[r];
        if s < 0 || s as usize >= total {
            return Err(OpError::InvalidInput {
                op: OP.into(),
                input: "slot_mapping".into(),
                message: format!(
                    "entry {r} is {s}, outside the cache's {total} slots ({} blocks of {})",
                    cg.num_blocks, cg.block_size
                ),
            });
        }
        let s = (s as usize + shift) % total;
        Ok((s / cg.block_size, s % cg.block_size))
    }

    /// The write of the recipe: the new rows quantised into copies of the caches.
    fn write(&self, c: &Case, r: &C8Recipe, d: &Decoded) -> Result<(Vec<i8>, Vec<i8>), OpError> {
        let g = &c.plan.g;
        let cg = c.cache();
        let layout = c.p.cache_layout;
        let (kvh, hd) = (g.kv_heads, g.head_dim);
        let mut out = [d.key_cache.clone(), d.value_cache.clone()];
        for (which, (rows, qp)) in [(&d.key, &d.kp), (&d.value, &d.vp)].into_iter().enumerate() {
            for row in 0..c.rows() {
                let (b, pos) = c.row_position(row);
                let (blk, slot) = Self::slot_of(c, &d.slots, row, r.slot_shift)?;
                for h in 0..kvh {
                    for e in 0..hd {
                        let x = Self::decode16(c, rows[(row * kvh + h) * hd + e]);
                        let (s, o) = qp.at(qp.index(c, r, b, pos, h, e));
                        let y = quantise(c.p.dtype, qp.mode, r, x, s, o);
                        out[which][layout.offset(&cg, blk, slot, h, e)] = y;
                    }
                }
            }
        }
        let [k, v] = out;
        Ok((k, v))
    }

    /// The caches dequantised by the recipe (NaN at slots no valid token occupies).
    fn dequantise(
        &self,
        c: &Case,
        r: &C8Recipe,
        d: &Decoded,
        caches: [&[i8]; 2],
        threads: Threads,
    ) -> Result<[Vec<f32>; 2], OpError> {
        let g = &c.plan.g;
        let cg = c.cache();
        let layout = c.p.cache_layout;
        let width = c.plan.max_blocks;
        let (kvh, hd) = (g.kv_heads, g.head_dim);
        let mut out = [
            vec![f32::NAN; caches[0].len()],
            vec![f32::NAN; caches[1].len()],
        ];
        for which in 0..2 {
            let qp = if which == 1 && !r.value_uses_key_params {
                &d.vp
            } else {
                &d.kp
            };
            // Per batch entry, the (offset, value) pairs; batch entries own distinct blocks.
            let parts = map_tasks(g.batch, threads, |b| {
                let mut v = Vec::with_capacity(g.lk[b] * kvh * hd);
                for pos in 0..g.lk[b] {
                    let blk = d.table[b * width + pos / cg.block_size] as usize;
                    for h in 0..kvh {
                        for e in 0..hd {
                            let at = layout.offset(&cg, blk, pos % cg.block_size, h, e);
                            let (s, o) = qp.at(qp.index(c, r, b, pos, h, e));
                            let y = caches[which][at] as f32;
                            v.push((at, dequantise_one(c.p.dtype, r, y, s, o)));
                        }
                    }
                }
                v
            });
            for part in parts {
                for (at, x) in part {
                    out[which][at] = x;
                }
            }
        }
        Ok(out)
    }

    /// Checks that the block table's live entries name blocks inside the cache.
    fn check_table(&self, c: &Case, table: &[i64]) -> Result<(), OpError> {
        let width = c.plan.max_blocks;
        for b in 0..c.p.batch {
            for j in 0..c.plan.used[b] {
                let e = table[b * width + j];
                if e < 0 || e as usize >= c.cache().num_blocks {
                    return Err(OpError::InvalidInput {
                        op: OP.into(),
                        input: "block_table".into(),
                        message: format!(
                            "entry [{b}][{j}] is {e}, outside the cache's {} blocks",
                            c.cache().num_blocks
                        ),
                    });
                }
            }
        }
        Ok(())
    }
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

impl PresetFamily for PaDecodeInt8 {
    type Case = Case;
    type Recipe = C8Recipe;
    const PRESETS: &'static [&'static str] = &PRESETS;

    fn case(&self, v: &serde_json::Value) -> Result<Case, OpError> {
        let p: Params = parse_params(OP, v)?;
        if !matches!(p.dtype, DType::Bf16 | DType::F16) {
            return Err(invalid(
                OP,
                "dtype",
                "the query and the new rows are bf16 or f16 (the page's antiquant query types)",
            ));
        }
        if !matches!(
            p.input_layout,
            InputLayout::Bsnd | InputLayout::Bnsd | InputLayout::Bsh
        ) {
            return Err(invalid(OP, "input_layout", "must be BSND, BNSD or BSH"));
        }
        if p.cache_layout == KvCacheLayout::BnNBsD && p.input_layout != InputLayout::Bnsd {
            return Err(invalid(
                OP,
                "cache_layout",
                "BnNBsD (blocknum, KV_N, block_size, D) is allowed only with BNSD queries (FIA page, PagedAttention)",
            ));
        }
        if !p.block_size.is_multiple_of(32) {
            return Err(invalid(
                OP,
                "block_size",
                &format!(
                    "{}: an INT8 cache needs a multiple of 32 (FIA page, PagedAttention)",
                    p.block_size
                ),
            ));
        }
        let (k, v2) = (p.key_antiquant_mode, p.value_antiquant_mode);
        if k > 1 || v2 > 1 {
            return Err(invalid(
                OP,
                if k > 1 {
                    "key_antiquant_mode"
                } else {
                    "value_antiquant_mode"
                },
                "0 (per-channel) or 1 (per-token); the page's modes 2..6 are not modelled",
            ));
        }
        if k != v2 && !(k == 0 && v2 == 1) {
            return Err(invalid(
                OP,
                "value_antiquant_mode",
                "must equal key_antiquant_mode, except key 0 with value 1 (FIA page)",
            ));
        }
        if k == 0 && v2 == 1 && p.dtype != DType::F16 {
            return Err(invalid(
                OP,
                "dtype",
                "key per-channel with value per-token over INT8 needs an f16 query and output (FIA page, mode 3)",
            ));
        }
        check_new_tokens(OP, p.new_tokens, &p.actual_seq_lengths_kv)?;
        let pd = PaDecodeParams {
            dtype: p.dtype,
            input_layout: p.input_layout,
            batch: p.batch,
            q_seq: 1,
            num_heads: p.num_heads,
            num_key_value_heads: p.num_key_value_heads,
            head_dim: p.head_dim,
            scale: p.scale,
            sparse_mode: 0,
            pre_tokens: None,
            next_tokens: None,
            actual_seq_lengths_kv: p.actual_seq_lengths_kv.clone(),
            actual_seq_lengths: None,
            block_size: p.block_size,
            cache_layout: p.cache_layout,
            num_blocks: p.num_blocks,
            max_blocks: p.max_blocks,
            shared_prefix_blocks: 0,
            atten_mask: false,
            softmax_lse_flag: false,
            q_tile: None,
            vector_cores: p.vector_cores,
        };
        let plan = pd.plan().map_err(|e| match e {
            OpError::InvalidParam { param, message, .. } => OpError::InvalidParam {
                op: OP.into(),
                param,
                message,
            },
            other => other,
        })?;
        Ok(Case {
            key_mode: k,
            value_mode: v2,
            p,
            plan,
        })
    }

    fn run_oracle(
        &self,
        c: &Case,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let d = self.decoded(c, inputs)?;
        self.check_table(c, &d.table)?;
        let g = &c.plan.g;
        let cg = c.cache();
        let layout = c.p.cache_layout;
        let (kvh, hd) = (g.kv_heads, g.head_dim);
        // The write is bit-defined (vLLM-Ascend's torch ops on the rows' dtype), so the oracle
        // writes as the kernel preset does; only the dequantisation and the attention are exact.
        let kernel = C8Recipe::preset("ascend_ifa_c8").expect("the kernel preset exists");
        let (kc, vc) = self.write(c, &kernel, &d)?;
        let caches = [kc, vc];
        // The exact dequantisation: (y + o) * s is exact in f64; its f32 form must be too.
        let mut deq = [
            vec![f32::NAN; caches[0].len()],
            vec![f32::NAN; caches[1].len()],
        ];
        let width = c.plan.max_blocks;
        for which in 0..2 {
            let qp = if which == 0 { &d.kp } else { &d.vp };
            for b in 0..g.batch {
                for pos in 0..g.lk[b] {
                    let blk = d.table[b * width + pos / cg.block_size] as usize;
                    for h in 0..kvh {
                        for e in 0..hd {
                            let at = layout.offset(&cg, blk, pos % cg.block_size, h, e);
                            let (s, o) = qp.at(qp.index(c, &kernel, b, pos, h, e));
                            let v = (caches[which][at] as f64 + o as f64) * s as f64;
                            if (v as f32) as f64 != v {
                                return Err(failed(format!(
                                    "the oracle needs (y + offset) * scale exact in f32; ({} + {o}) * {s} is not",
                                    caches[which][at]
                                )));
                            }
                            deq[which][at] = v as f32;
                        }
                    }
                }
            }
        }
        let kv = PagedKv {
            key_cache: CacheData::F32(&deq[0]),
            value_cache: CacheData::F32(&deq[1]),
            layout,
            cache: cg,
            block_table: &d.table,
            max_blocks: c.plan.max_blocks,
        };
        let (k, v) = gather_contiguous(g, &kv).map_err(|e| op_error(OP, e))?;
        let ins = AttentionInputs {
            query: &d.query,
            key: &k,
            value: &v,
            atten_mask: None,
        };
        let o = oracle(g, &ins, threads).map_err(|e| op_error(OP, e))?;
        let mut m = oracle_outputs(g, &o.out, &o.lse);
        let shape = layout.shape(&cg);
        for (name, cache) in ["key_cache_out", "value_cache_out"]
            .into_iter()
            .zip(&caches)
        {
            let vals: Vec<f64> = cache.iter().map(|&y| y as f64).collect();
            m.insert(name.into(), Tensor::of_f64(shape.clone(), &vals));
        }
        Ok(m)
    }

    fn run_recipe(
        &self,
        c: &Case,
        r: &C8Recipe,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let attn = self.attention_recipe(c, r)?;
        self.run_recipe_with(c, r, &attn, inputs, threads)
    }

    /// Makes every regime of `regimes` true among the new rows (see the module doc).
    ///
    /// - `rounding_ties`: per cache, 8 elements at distinct (row, head, d) get a power-of-two
    ///   scale `2^-e` (their channel's, per-channel; their token's, per-token) and the value
    ///   `x = (k + 1/2 + o) * 2^-e` with `k` even: `x * inv` is then exact and the write's
    ///   value before the cast is the tie `k + 1/2` (checked with the recipe's arithmetic).
    /// - `kv_int8_edges`: per cache, 8 other elements get `x = +-150 * s` (rounded to the
    ///   dtype): their scaled value is far beyond the int8 range, so the clamp decides them.
    fn impose(
        &self,
        c: &Case,
        regimes: &[Regime],
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError> {
        if regimes
            .iter()
            .any(|&r| attention_half::is_attention_half(r))
        {
            return attention_half::impose(c, regimes, m, ctx);
        }
        let rec = regime_recipe(ctx);
        let g = &c.plan.g;
        let (kvh, hd) = (g.kv_heads, g.head_dim);
        let dtype = g.dtype;
        let et = ElemType::from(dtype);
        let per_row = kvh * hd;
        for (which, mode) in [("key", c.key_mode), ("value", c.value_mode)] {
            // Distinct elements of the new rows, in random order.
            let mut cells: Vec<usize> = (0..c.rows() * per_row).collect();
            ctx.shuffle(&mut cells);
            let mut cells = cells.into_iter();
            let sname = format!("{which}_antiquant_scale");
            let oname = format!("{which}_antiquant_offset");
            let mut scale = m
                .get(&sname)
                .ok_or_else(|| failed(format!("no {sname}")))?
                .to_f64_vec();
            let offset = m.get(&oname).map(|t| t.to_f64_vec());
            let mut x: Vec<f64> = m
                .get(which)
                .ok_or_else(|| failed(format!("no {which}")))?
                .to_f64_vec();
            let index = |cell: usize| -> usize {
                let (row, h, e) = (cell / per_row, (cell % per_row) / hd, cell % hd);
                let (b, pos) = c.row_position(row);
                if mode == 0 {
                    h * hd + e
                } else {
                    b * c.token_len() + pos
                }
            };
            // Parameters the ties fix: no edge element may share them afterwards with a
            // different scale, so the ties go first and the edges read the final scales.
            let mut fixed: Vec<usize> = Vec::new();
            if regimes.contains(&Regime::RoundingTies) {
                let mut planted = 0;
                for cell in cells.by_ref() {
                    if planted == TIE_ELEMENTS {
                        break;
                    }
                    let i = index(cell);
                    // A parameter another tie fixed keeps its scale; a fresh one gets 2^-e.
                    if !fixed.contains(&i) {
                        scale[i] = pow2(-(5 + ctx.below(3) as i32));
                        fixed.push(i);
                    }
                    let s = scale[i];
                    let o = offset.as_ref().map_or(0.0, |v| v[i]);
                    let k = 2 * ctx.below(4) as i64; // even, 0..=6
                    let sign = if ctx.below(2) == 0 { 1.0 } else { -1.0 };
                    let t = sign * (k as f64 + 0.5);
                    let xv = (t + o) * s;
                    // x must be exact in the dtype and the write must see the tie.
                    let xr =
                        Tensor::round_values(et, vec![1], &[xv], Rounding::RNE).to_f64_vec()[0];
                    if xr != xv {
                        continue;
                    }
                    let before = pre_cast(dtype, mode, &rec, xv as f32, s as f32, o as f32);
                    if before as f64 != t {
                        return Err(failed(format!(
                            "rounding_ties: {xv} scaled to {before}, not the tie {t} under this recipe"
                        )));
                    }
                    x[cell] = xv;
                    planted += 1;
                }
                if planted < TIE_ELEMENTS {
                    return Err(failed(
                        "rounding_ties: not enough new-row elements for the ties",
                    ));
                }
            }
            if regimes.contains(&Regime::KvInt8Edges) {
                for k in 0..2 * EDGE_ELEMENTS {
                    let cell = cells
                        .next()
                        .ok_or_else(|| failed("kv_int8_edges: out of new-row elements"))?;
                    let i = index(cell);
                    let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
                    x[cell] = sign * 150.0 * scale[i];
                }
            }
            let dt = m.get(&sname).map(|t| t.dtype).unwrap_or(ElemType::F32);
            let pshape = m.get(&sname).map(|t| t.shape.clone()).unwrap_or_default();
            m.insert(sname, param_tensor(dt, pshape, &scale));
            m.insert(
                which.into(),
                Tensor::round_values(et, vec![c.rows(), kvh, hd], &x, Rounding::RNE),
            );
        }
        Ok(())
    }

    fn recipe_preset(_: &Case, name: &str) -> Option<C8Recipe> {
        C8Recipe::preset(name)
    }

    /// The attention recipe's edits (a tie rule, a rescale): the attention half runs that
    /// recipe on the dequantised cache, so they are faults of this family too.
    fn run_other_edit(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        edit: &crate::ops::RecipeEdit,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<Option<TensorMap>, OpError> {
        let Some(apply) = edit.of::<crate::attention::Recipe>() else {
            return Ok(None);
        };
        if recipe == super::ORACLE {
            return Ok(None);
        }
        let c = self.case(params)?;
        let r = preset_family::preset(self, &c, recipe)?;
        let mut attn = self.attention_recipe(&c, &r)?;
        if !apply(&mut attn) {
            return Ok(None);
        }
        self.run_recipe_with(&c, &r, &attn, inputs, threads)
            .map(Some)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_and_the_dequantisation_invert_each_other_on_exact_values() {
        let r = C8Recipe::preset("ascend_ifa_c8").unwrap();
        // s = 1/32, o = -1.5: x = (y + o) * s for y = 10 quantises back to 10.
        let (s, o) = (0.03125f32, -1.5f32);
        let x = (10.0 + o) * s;
        assert_eq!(quantise(DType::Bf16, 0, &r, x, s, o), 10);
        assert_eq!(dequantise_one(DType::Bf16, &r, 10.0, s, o), x);
        // Saturation, and the wrap without it.
        assert_eq!(quantise(DType::Bf16, 0, &r, 150.0 * s, s, 0.0), 127);
        let wrap = C8Recipe {
            saturate: false,
            ..r.clone()
        };
        assert_eq!(quantise(DType::Bf16, 0, &wrap, 150.0 * s, s, 0.0), -106);
    }
}
