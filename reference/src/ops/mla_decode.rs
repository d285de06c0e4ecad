//! `mla_decode`: one decode step of DeepSeek's Multi-head Latent Attention over the paged
//! latent cache, as vLLM-Ascend runs it: this step's new latent rows `kv` (512 wide) and rope
//! keys `k_rope` (64 wide) are written into their caches at the slot mapping's slots
//! (`_npu_reshape_and_cache`: a plain copy), then FusedInferAttentionScore with `query_rope` /
//! `key_rope` decodes over the caches: scores `scale * (q_nope . c_kv + q_rope . k_rope)`,
//! values the `c_kv` rows, one KV head shared by all query heads.
//!
//! One op, not two (as `pa_decode_int8`): the write and the attention share the block table and
//! the caches, and both results are outputs of every case (the caches bit for bit).
//!
//! Params (JSON, unknown keys rejected): `dtype` (`bf16` | `f16`), `input_layout` (`BNSD`
//! default, `BSND`), `batch`, `num_heads` (1, 2, 4, ..., 128), `block_size` (16 or 128),
//! `actual_seq_lengths_kv` (context length per sequence, the new tokens included),
//! `new_tokens` (default 1: the last positions of each context), `scale` (f64, required: the
//! caller's), `softmax_lse_flag`, `num_blocks`, `max_blocks` (pa_decode's defaults). The
//! widths are the API's only MLA widths: latent 512, rope 64.
//!
//! Tensors: inputs `query` / `query_rope` (`[B, N, 1, 512 | 64]` BNSD, `[B, 1, N, ..]` BSND),
//! `kv` / `k_rope` (`[T, 1, 512 | 64]`, T = B * new_tokens, batch-major), `slot_mapping` (I32
//! `[T]`), `kv_cache_in` / `rope_cache_in` (`[num_blocks, 1, block_size, 512 | 64]`),
//! `block_table` (I32 `[B, max_blocks]`); outputs `kv_cache_out`, `rope_cache_out`,
//! `attention_out` (the query's layout, 512 wide) and `softmax_lse` (F32 `[B, N, 1, 1]`) when
//! asked.
//!
//! Recipes: `ascend_mla` (the write, then [`crate::attention::mla`] with the A2 kernel's
//! numerics: the permuted 576-long f32 score, 512-key softmax steps, the AMLA rescale) and the
//! oracle (the exact write and the f64 attention oracle with 576-wide keys and 512-wide
//! values). Fault models edit [`MlaRecipe`].
//!
//! Regimes: `mla_rope_late_max` (here), and `rounding_ties` (the P, output and AMLA factor
//! casts), `subnormal_outputs` and the moderate row maxima against the recipe's softmax step,
//! built in `mla_decode/regimes.rs`.

mod preset;
mod recipe;
mod regimes;

pub use recipe::*;

pub(crate) mod faults;
use super::fa_prefill::{invalid, op_error, oracle_outputs, output_specs, recipe_outputs};
use super::pa_decode::{check_new_tokens, PaDecodeParams};
use super::path::ParamPath;
use super::preset_family::{self, PresetFamily};
use super::regime::Regime;
use super::{
    input, parse_params, ElemType, GenContext, OpCost, OpDescription, OpError, OpFamily, Tensor,
    TensorMap, TensorSpec,
};
use crate::attention::mla::{self, MlaBatch, KEY, LATENT, ROPE};
use crate::attention::{oracle, AttentionConfig, AttentionInputs, Geometry, InputLayout};
use crate::formats::{bf16, f16, DType, Rounding};
use crate::kv::{scatter, CacheGeometry, KvCacheLayout};
use crate::parallel::Threads;

/// The op name.
pub const OP: &str = "mla_decode";

/// The recipe presets.
pub const PRESETS: [&str; 1] = ["ascend_mla"];

/// Keys per softmax step of the MLA kernel (and where a late key starts).
const STEP: usize = 512;
/// Heads per batch entry the rope late-max regime builds a late key for.
const LATE_HEADS: usize = 8;

