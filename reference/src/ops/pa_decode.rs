//! Op family `pa_decode`: PagedAttention, K/V read from a paged cache through a block table
//! (torch_npu `npu_fused_infer_attention_score` with `block_table`). `q_seq` = 1 is decode;
//! larger `q_seq` runs the PA prefill path.
//!
//! Parameters (JSON, unknown keys rejected): see [`PaDecodeParams`]. Inputs: `query`
//! (`input_layout`), `key_cache` / `value_cache` (`cache_layout` shape), `block_table` (I32
//! `[B, max_blocks]`), `atten_mask` (U8 `[B, q_seq, max_blocks * block_size]`) when asked.
//! Outputs as `fa_prefill`.
//!
//! Generated block tables are valid: physical blocks are a shuffled permutation (so a
//! sequence's blocks are non-contiguous), the first `shared_prefix_blocks` blocks of every
//! sequence are sequence 0's (a shared prompt prefix), table entries after a sequence's last
//! block are 0. Every cache slot that no valid token occupies (free blocks, the tail of each
//! last block) holds NaN.

use super::attention_regimes::{self, ScoreView};
use super::attention_ties;
use super::fa_prefill::{
    attention_flops, f32_values, invalid, op_error, oracle_outputs, output_specs, preset,
    recipe_outputs, values_tensor,
};
use super::path::ParamPath;
use super::regime::{late_from, Regime};
use super::{
    input, parse_params, ElemType, GenContext, OpCost, OpDescription, OpError, OpFamily, Tensor,
    TensorMap, TensorSpec, ORACLE,
};
use crate::attention::{
    gather_contiguous, oracle, paged_attention, AttentionConfig, AttentionInputs, CacheData,
    Geometry, InputLayout, PagedKv, PRESETS,
};
use crate::formats::DType;
use crate::kv::{CacheGeometry, KvCacheLayout};
use crate::parallel::Threads;

const OP: &str = "pa_decode";

fn one() -> usize {
    1
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

/// `pa_decode` parameters. Defaults: `input_layout` "BSND", `q_seq` 1, `num_key_value_heads`
/// 0 (= `num_heads`), `scale` 1/sqrt(head_dim), `sparse_mode` 0, `block_size` 128,
/// `cache_layout` "BnBsH", `max_blocks` = ceil(max context / block_size), `num_blocks` = the
/// blocks the sequences need plus max(2, needed / 8) free ones, `shared_prefix_blocks` 0,
/// `atten_mask` false, `softmax_lse_flag` false, `vector_cores` none (needed by the
/// `ascend_ifa_bf16` recipe).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaDecodeParams {
    pub dtype: DType,
    /// `BSND`, `BNSD`, `BSH` or `BNSD_BSND`.
    #[serde(default = "default_layout")]
    pub input_layout: InputLayout,
    pub batch: usize,
    #[serde(default = "one")]
    pub q_seq: usize,
    pub num_heads: usize,
    #[serde(default)]
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    #[serde(default)]
    pub scale: Option<f64>,
    #[serde(default)]
    pub sparse_mode: u32,
    #[serde(default)]
    pub pre_tokens: Option<i64>,
    #[serde(default)]
    pub next_tokens: Option<i64>,
    /// Context length (number of keys) per sequence.
    pub actual_seq_lengths_kv: Vec<i64>,
    /// Query lengths per sequence (default: `q_seq` each).
    #[serde(default)]
    pub actual_seq_lengths: Option<Vec<i64>>,
    #[serde(default = "default_block_size")]
    pub block_size: usize,
    /// `BnBsH` or `BnNBsD`.
    #[serde(default = "default_cache_layout")]
    pub cache_layout: KvCacheLayout,
    #[serde(default)]
    pub num_blocks: Option<usize>,
    /// Block table width.
    #[serde(default)]
    pub max_blocks: Option<usize>,
    #[serde(default)]
    pub shared_prefix_blocks: usize,
    /// Whether an explicit random mask is an input (1 = masked).
    #[serde(default)]
    pub atten_mask: bool,
    #[serde(default)]
    pub softmax_lse_flag: bool,
    /// Overrides the recipe's query tile (the KV tile is always `block_size`).
    #[serde(default)]
    pub q_tile: Option<usize>,
    /// Vector cores of the SoC whose kernel tiling the recipe follows (`ascend_ifa_bf16`'s
    /// flash-decode split): the harness sets it from the hardware profile the suite names
    /// (`recipe_hardware`); recipes with fixed tiles ignore it.
    #[serde(default)]
    pub vector_cores: Option<usize>,
}

/// Validated sizes of a case (also `pa_decode_int8`'s, which reads the same paged cache).
pub(crate) struct Plan {
    pub(crate) g: Geometry,
    pub(crate) cache: CacheGeometry,
    pub(crate) max_blocks: usize,
    /// Blocks each sequence uses.
    pub(crate) used: Vec<usize>,
}

impl PaDecodeParams {
    pub(crate) fn plan(&self) -> Result<Plan, OpError> {
        let bs = self.block_size;
        if bs == 0 {
            return Err(invalid(OP, "block_size", "must be positive"));
        }
        if self.actual_seq_lengths_kv.len() != self.batch {
            return Err(invalid(
                OP,
                "actual_seq_lengths_kv",
                "needs one entry per batch entry",
            ));
        }
        let mut used = Vec::with_capacity(self.batch);
        for (b, &l) in self.actual_seq_lengths_kv.iter().enumerate() {
            if l < 0 {
                return Err(invalid(
                    OP,
                    &format!("actual_seq_lengths_kv[{b}]"),
                    "is negative",
                ));
            }
            used.push((l as usize).div_ceil(bs));
        }
        let need_width = used.iter().copied().max().unwrap_or(0).max(1);
        let max_blocks = self.max_blocks.unwrap_or(need_width);
        if max_blocks == 0 {
            return Err(invalid(OP, "max_blocks", "must be positive"));
        }
        let sp = self.shared_prefix_blocks;
        if sp > 0 {
            for (b, &l) in self.actual_seq_lengths_kv.iter().enumerate() {
                if (l as usize) < sp * bs {
                    return Err(invalid(
                        OP,
                        "shared_prefix_blocks",
                        &format!("sequence {b} has {l} keys, fewer than {sp} full blocks"),
                    ));
                }
            }
        }
        let needed: usize = used.iter().sum::<usize>() - sp * self.batch.saturating_sub(1);
        let num_blocks = self.num_blocks.unwrap_or(needed + (needed / 8).max(2));
        if num_blocks < needed {
            return Err(invalid(
                OP,
                "num_blocks",
                &format!("{num_blocks} blocks cannot hold the {needed} the sequences need"),
            ));
        }
        let mut c = AttentionConfig::new(
            self.dtype,
            self.batch,
            self.q_seq,
            max_blocks.saturating_mul(bs),
            self.num_heads,
            self.num_key_value_heads,
            self.head_dim,
        );
        c.input_layout = self.input_layout;
        c.scale = self.scale;
        c.sparse_mode = self.sparse_mode;
        if let Some(t) = self.pre_tokens {
            c.pre_tokens = t;
        }
        if let Some(t) = self.next_tokens {
            c.next_tokens = t;
        }
        c.atten_mask = self.atten_mask;
        c.actual_seq_lengths = self.actual_seq_lengths.clone();
        c.actual_seq_lengths_kv = Some(self.actual_seq_lengths_kv.clone());
        c.softmax_lse_flag = self.softmax_lse_flag;
        let g = c.geometry().map_err(|e| op_error(OP, e))?;
        if g.layout.is_varlen() {
            return Err(invalid(
                OP,
                "input_layout",
                "TND is not supported for pa_decode",
            ));
        }
        let cache = CacheGeometry {
            num_blocks,
            block_size: bs,
            kv_heads: g.kv_heads,
            head_dim: g.head_dim,
        };
        if !matches!(
            self.cache_layout,
            KvCacheLayout::BnBsH | KvCacheLayout::BnNBsD
        ) {
            return Err(invalid(OP, "cache_layout", "must be BnBsH or BnNBsD"));
        }
        if !(crate::attention::paged::MIN_BLOCK_SIZE..=crate::attention::paged::MAX_BLOCK_SIZE)
            .contains(&bs)
        {
            return Err(invalid(OP, "block_size", "must be within 16..=512"));
        }
        cache
            .validate()
            .map_err(|e| invalid(OP, "num_blocks", &e.to_string()))?;
        Ok(Plan {
            g,
            cache,
            max_blocks,
            used,
        })
    }
}