/// The head counts the FIA page allows on the MLA path.
pub const HEADS: [usize; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

fn default_layout() -> InputLayout {
    InputLayout::Bnsd
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
    block_size: usize,
    actual_seq_lengths_kv: Vec<i64>,
    #[serde(default = "one")]
    new_tokens: usize,
    scale: f64,
    #[serde(default)]
    softmax_lse_flag: bool,
    #[serde(default)]
    num_blocks: Option<usize>,
    #[serde(default)]
    max_blocks: Option<usize>,
}

/// A validated case.
pub(crate) struct Case {
    p: Params,
    /// Queries and keys 576 wide, values and output 512 wide, one KV head.
    g: Geometry,
    num_blocks: usize,
    max_blocks: usize,
    /// Blocks each sequence uses.
    used: Vec<usize>,
}

impl Case {
    fn rows(&self) -> usize {
        self.p.batch * self.p.new_tokens
    }
    /// (batch, position) of new row `r`.
    fn row_position(&self, r: usize) -> (usize, usize) {
        let b = r / self.p.new_tokens;
        let i = r % self.p.new_tokens;
        (b, self.g.lk[b] - self.p.new_tokens + i)
    }
    fn cache(&self, width: usize) -> CacheGeometry {
        CacheGeometry {
            num_blocks: self.num_blocks,
            block_size: self.p.block_size,
            kv_heads: 1,
            head_dim: width,
        }
    }
    fn cache_shape(&self, width: usize) -> Vec<usize> {
        vec![self.num_blocks, 1, self.p.block_size, width]
    }
    /// Query shape with width `d`.
    fn q_shape(&self, d: usize) -> Vec<usize> {
        let (b, n) = (self.p.batch, self.p.num_heads);
        match self.p.input_layout {
            InputLayout::Bsnd => vec![b, 1, n, d],
            _ => vec![b, n, 1, d],
        }
    }
    /// Offset of head h of batch b in a query tensor of width `d`.
    fn q_offset(&self, b: usize, h: usize, d: usize) -> usize {
        // With one query row, BNSD and BSND both place (b, h) at (b * N + h) * d.
        (b * self.p.num_heads + h) * d
    }
}

/// The `mla_decode` family.
pub struct MlaDecode;

fn failed(message: impl std::fmt::Display) -> OpError {
    OpError::failed(OP, message)
}

/// The inputs of a case, decoded.
struct Decoded {
    q_nope: Vec<f32>,
    q_rope: Vec<f32>,
    kv: Vec<u16>,
    k_rope: Vec<u16>,
    slots: Vec<i64>,
    kv_cache: Vec<u16>,
    rope_cache: Vec<u16>,
    table: Vec<i64>,
}

impl MlaDecode {
    fn specs(&self, c: &Case) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
        let et = ElemType::from(c.p.dtype);
        let q_axes: &[&str] = match c.p.input_layout {
            InputLayout::Bsnd => &["b", "s", "n", "d"],
            _ => &["b", "n", "s", "d"],
        };
        let cache_axes: &[&str] = &["block", "n", "slot", "d"];
        let rows = c.rows();
        let inputs = vec![
            TensorSpec::new("query", et, c.q_shape(LATENT), q_axes),
            TensorSpec::new("query_rope", et, c.q_shape(ROPE), q_axes),
            TensorSpec::new("kv", et, vec![rows, 1, LATENT], &["t", "n", "d"]),
            TensorSpec::new("k_rope", et, vec![rows, 1, ROPE], &["t", "n", "d"]),
            TensorSpec::new("slot_mapping", ElemType::I32, vec![rows], &["t"]),
            TensorSpec::new("kv_cache_in", et, c.cache_shape(LATENT), cache_axes),
            TensorSpec::new("rope_cache_in", et, c.cache_shape(ROPE), cache_axes),
            TensorSpec::new(
                "block_table",
                ElemType::I32,
                vec![c.p.batch, c.max_blocks],
                &["b", "block"],
            ),
        ];
        let mut outputs = vec![
            TensorSpec::new("kv_cache_out", et, c.cache_shape(LATENT), cache_axes),
            TensorSpec::new("rope_cache_out", et, c.cache_shape(ROPE), cache_axes),
        ];
        outputs.extend(output_specs(&c.g));
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
        let bad = |name: &str, e: String| OpError::InvalidInput {
            op: OP.into(),
            input: name.into(),
            message: e,
        };
        let f32s = |name: &str| -> Result<Vec<f32>, OpError> {
            get(name)?
                .to_f32_vec()
                .map_err(|e| bad(name, e.to_string()))
        };
        let ints = |name: &str| -> Result<Vec<i64>, OpError> {
            get(name)?
                .to_i64_vec()
                .map_err(|e| bad(name, e.to_string()))
        };
        let bits = |name: &str| -> Result<Vec<u16>, OpError> {
            get(name)?.bits16().map_err(|e| bad(name, e.to_string()))
        };
        Ok(Decoded {
            q_nope: f32s("query")?,
            q_rope: f32s("query_rope")?,
            kv: bits("kv")?,
            k_rope: bits("k_rope")?,
            slots: ints("slot_mapping")?,
            kv_cache: bits("kv_cache_in")?,
            rope_cache: bits("rope_cache_in")?,
            table: ints("block_table")?,
        })
    }

    fn decode16(c: &Case, bits: u16) -> f32 {
        match c.p.dtype {
            DType::F16 => f16::f16_to_f32(bits),
            _ => bf16::bf16_to_f32(bits),
        }
    }

    /// The write: the new rows copied into copies of the caches at their slots (plus
    /// `shift`, wrapping), through the paged KV reference's scatter.
    fn write(&self, c: &Case, d: &Decoded, shift: usize) -> Result<(Vec<u16>, Vec<u16>), OpError> {
        let total = (c.num_blocks * c.p.block_size) as i64;
        let mut slots = Vec::with_capacity(d.slots.len());
        for (r, &s) in d.slots.iter().enumerate() {
            if s < 0 || s >= total {
                return Err(OpError::InvalidInput {
                    op: OP.into(),
                    input: "slot_mapping".into(),
                    message: format!(
                        "entry {r} is {s}, outside the cache's {total} slots ({} blocks of {})",
                        c.num_blocks, c.p.block_size
                    ),
                });
            }
            slots.push((s + shift as i64) % total);
        }
        let mut kv_cache = d.kv_cache.clone();
        let mut rope_cache = d.rope_cache.clone();
        let layout = KvCacheLayout::BnNBsD;
        scatter(layout, &c.cache(LATENT), &mut kv_cache, &d.kv, &slots).map_err(|e| {
            OpError::InvalidInput {
                op: OP.into(),
                input: "slot_mapping".into(),
                message: e.to_string(),
            }
        })?;
        scatter(layout, &c.cache(ROPE), &mut rope_cache, &d.k_rope, &slots).map_err(|e| {
            OpError::InvalidInput {
                op: OP.into(),
                input: "slot_mapping".into(),
                message: e.to_string(),
            }
        })?;
        Ok((kv_cache, rope_cache))
    }

    /// The physical block of each used table entry, checked.
    fn blocks(&self, c: &Case, table: &[i64]) -> Result<Vec<Vec<usize>>, OpError> {
        let mut out = Vec::with_capacity(c.p.batch);
        for b in 0..c.p.batch {
            let mut row = Vec::with_capacity(c.used[b]);
            for i in 0..c.used[b] {
                let v = table[b * c.max_blocks + i];
                if v < 0 || v as usize >= c.num_blocks {
                    return Err(OpError::InvalidInput {
                        op: OP.into(),
                        input: "block_table".into(),
                        message: format!(
                            "entry [{b}][{i}] is {v}, outside the cache's {} blocks",
                            c.num_blocks
                        ),
                    });
                }
                row.push(v as usize);
            }
            out.push(row);
        }
        Ok(out)
    }

    /// Per batch entry: the valid keys (`lk x 576`, latent then rope, as `r` reads them) and
    /// values (`lk x 512`), for query head `head` (only the not-shared fault depends on it).
    #[allow(clippy::too_many_arguments)]
    fn gather(
        c: &Case,
        r: &MlaRecipe,
        blocks: &[usize],
        b: usize,
        head: usize,
        kv_cache: &[u16],
        rope_cache: &[u16],
    ) -> (Vec<f32>, Vec<f32>) {
        let lk = c.g.lk[b];
        let bs = c.p.block_size;
        let mut keys = vec![0.0f32; lk * KEY];
        let mut values = vec![0.0f32; lk * LATENT];
        let n = if r.kv_head_per_query_head {
            c.p.num_heads
        } else {
            1
        };
        let h = if r.kv_head_per_query_head { head } else { 0 };
        for j in 0..lk {
            let blk = (blocks[j / bs] + r.table_shift) % c.num_blocks;
            // Row of (blk, head h, slot) in a [blocks, n, bs, D] view of the cache.
            let row = ((blk * n + h) * bs + j % bs) % (c.num_blocks * bs);
            let lat = &kv_cache[row * LATENT..(row + 1) * LATENT];
            let rope = &rope_cache[row * ROPE..(row + 1) * ROPE];
            let k = &mut keys[j * KEY..(j + 1) * KEY];
            for (x, &bits) in k[..LATENT].iter_mut().zip(lat) {
                *x = Self::decode16(c, bits);
            }
            for (x, &bits) in k[LATENT..].iter_mut().zip(rope) {
                *x = Self::decode16(c, bits);
            }
            match r.rope {
                RopeUse::Added => {}
                RopeUse::Dropped => k[LATENT..].fill(0.0),
                RopeUse::KeyHalvesSwapped => {
                    let (a, z) = k[LATENT..].split_at_mut(ROPE / 2);
                    a.swap_with_slice(z);
                }
                RopeUse::AgainstLatent => {
                    let (lat, rope) = k.split_at_mut(LATENT);
                    rope.copy_from_slice(&lat[..ROPE]);
                }
            }
            if r.flushes_subnormal_inputs {
                k.iter_mut().for_each(|x| *x = Self::flushed(c, *x));
            }
            let v = &mut values[j * LATENT..(j + 1) * LATENT];
            v[..r.value_width].copy_from_slice(&k[..r.value_width]);
        }
        (keys, values)
    }

    /// `x`, or zero of its sign where it is a subnormal of the case's dtype.
    fn flushed(c: &Case, x: f32) -> f32 {
        let min_normal = match c.p.dtype {
            DType::F16 => f16::f16_to_f32(0x0400),
            _ => f32::MIN_POSITIVE,
        };
        if x.abs() < min_normal {
            0.0f32.copysign(x)
        } else {
            x
        }
    }

    /// The query rows of batch entry b: `N x 576` (latent then rope).
    fn query_rows(c: &Case, d: &Decoded, b: usize) -> Vec<f32> {
        let mut q = vec![0.0f32; c.p.num_heads * KEY];
        for h in 0..c.p.num_heads {
            let row = &mut q[h * KEY..(h + 1) * KEY];
            let o = c.q_offset(b, h, LATENT);
            row[..LATENT].copy_from_slice(&d.q_nope[o..o + LATENT]);
            let o = c.q_offset(b, h, ROPE);
            row[LATENT..].copy_from_slice(&d.q_rope[o..o + ROPE]);
        }
        q
    }

    /// Keys after the first softmax step that are not this step's new tokens.
    fn late_room(c: &Case, lk: usize) -> usize {
        lk.saturating_sub(STEP + c.p.new_tokens)
    }

    /// [`Regime::MlaRopeLateMax`]: for each of the first `min(N, 8)` heads of every entry with
    /// room, one key at a distinct position after key 512 (seed-chosen) becomes `beta *
    /// sign(q_nope)` in its latent row and `gamma * sign(q_rope)` in its rope row, with
    /// `beta`, `gamma` (rounded to the dtype) giving a nope score of `m1 - 2` and a rope score
    /// of `lead + 2`, `m1` the head's largest score over keys 0..512 and `lead` drawn in
    /// [3, 6): the key leads step one by `lead` with the rope and trails it by 2 without.
    fn impose_rope_late_max(
        &self,
        c: &Case,
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError> {
        let d = self.decoded(c, m)?;
        let blocks = self.blocks(c, &d.table)?;
        let (mut kv_cache, mut rope_cache) = (d.kv_cache.clone(), d.rope_cache.clone());
        let scale = c.g.scale as f64;
        let bs = c.p.block_size;
        let encode = |x: f64| -> u16 {
            match c.p.dtype {
                DType::F16 => f16::f64_to_f16(x, Rounding::RNE),
                _ => bf16::f64_to_bf16(x, Rounding::RNE),
            }
        };
        let decode = |bits: u16| Self::decode16(c, bits) as f64;
        for (b, blk) in blocks.iter().enumerate() {
            let room = Self::late_room(c, c.g.lk[b]);
            let heads = c.p.num_heads.min(LATE_HEADS).min(room);
            if heads == 0 {
                continue;
            }
            let mut positions: Vec<usize> = (STEP..STEP + room).collect();
            ctx.shuffle(&mut positions);
            let q = Self::query_rows(c, &d, b);
            let row_of = |j: usize| blk[j / bs] * bs + j % bs;
            for (h, &pos) in positions.iter().enumerate().take(heads) {
                let qh = &q[h * KEY..(h + 1) * KEY];
                // The head's largest score over the first step (exact products, f64 sums).
                let mut m1 = f64::NEG_INFINITY;
                for j in 0..STEP {
                    let row = row_of(j);
                    let mut dot = 0.0f64;
                    for e in 0..LATENT {
                        dot += qh[e] as f64 * decode(kv_cache[row * LATENT + e]);
                    }
                    for e in 0..ROPE {
                        dot += qh[LATENT + e] as f64 * decode(rope_cache[row * ROPE + e]);
                    }
                    m1 = m1.max(scale * dot);
                }
                let lead = 3.0 + 3.0 * ctx.unit();
                let s1: f64 = qh[..LATENT].iter().map(|&x| x.abs() as f64).sum();
                let s2: f64 = qh[LATENT..].iter().map(|&x| x.abs() as f64).sum();
                if s1 == 0.0 || s2 == 0.0 {
                    return Err(failed(format!(
                        "regime mla_rope_late_max: head {h} of batch entry {b} has an all-zero query part"
                    )));
                }
                let beta = decode(encode((m1 - 2.0) / (scale * s1)));
                let gamma = decode(encode((lead + 2.0) / (scale * s2)));
                let (nope, rope) = (scale * beta * s1, scale * gamma * s2);
                if nope > m1 - 1.0 || nope + rope < m1 + 2.5 {
                    return Err(failed(format!(
                        "regime mla_rope_late_max: the dtype cannot hold the late key of head {h}, batch entry {b} (nope {nope}, rope {rope}, first-step max {m1})"
                    )));
                }
                let row = row_of(pos);
                for e in 0..LATENT {
                    let v = if qh[e] < 0.0 { -beta } else { beta };
                    kv_cache[row * LATENT + e] = encode(v);
                }
                for e in 0..ROPE {
                    let v = if qh[LATENT + e] < 0.0 { -gamma } else { gamma };
                    rope_cache[row * ROPE + e] = encode(v);
                }
            }
        }
        let et = ElemType::from(c.p.dtype);
        m.insert(
            "kv_cache_in".into(),
            Tensor::from_bits16(et, c.cache_shape(LATENT), &kv_cache),
        );
        m.insert(
            "rope_cache_in".into(),
            Tensor::from_bits16(et, c.cache_shape(ROPE), &rope_cache),
        );
        Ok(())
    }
}

/// The preset that models the A2 MLA decode kernel.
const ASCEND_MLA: &str = PRESETS[0];

/// Claims about `mla_decode` (the A2 MLA decode kernel and its cache write) fixed in the code
/// rather than a recipe field.
pub const CLAIMS: [&str; 7] = [
    "mla.claim.chunk_inner_order",
    "mla.claim.pv_order",
    "mla.claim.rowsum",
    "mla.claim.exp",
    "mla.claim.amla_constants",
    "mla.claim.widths",
    "mla.claim.flash_decode",
];

impl OpFamily for MlaDecode {
    fn faults(&self) -> Vec<&'static crate::ops::fault::Fault> {
        faults::FAULTS.iter().collect()
    }

    fn knob_family(&self) -> &'static str {
        "mla"
    }
    fn kernel_variants(&self) -> &'static [&'static crate::variant::KernelVariant] {
        static VARIANTS: [&crate::variant::KernelVariant; 1] = [&super::attention_variants::MLA];
        &VARIANTS
    }
    fn dispatch(
        &self,
        recipe: &str,
        params: &serde_json::Value,
        platform: Option<&crate::variant::Platform>,
    ) -> Option<crate::variant::Dispatch> {
        let _ = (params, platform);
        (recipe == ASCEND_MLA).then(super::attention_variants::dispatch_mla)
    }
    fn preset_knobs(
        &self,
        preset: &str,
        dtype: crate::formats::DType,
        edit: Option<&crate::recipe_edit::RecipeEdit>,
    ) -> Option<Vec<crate::knob::Knob>> {
        if preset != ASCEND_MLA {
            return None;
        }
        MlaRecipe::preset(preset, dtype).map(|r| {
            let mut k = crate::recipe_edit::edited(r, edit).knobs(preset);
            k.extend(CLAIMS.iter().map(|&id| crate::knob::Knob::claim(id)));
            k
        })
    }
    fn knob_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = MlaRecipe::preset(ASCEND_MLA, DType::Bf16)
            .map(|r| r.knobs(ASCEND_MLA).into_iter().map(|k| k.id).collect())
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
                "several_new_tokens",
                "two or more new tokens per sequence (speculative decode): each sees the context up to its own position",
                p.new_tokens > 1,
            ),
            super::path::partial_last_block(&p.actual_seq_lengths_kv, p.block_size),
        ])
    }

    fn describe(&self, params: &serde_json::Value) -> Result<OpDescription, OpError> {
        let c = self.case(params)?;
        let (inputs, outputs) = self.specs(&c);
        let g = &c.g;
        let es = c.p.dtype.size_bytes() as f64;
        let keys: usize = g.lk.iter().sum();
        let rows = c.rows() as f64;
        // Minimum traffic: the latent cache of every valid key read once for all heads (576 x
        // 2 bytes per token, one KV head), the queries, the new rows read and written, slot
        // mapping, block table and the output (and LSE).
        let bytes = keys as f64 * KEY as f64 * es
            + (c.p.batch * c.p.num_heads * KEY) as f64 * es
            + 2.0 * rows * KEY as f64 * es
            + rows * 4.0
            + (c.p.batch * c.max_blocks * 4) as f64
            + (c.p.batch * c.p.num_heads * LATENT) as f64 * es
            + if c.p.softmax_lse_flag {
                (c.p.batch * c.p.num_heads * 4) as f64
            } else {
                0.0
            };
        // Scores (576-long dots) and P V (512 wide): 2 flops per multiply-add.
        let flops = 2.0 * keys as f64 * c.p.num_heads as f64 * (KEY + LATENT) as f64;
        Ok(OpDescription {
            inputs,
            outputs,
            cost: OpCost {
                flops,
                bytes,
                compute: ElemType::from(c.p.dtype),
            },
        })
    }

    fn generate(
        &self,
        params: &serde_json::Value,
        ctx: &mut GenContext,
    ) -> Result<TensorMap, OpError> {
        let c = self.case(params)?;
        let et = ElemType::from(c.p.dtype);
        let special = super::special_values(et);
        let mut m = TensorMap::new();
        let mut values = |ctx: &mut GenContext, name: &str, shape: Vec<usize>| {
            let n: usize = shape.iter().product();
            let v = ctx.values(n, &special);
            m.insert(
                name.into(),
                Tensor::round_values(et, shape, &v, Rounding::RNE),
            );
        };
        values(ctx, "query", c.q_shape(LATENT));
        values(ctx, "query_rope", c.q_shape(ROPE));
        values(ctx, "kv", vec![c.rows(), 1, LATENT]);
        values(ctx, "k_rope", vec![c.rows(), 1, ROPE]);
        // Stale cache contents everywhere, the new tokens' slots included (a write to the
        // wrong slot leaves them visible).
        values(ctx, "kv_cache_in", c.cache_shape(LATENT));
        values(ctx, "rope_cache_in", c.cache_shape(ROPE));
        // Block table: a shuffled permutation of physical blocks, handed out in order.
        let mut perm: Vec<usize> = (0..c.num_blocks).collect();
        ctx.shuffle(&mut perm);
        let width = c.max_blocks;
        let mut table = vec![0i32; c.p.batch * width];
        let mut next = 0;
        for b in 0..c.p.batch {
            for j in 0..c.used[b] {
                table[b * width + j] = perm[next] as i32;
                next += 1;
            }
        }
        let bs = c.p.block_size;
        let slots: Vec<i32> = (0..c.rows())
            .map(|r| {
                let (b, pos) = c.row_position(r);
                table[b * width + pos / bs] * bs as i32 + (pos % bs) as i32
            })
            .collect();
        m.insert(
            "slot_mapping".into(),
            Tensor::from_i32(vec![c.rows()], &slots),
        );
        m.insert(
            "block_table".into(),
            Tensor::from_i32(vec![c.p.batch, width], &table),
        );
        Ok(m)
    }

    fn regimes(&self) -> &'static [Regime] {
        &[
            Regime::RoundingTies,
            Regime::SubnormalOutputs,
            Regime::MlaRopeLateMax,
            Regime::ModerateLateMax,
            Regime::ModerateEarlyMax,
        ]
    }

    fn check_regimes(&self, params: &serde_json::Value, regimes: &[Regime]) -> Result<(), OpError> {
        preset_family::only_own_regimes(OP, regimes)?;
        let c = self.case(params)?;
        regimes::check(&c, regimes)?;
        let err = |r: &Regime, message: &str| OpError::Regime {
            op: OP.into(),
            regime: r.name().into(),
            message: message.into(),
        };
        for r in regimes {
            if *r == Regime::MlaRopeLateMax {
                let want = c.p.num_heads.min(LATE_HEADS);
                if c.p.num_heads < 2 {
                    return Err(err(
                        r,
                        "needs two or more query heads (sharing the one KV head)",
                    ));
                }
                if !c.g.lk.iter().any(|&l| Self::late_room(&c, l) >= want) {
                    return Err(err(
                        r,
                        &format!(
                            "needs a sequence with {want} keys after the first {STEP}-key softmax step besides its {} new tokens",
                            c.p.new_tokens
                        ),
                    ));
                }
                let first = c.g.lk[0];
                if c.p.batch < 2 || c.g.lk.iter().all(|&l| l == first) {
                    return Err(err(
                        r,
                        "needs two or more batch entries of distinct lengths",
                    ));
                }
                if !c.used.iter().any(|&u| u >= 2)
                    || !c.g.lk.iter().any(|&l| !l.is_multiple_of(c.p.block_size))
                {
                    return Err(err(
                        r,
                        "needs a sequence over several blocks and one whose last block is partial",
                    ));
                }
            }
        }
        Ok(())
    }

    preset_family::preset_family_methods!();
}