/// The `pa_decode` family.
pub struct PaDecode;

impl PaDecode {
    fn inputs(p: &PaDecodeParams, plan: &Plan) -> Vec<TensorSpec> {
        let g = &plan.g;
        let et = ElemType::from(g.dtype);
        let cache_axes: &[&str] = match p.cache_layout {
            KvCacheLayout::BnNBsD => &["block", "n", "slot", "d"],
            _ => &["block", "slot", "h"],
        };
        let mut v = vec![
            TensorSpec::new("query", et, g.q_shape(), g.in_axes()),
            TensorSpec::new(
                "key_cache",
                et,
                p.cache_layout.shape(&plan.cache),
                cache_axes,
            ),
            TensorSpec::new(
                "value_cache",
                et,
                p.cache_layout.shape(&plan.cache),
                cache_axes,
            ),
            TensorSpec::new(
                "block_table",
                ElemType::I32,
                vec![g.batch, plan.max_blocks],
                &["b", "block"],
            ),
        ];
        if g.atten_mask {
            v.push(TensorSpec::new(
                "atten_mask",
                ElemType::U8,
                g.mask_shape(),
                &["b", "s", "s_kv"],
            ));
        }
        v
    }
}

fn cache_data<'a>(t: &'a Tensor, bits: &'a Option<Vec<u16>>, f: &'a [f32]) -> CacheData<'a> {
    match (t.dtype, bits) {
        (ElemType::Bf16, Some(b)) => CacheData::Bf16(b),
        (ElemType::F16, Some(b)) => CacheData::F16(b),
        _ => CacheData::F32(f),
    }
}

impl OpFamily for PaDecode {
    fn faults(&self) -> Vec<&'static crate::ops::fault::Fault> {
        super::attention_faults::FAULTS.iter().collect()
    }

    fn knob_family(&self) -> &'static str {
        "fa"
    }
    fn kernel_variants(&self) -> &'static [&'static crate::variant::KernelVariant] {
        static VARIANTS: [&crate::variant::KernelVariant; 2] = [
            &super::attention_variants::IFA,
            &super::attention_variants::FIA_V3_GQA_DECODE,
        ];
        &VARIANTS
    }
    fn dispatch(
        &self,
        recipe: &str,
        params: &serde_json::Value,
        platform: Option<&crate::variant::Platform>,
    ) -> Option<crate::variant::Dispatch> {
        dispatch(params, recipe, platform).ok().flatten()
    }
    fn preset_knobs(
        &self,
        preset: &str,
        dtype: crate::formats::DType,
        edit: Option<&crate::recipe_edit::RecipeEdit>,
    ) -> Option<Vec<crate::knob::Knob>> {
        crate::attention::ascend_knobs::preset_knobs(preset, dtype, edit)
    }
    fn knob_ids(&self) -> Vec<String> {
        crate::attention::ascend_knobs::knob_ids()
    }

    fn name(&self) -> &'static str {
        OP
    }

    fn recipes(&self) -> Vec<&'static str> {
        PRESETS.to_vec()
    }

    fn paths(&self, params: &serde_json::Value) -> Result<Vec<ParamPath>, OpError> {
        let p: PaDecodeParams = parse_params(OP, params)?;
        Ok(vec![
            super::path::odd_heads(p.num_heads, p.num_key_value_heads),
            super::path::partial_last_block(&p.actual_seq_lengths_kv, p.block_size),
        ])
    }

    fn describe(&self, params: &serde_json::Value) -> Result<OpDescription, OpError> {
        let p: PaDecodeParams = parse_params(OP, params)?;
        let plan = p.plan()?;
        let g = &plan.g;
        let inputs = Self::inputs(&p, &plan);
        let outputs = output_specs(g);
        let es = g.dtype.size_bytes() as f64;
        let keys: usize = g.lk.iter().sum();
        let bytes = (g.q_len() as f64) * es
            + 2.0 * (keys * g.kv_heads * g.head_dim) as f64 * es
            + (g.batch * plan.max_blocks * 4) as f64
            + outputs.iter().map(|s| s.bytes() as f64).sum::<f64>();
        Ok(OpDescription {
            inputs,
            outputs,
            cost: OpCost {
                flops: attention_flops(g),
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
        let p: PaDecodeParams = parse_params(OP, params)?;
        let plan = p.plan()?;
        let g = &plan.g;
        let c = plan.cache;
        let mut m = TensorMap::new();
        m.insert(
            "query".to_string(),
            values_tensor(ctx, g.dtype, g.q_shape(), |_| false, g.head_dim),
        );
        // A shuffled permutation of physical blocks, handed out in order.
        let mut perm: Vec<usize> = (0..c.num_blocks).collect();
        ctx.shuffle(&mut perm);
        let mut next = 0usize;
        let mut table = vec![0i32; g.batch * plan.max_blocks];
        // Which (block, slot) holds a valid token.
        let mut live = vec![false; c.num_blocks * c.block_size];
        for b in 0..g.batch {
            for idx in 0..plan.used[b] {
                let phys = if b > 0 && idx < p.shared_prefix_blocks {
                    table[idx] as usize
                } else {
                    next += 1;
                    perm[next - 1]
                };
                table[b * plan.max_blocks + idx] = phys as i32;
                let tokens = (g.lk[b] - idx * c.block_size).min(c.block_size);
                for s in 0..tokens {
                    live[phys * c.block_size + s] = true;
                }
            }
        }
        let layout = p.cache_layout;
        let shape = layout.shape(&c);
        for name in ["key_cache", "value_cache"] {
            // Generate in (block, slot, head, d) order, then place by the layout.
            let t = values_tensor(
                ctx,
                g.dtype,
                vec![c.num_blocks * c.block_size * c.kv_heads, c.head_dim],
                |r| !live[r / c.kv_heads],
                c.head_dim,
            );
            let es = t.dtype.size_bytes();
            let mut data = vec![0u8; t.data.len()];
            let mut src = 0;
            for blk in 0..c.num_blocks {
                for s in 0..c.block_size {
                    for h in 0..c.kv_heads {
                        for d in 0..c.head_dim {
                            let o = layout.offset(&c, blk, s, h, d) * es;
                            data[o..o + es].copy_from_slice(&t.data[src..src + es]);
                            src += es;
                        }
                    }
                }
            }
            m.insert(
                name.to_string(),
                Tensor {
                    dtype: t.dtype,
                    shape: shape.clone(),
                    data,
                },
            );
        }
        m.insert(
            "block_table".to_string(),
            Tensor::from_i32(vec![g.batch, plan.max_blocks], &table),
        );
        if g.atten_mask {
            let n = g.batch * g.q_seq * g.kv_seq;
            let mask: Vec<u8> = (0..n).map(|_| (ctx.unit() >= 0.75) as u8).collect();
            m.insert(
                "atten_mask".to_string(),
                Tensor::from_u8(g.mask_shape(), mask),
            );
        }
        Ok(m)
    }

    fn regimes(&self) -> &'static [Regime] {
        &[
            Regime::LargeLogits,
            Regime::LateMax,
            Regime::MaskedRowsLse,
            Regime::RoundingTies,
            Regime::SubnormalOutputs,
            Regime::BatchDistinct,
            Regime::SeqNeHeads,
            Regime::GqaGroups,
            Regime::ModerateLateMax,
            Regime::ModerateEarlyMax,
        ]
    }

    fn check_regimes(&self, params: &serde_json::Value, regimes: &[Regime]) -> Result<(), OpError> {
        let p: PaDecodeParams = parse_params(OP, params)?;
        let plan = p.plan()?;
        attention_regimes::check(
            OP,
            &plan.g,
            regimes,
            late_from(Some(p.block_size)),
            p.shared_prefix_blocks * p.block_size,
            Some(p.block_size),
        )
    }

    fn generate_with_regimes(
        &self,
        params: &serde_json::Value,
        regimes: &[Regime],
        ctx: &mut GenContext,
    ) -> Result<TensorMap, OpError> {
        let mut m = self.generate(params, ctx)?;
        if regimes.is_empty() {
            return Ok(m);
        }
        let p: PaDecodeParams = parse_params(OP, params)?;
        let plan = p.plan()?;
        let c = plan.cache;
        let table = m
            .get("block_table")
            .ok_or_else(|| OpError::MissingInput {
                op: OP.to_string(),
                input: "block_table".to_string(),
            })?
            .to_i64_vec()
            .map_err(|e| invalid(OP, "block_table", &e.to_string()))?;
        let width = plan.max_blocks;
        let layout = p.cache_layout;
        let offset = |b: usize, j: usize, kvh: usize| {
            let blk = table[b * width + j / c.block_size] as usize;
            layout.offset(&c, blk, j % c.block_size, kvh, 0)
        };
        let keys = attention_regimes::KeyRows {
            tensor: "key_cache",
            offset: &offset,
            first_free: p.shared_prefix_blocks * p.block_size,
            block: Some(c.block_size),
        };
        let from = match attention_regimes::moderate_recipe_name(OP, regimes, ctx)? {
            Some(name) => {
                let r =
                    preset(OP, name, plan.g.dtype, p.q_tile, None)?.on_vector_cores(p.vector_cores);
                attention_regimes::recipe_kv_tile(OP, &r, &plan.tiling_shape(), p.block_size)?
            }
            None => late_from(Some(p.block_size)),
        };
        attention_regimes::impose(OP, &plan.g, regimes, &keys, from, &mut m, ctx)?;
        if regimes.contains(&Regime::RoundingTies) {
            let recipe = attention_ties::recipe_of(OP, ctx, plan.g.dtype)?;
            attention_ties::impose(OP, &plan.g, &recipe, &keys, "value_cache", &mut m, ctx)?;
        }
        if regimes.contains(&Regime::SubnormalOutputs) {
            attention_regimes::impose_subnormal_values(
                OP,
                &plan.g,
                &keys,
                "value_cache",
                &mut m,
                ctx,
            )?;
        }
        if regimes.contains(&Regime::BatchDistinct) {
            attention_regimes::verify_distinct_batches(OP, &plan.g, &keys, "value_cache", &m)?;
        }
        Ok(m)
    }

    crate::ops::preset_family::editable_family_methods!();
}

impl crate::ops::preset_family::EditableRun for PaDecode {
    type Recipe = crate::attention::Recipe;

    fn run_edited(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        edit: Option<fn(&mut crate::attention::Recipe) -> bool>,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<Option<TensorMap>, OpError> {
        run_edited(params, recipe, edit, inputs, threads)
    }
}

impl Plan {
    /// What the decode kernel's tiling sees of the case.
    pub(crate) fn tiling_shape(&self) -> crate::attention::ifa_tiling::IfaShape {
        crate::attention::ifa_tiling::IfaShape::of(
            &self.g,
            self.max_blocks.saturating_mul(self.cache.block_size),
            Some(self.cache.block_size),
        )
    }
}

/// The kernel variant a `pa_decode` case judged against `recipe` runs on `platform` (the
/// platform the Ascend presets describe when `None`); `None` for a recipe that models no
/// CANN kernel.
pub fn dispatch(
    params: &serde_json::Value,
    recipe: &str,
    platform: Option<&crate::variant::Platform>,
) -> Result<Option<crate::variant::Dispatch>, OpError> {
    use super::attention_variants as av;
    if recipe != "ascend_ifa_bf16" {
        return Ok(None);
    }
    let p = parse_params::<PaDecodeParams>(OP, params)?;
    let plan = p.plan()?;
    Ok(Some(av::dispatch_decode(
        plan.g.head_dim,
        &plan.tiling_shape(),
        p.vector_cores,
        platform.unwrap_or(&av::MODELLED),
    )))
}

/// The attention geometry of `pa_decode` parameters (the fault catalogue permutes heads
/// through it).
pub fn geometry_of(params: &serde_json::Value) -> Result<Geometry, OpError> {
    Ok(parse_params::<PaDecodeParams>(OP, params)?.plan()?.g)
}

/// [`OpFamily::run`] of `pa_decode`, with the recipe changed by `edit` first (`None` when the
/// edit changes nothing).
fn run_edited(
    params: &serde_json::Value,
    recipe: &str,
    edit: Option<fn(&mut crate::attention::Recipe) -> bool>,
    inputs: &TensorMap,
    threads: Threads,
) -> Result<Option<TensorMap>, OpError> {
    {
        let p: PaDecodeParams = parse_params(OP, params)?;
        let plan = p.plan()?;
        let g = &plan.g;
        let specs = PaDecode::inputs(&p, &plan);
        let q = f32_values(OP, "query", input(OP, inputs, &specs[0])?)?;
        let kt = input(OP, inputs, &specs[1])?;
        let vt = input(OP, inputs, &specs[2])?;
        let (kbits, vbits) = match g.dtype {
            DType::F32 => (None, None),
            _ => (kt.bits16().ok(), vt.bits16().ok()),
        };
        let (kf, vf) = match g.dtype {
            DType::F32 => (
                f32_values(OP, "key_cache", kt)?,
                f32_values(OP, "value_cache", vt)?,
            ),
            _ => (Vec::new(), Vec::new()),
        };
        let table = input(OP, inputs, &specs[3])?
            .to_i64_vec()
            .map_err(|e| invalid(OP, "block_table", &e.to_string()))?;
        let mask = if g.atten_mask {
            Some(input(OP, inputs, &specs[4])?.data.as_slice())
        } else {
            None
        };
        let kv = PagedKv {
            key_cache: cache_data(kt, &kbits, &kf),
            value_cache: cache_data(vt, &vbits, &vf),
            layout: p.cache_layout,
            cache: plan.cache,
            block_table: &table,
            max_blocks: plan.max_blocks,
        };
        if recipe == ORACLE {
            let (k, v) = gather_contiguous(g, &kv).map_err(|e| op_error(OP, e))?;
            let ins = AttentionInputs {
                query: &q,
                key: &k,
                value: &v,
                atten_mask: mask,
            };
            let o = oracle(g, &ins, threads).map_err(|e| op_error(OP, e))?;
            return Ok(Some(oracle_outputs(g, &o.out, &o.lse)));
        }
        let mut r = preset(OP, recipe, g.dtype, p.q_tile, None)?.on_vector_cores(p.vector_cores);
        if let Some(edit) = edit
            && !edit(&mut r)
        {
            return Ok(None);
        }
        let o = paged_attention(g, &r, &q, mask, &kv, threads).map_err(|e| op_error(OP, e))?;
        Ok(Some(recipe_outputs(g, &o.out, o.lse.as_deref())))
    }
}

/// The scores' ingredients of a `pa_decode` case, K gathered to the contiguous layout through
/// the block table ([`attention_regimes::score_view`]).
pub(crate) fn score_view(
    params: &serde_json::Value,
    inputs: &TensorMap,
) -> Result<ScoreView, OpError> {
    let p: PaDecodeParams = parse_params(OP, params)?;
    let plan = p.plan()?;
    let g = &plan.g;
    let specs = PaDecode::inputs(&p, &plan);
    let query = f32_values(OP, "query", input(OP, inputs, &specs[0])?)?;
    let kt = input(OP, inputs, &specs[1])?;
    let vt = input(OP, inputs, &specs[2])?;
    let kf = f32_values(OP, "key_cache", kt)?;
    let vf = f32_values(OP, "value_cache", vt)?;
    let table = input(OP, inputs, &specs[3])?
        .to_i64_vec()
        .map_err(|e| invalid(OP, "block_table", &e.to_string()))?;
    let mask = if g.atten_mask {
        Some(input(OP, inputs, &specs[4])?.data.clone())
    } else {
        None
    };
    let kv = PagedKv {
        key_cache: CacheData::F32(&kf),
        value_cache: CacheData::F32(&vf),
        layout: p.cache_layout,
        cache: plan.cache,
        block_table: &table,
        max_blocks: plan.max_blocks,
    };
    let (key, _) = gather_contiguous(g, &kv).map_err(|e| op_error(OP, e))?;
    Ok(ScoreView {
        query,
        key,
        mask,
        g: plan.g.clone(),
    })
}

/// Checks that a decode step writing `new_tokens` rows per sequence (the last positions of
/// each) has rows to write and sequences long enough to hold them.
pub(crate) fn check_new_tokens(
    op: &str,
    new_tokens: usize,
    lengths: &[i64],
) -> Result<(), OpError> {
    if new_tokens == 0 {
        return Err(invalid(op, "new_tokens", "must be positive"));
    }
    for (b, &l) in lengths.iter().enumerate() {
        if l < new_tokens as i64 {
            return Err(invalid(
                op,
                &format!("actual_seq_lengths_kv[{b}]"),
                &format!("{l} keys cannot hold the {new_tokens} new tokens this step writes"),
            ));
        }
    }
    Ok(())
}
