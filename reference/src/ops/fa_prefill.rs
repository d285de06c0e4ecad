//! Op family `fa_prefill`: fused (flash) attention over contiguous Q/K/V, as torch_npu's
//! `npu_fused_infer_attention_score` prompt path.
//!
//! Parameters (JSON, unknown keys rejected): see [`FaPrefillParams`]. Inputs: `query`, `key`,
//! `value` (dtype, layout shapes), `atten_mask` (U8 `[B, q_seq, kv_seq]`, 1 = masked) when
//! `atten_mask` is true. Outputs: `attention_out` (output layout) and `softmax_lse` (F32
//! `[B, N, S, 1]` or `[T, N, 1]`) when `softmax_lse_flag`. Recipe `oracle` returns both as
//! F64, exact and unrounded; the presets of [`crate::attention::recipe::PRESETS`] return the
//! output dtype and F32.

use super::attention_regimes::{self, ScoreView};
use super::attention_ties;
use super::path::ParamPath;
use super::regime::{late_from, Regime};
use super::{
    input, parse_params, special_values, ElemType, GenContext, OpCost, OpDescription, OpError,
    OpFamily, Tensor, TensorMap, TensorSpec, ORACLE,
};
use crate::attention::recipe::KvTiling;
use crate::attention::{
    attention, mask::BatchMask, oracle, AttentionConfig, AttentionError, AttentionInputs, Geometry,
    InputLayout, Recipe, PRESETS,
};
use crate::formats::{DType, Rounding};
use crate::parallel::Threads;

const OP: &str = "fa_prefill";

fn default_layout() -> InputLayout {
    InputLayout::Bsnd
}
fn default_tokens() -> i64 {
    i32::MAX as i64
}
fn default_mask_keep() -> f64 {
    0.75
}

/// `fa_prefill` parameters. Defaults: `input_layout` "BSND", `num_key_value_heads` 0 (=
/// `num_heads`), `scale` 1/sqrt(head_dim), `sparse_mode` 0, `pre_tokens` / `next_tokens`
/// 2147483647, `atten_mask` false, `mask_keep` 0.75, `masked_rows` 0, lengths absent (full),
/// `softmax_lse_flag` false, tiles from the recipe.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaPrefillParams {
    /// `bf16`, `f16` or `f32`.
    pub dtype: DType,
    /// `BSND`, `BNSD`, `BSH`, `TND` or `BNSD_BSND`.
    #[serde(default = "default_layout")]
    pub input_layout: InputLayout,
    pub batch: usize,
    /// Padded query length (not used for TND).
    #[serde(default)]
    pub q_seq: usize,
    /// Padded key/value length (not used for TND).
    #[serde(default)]
    pub kv_seq: usize,
    pub num_heads: usize,
    #[serde(default)]
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    #[serde(default)]
    pub scale: Option<f64>,
    /// 0 (none / explicit mask), 2 (top-left causal), 3 (bottom-right causal), 4 (band).
    #[serde(default)]
    pub sparse_mode: u32,
    #[serde(default = "default_tokens")]
    pub pre_tokens: i64,
    #[serde(default = "default_tokens")]
    pub next_tokens: i64,
    /// Whether an explicit random boolean mask is an input.
    #[serde(default)]
    pub atten_mask: bool,
    /// Probability that a generated mask position is NOT masked.
    #[serde(default = "default_mask_keep")]
    pub mask_keep: f64,
    /// Query rows per batch entry that the generated mask masks completely (the first rows).
    #[serde(default)]
    pub masked_rows: usize,
    /// Per-batch query lengths (cumulative for TND).
    #[serde(default)]
    pub actual_seq_lengths: Option<Vec<i64>>,
    /// Per-batch key/value lengths (cumulative for TND).
    #[serde(default)]
    pub actual_seq_lengths_kv: Option<Vec<i64>>,
    #[serde(default)]
    pub softmax_lse_flag: bool,
    /// Overrides the recipe's query tile.
    #[serde(default)]
    pub q_tile: Option<usize>,
    /// Overrides the recipe's KV tile (kernels choose it from the shape at run time).
    #[serde(default)]
    pub kv_tile: Option<usize>,
    /// Vector cores of the SoC a recipe with the decode kernel's run-time tiling models
    /// (`ascend_ifa_bf16`; as for `pa_decode`).
    #[serde(default)]
    pub vector_cores: Option<usize>,
}

impl FaPrefillParams {
    fn config(&self) -> AttentionConfig {
        AttentionConfig {
            dtype: self.dtype,
            input_layout: self.input_layout,
            batch: self.batch,
            q_seq: self.q_seq,
            kv_seq: self.kv_seq,
            num_heads: self.num_heads,
            num_key_value_heads: self.num_key_value_heads,
            head_dim: self.head_dim,
            value_head_dim: 0,
            scale: self.scale,
            sparse_mode: self.sparse_mode,
            pre_tokens: self.pre_tokens,
            next_tokens: self.next_tokens,
            atten_mask: self.atten_mask,
            actual_seq_lengths: self.actual_seq_lengths.clone(),
            actual_seq_lengths_kv: self.actual_seq_lengths_kv.clone(),
            softmax_lse_flag: self.softmax_lse_flag,
        }
    }

    fn geometry(&self) -> Result<Geometry, OpError> {
        if !(0.0..=1.0).contains(&self.mask_keep) {
            return Err(invalid(OP, "mask_keep", "must be within [0, 1]"));
        }
        if self.masked_rows > 0 && !self.atten_mask {
            return Err(invalid(OP, "masked_rows", "needs atten_mask = true"));
        }
        if self.masked_rows > self.q_seq && !self.input_layout.is_varlen() {
            return Err(invalid(OP, "masked_rows", "exceeds q_seq"));
        }
        if self.q_tile == Some(0) {
            return Err(invalid(OP, "q_tile", "must be positive"));
        }
        if self.kv_tile == Some(0) {
            return Err(invalid(OP, "kv_tile", "must be positive"));
        }
        self.config().geometry().map_err(|e| op_error(OP, e))
    }
}

pub(crate) fn invalid(op: &str, param: &str, message: &str) -> OpError {
    OpError::invalid_param(op, param, message)
}

/// Maps an attention error to the op layer's, keeping the parameter or tensor name.
pub(crate) fn op_error(op: &str, e: AttentionError) -> OpError {
    match &e {
        AttentionError::WrongInputSize { tensor, .. } => OpError::InvalidInput {
            op: op.to_string(),
            input: tensor.clone(),
            message: e.to_string(),
        },
        _ => OpError::InvalidParam {
            op: op.to_string(),
            param: e.subject().to_string(),
            message: e.to_string(),
        },
    }
}

/// The kernel variant a `fa_prefill` case judged against `recipe` runs on `platform` (the
/// platform the prompt presets describe when `None`); `None` for a recipe that models no CANN
/// kernel, or a case that pins its own KV tile.
pub fn dispatch(
    params: &serde_json::Value,
    recipe: &str,
    platform: Option<&crate::variant::Platform>,
) -> Result<Option<crate::variant::Dispatch>, OpError> {
    use super::attention_variants as av;
    let p: FaPrefillParams = parse_params(OP, params)?;
    if p.kv_tile.is_some() {
        return Ok(None);
    }
    let g = p.geometry()?;
    let pfa = crate::attention::pfa_tiling::PfaShape {
        q_seq: g.q_seq,
        kv_seq: g.kv_seq,
        masked: g.atten_mask || g.sparse != crate::attention::SparseMode::None,
        high_performance: recipe == "ascend_pfa_f16_high_perf",
    };
    Ok(av::dispatch_prompt(
        recipe,
        g.head_dim,
        &pfa,
        platform.unwrap_or(&av::MODELLED),
    ))
}

/// The preset `recipe` for `dtype`, with optional tile overrides.
pub(crate) fn preset(
    op: &str,
    recipe: &str,
    dtype: DType,
    q_tile: Option<usize>,
    kv_tile: Option<usize>,
) -> Result<Recipe, OpError> {
    let mut r = Recipe::preset(recipe, dtype).ok_or_else(|| OpError::UnknownRecipe {
        op: op.to_string(),
        recipe: recipe.to_string(),
        known: std::iter::once(ORACLE)
            .chain(PRESETS)
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    if let Some(t) = q_tile {
        r.q_tile = t;
    }
    if let Some(t) = kv_tile {
        // A pinned tile replaces the prompt kernel's run-time block.
        r.kv_tile = t;
        if matches!(r.kv_tiling, KvTiling::AscendPfa { .. }) {
            r.kv_tiling = KvTiling::Fixed;
        }
    }
    Ok(r)
}

/// Multiply-adds of the allowed (query, key) pairs times 4 D (QK^T and PV), per head.
pub(crate) fn attention_flops(g: &Geometry) -> f64 {
    let mut pairs = 0f64;
    for b in 0..g.batch {
        let m = BatchMask::structured(g.sparse, g.lq[b], g.lk[b]);
        for i in 0..g.lq[b] {
            let (lo, hi) = m.interval(i);
            pairs += (hi - lo) as f64;
        }
    }
    4.0 * pairs * g.heads as f64 * g.head_dim as f64
}

/// `n` values from the context, rounded ONCE (RNE) to `dtype`.
pub(crate) fn values_tensor(
    ctx: &mut GenContext,
    dtype: DType,
    shape: Vec<usize>,
    nan_rows: impl Fn(usize) -> bool,
    dim: usize,
) -> Tensor {
    let et = ElemType::from(dtype);
    let n: usize = shape.iter().product();
    let mut v = ctx.values(n, &special_values(et));
    for (r, row) in v.chunks_mut(dim).enumerate() {
        if nan_rows(r) {
            row.fill(f64::NAN);
        }
    }
    Tensor::round_values(et, shape, &v, Rounding::RNE)
}

/// Decodes a float input to f32 values (exact for bf16/f16/f32).
pub(crate) fn f32_values(op: &str, name: &str, t: &Tensor) -> Result<Vec<f32>, OpError> {
    t.to_f32_vec().map_err(|e| OpError::InvalidInput {
        op: op.to_string(),
        input: name.to_string(),
        message: e.to_string(),
    })
}

/// The `attention_out` / `softmax_lse` tensors of a recipe run.
pub(crate) fn recipe_outputs(g: &Geometry, out: &[f32], lse: Option<&[f32]>) -> TensorMap {
    let mut m = TensorMap::new();
    let vals: Vec<f64> = out.iter().map(|&x| x as f64).collect();
    // The values are already rounded to the output dtype, so this rounding is exact.
    m.insert(
        "attention_out".to_string(),
        Tensor::round_values(ElemType::from(g.dtype), g.out_shape(), &vals, Rounding::RNE),
    );
    if let Some(l) = lse {
        m.insert(
            "softmax_lse".to_string(),
            Tensor::from_f32(g.lse_shape(), l),
        );
    }
    m
}

/// The `attention_out` / `softmax_lse` tensors of an oracle run (F64).
pub(crate) fn oracle_outputs(g: &Geometry, out: &[f64], lse: &[f64]) -> TensorMap {
    let mut m = TensorMap::new();
    m.insert(
        "attention_out".to_string(),
        Tensor::of_f64(g.out_shape(), out),
    );
    if g.softmax_lse_flag {
        m.insert(
            "softmax_lse".to_string(),
            Tensor::of_f64(g.lse_shape(), lse),
        );
    }
    m
}

/// The output specs shared by both attention families.
pub(crate) fn output_specs(g: &Geometry) -> Vec<TensorSpec> {
    let mut outs = vec![TensorSpec::new(
        "attention_out",
        ElemType::from(g.dtype),
        g.out_shape(),
        g.out_axes(),
    )];
    if g.softmax_lse_flag {
        let axes: &[&str] = if g.layout.is_varlen() {
            &["t", "n", "one"]
        } else {
            &["b", "n", "s", "one"]
        };
        outs.push(TensorSpec::new(
            "softmax_lse",
            ElemType::F32,
            g.lse_shape(),
            axes,
        ));
    }
    outs
}

/// The `fa_prefill` family.
pub struct FaPrefill;

impl FaPrefill {
    fn inputs(g: &Geometry) -> Vec<TensorSpec> {
        let et = ElemType::from(g.dtype);
        let mut v = vec![
            TensorSpec::new("query", et, g.q_shape(), g.in_axes()),
            TensorSpec::new("key", et, g.kv_shape(), g.in_axes()),
            TensorSpec::new("value", et, g.kv_shape(), g.in_axes()),
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

/// The query, key and value as f32 and the mask's bytes (when the geometry has one), read
/// from the inputs.
struct Loaded<'a> {
    query: Vec<f32>,
    key: Vec<f32>,
    value: Vec<f32>,
    mask: Option<&'a [u8]>,
}

impl<'a> Loaded<'a> {
    fn read(g: &Geometry, inputs: &'a TensorMap) -> Result<Loaded<'a>, OpError> {
        let specs = FaPrefill::inputs(g);
        let query = f32_values(OP, "query", input(OP, inputs, &specs[0])?)?;
        let key = f32_values(OP, "key", input(OP, inputs, &specs[1])?)?;
        let value = f32_values(OP, "value", input(OP, inputs, &specs[2])?)?;
        let mask = if g.atten_mask {
            Some(input(OP, inputs, &specs[3])?.data.as_slice())
        } else {
            None
        };
        Ok(Loaded {
            query,
            key,
            value,
            mask,
        })
    }

    fn attention_inputs(&self) -> AttentionInputs<'_> {
        AttentionInputs {
            query: &self.query,
            key: &self.key,
            value: &self.value,
            atten_mask: self.mask,
        }
    }
}

impl OpFamily for FaPrefill {
    fn faults(&self) -> Vec<&'static crate::ops::fault::Fault> {
        super::attention_faults::FAULTS.iter().collect()
    }

    fn knob_family(&self) -> &'static str {
        "fa"
    }
    fn kernel_variants(&self) -> &'static [&'static crate::variant::KernelVariant] {
        static VARIANTS: [&crate::variant::KernelVariant; 3] = [
            &super::attention_variants::PFA,
            &super::attention_variants::PFA_HIGH_PERF,
            &super::attention_variants::FIA_V3_GQA,
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
        let p: FaPrefillParams = parse_params(OP, params)?;
        let layout = p.input_layout.name();
        Ok(vec![
            ParamPath::new(
                "layout_bnsd",
                "the BNSD input layout: heads outermost",
                layout == "BNSD",
            ),
            ParamPath::new(
                "layout_bsh",
                "the BSH input layout: heads folded into the hidden axis",
                layout == "BSH",
            ),
            ParamPath::new(
                "layout_tnd",
                "the TND (varlen) layout: sequences packed back to back",
                p.input_layout.is_varlen(),
            ),
            ParamPath::new(
                "band_mask",
                "sparse_mode 4 (a band of pre_tokens / next_tokens)",
                p.sparse_mode == 4,
            ),
            super::path::odd_heads(p.num_heads, p.num_key_value_heads),
        ])
    }

    fn describe(&self, params: &serde_json::Value) -> Result<OpDescription, OpError> {
        let p: FaPrefillParams = parse_params(OP, params)?;
        let g = p.geometry()?;
        let inputs = Self::inputs(&g);
        let outputs = output_specs(&g);
        let bytes = super::io_bytes(&inputs, &outputs);
        Ok(OpDescription {
            inputs,
            outputs,
            cost: OpCost {
                flops: attention_flops(&g),
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
        let p: FaPrefillParams = parse_params(OP, params)?;
        let g = p.geometry()?;
        let d = g.head_dim;
        let mut m = TensorMap::new();
        m.insert(
            "query".to_string(),
            values_tensor(ctx, g.dtype, g.q_shape(), |_| false, d),
        );
        // Key/value rows beyond actual_seq_lengths_kv are NaN: they must never be read.
        let mut beyond = vec![false; g.kv_tokens * g.kv_heads];
        if !g.layout.is_varlen() {
            for b in 0..g.batch {
                for j in g.lk[b]..g.kv_seq {
                    for kvh in 0..g.kv_heads {
                        beyond[g.kv_offset(b, j, kvh) / d] = true;
                    }
                }
            }
        }
        for name in ["key", "value"] {
            m.insert(
                name.to_string(),
                values_tensor(ctx, g.dtype, g.kv_shape(), |r| beyond[r], d),
            );
        }
        if g.atten_mask {
            let n = g.batch * g.q_seq * g.kv_seq;
            let mut mask = vec![0u8; n];
            for (idx, x) in mask.iter_mut().enumerate() {
                let i = (idx / g.kv_seq) % g.q_seq;
                *x = (i < p.masked_rows || ctx.unit() >= p.mask_keep) as u8;
            }
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
            Regime::PaddedRowsLse,
            Regime::BatchDistinct,
            Regime::SeqNeHeads,
            Regime::GqaGroups,
            Regime::ModerateLateMax,
            Regime::ModerateEarlyMax,
        ]
    }

    fn check_regimes(&self, params: &serde_json::Value, regimes: &[Regime]) -> Result<(), OpError> {
        let p: FaPrefillParams = parse_params(OP, params)?;
        let g = p.geometry()?;
        attention_regimes::check(OP, &g, regimes, late_from(p.kv_tile), 0, None)
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
        let p: FaPrefillParams = parse_params(OP, params)?;
        let g = p.geometry()?;
        let offset = |b: usize, j: usize, kvh: usize| g.kv_offset(b, j, kvh);
        let keys = attention_regimes::KeyRows {
            tensor: "key",
            offset: &offset,
            first_free: 0,
            block: None,
        };
        let from = match attention_regimes::moderate_recipe_name(OP, regimes, ctx)? {
            Some(name) => {
                let r =
                    preset(OP, name, g.dtype, p.q_tile, p.kv_tile)?.on_vector_cores(p.vector_cores);
                let shape = crate::attention::ifa_tiling::IfaShape::of(&g, g.kv_seq, None);
                attention_regimes::recipe_kv_tile(OP, &r, &shape, r.kv_tile)?
            }
            None => late_from(p.kv_tile),
        };
        attention_regimes::impose(OP, &g, regimes, &keys, from, &mut m, ctx)?;
        if regimes.contains(&Regime::RoundingTies) {
            let recipe = attention_ties::recipe_of(OP, ctx, g.dtype)?;
            attention_ties::impose(OP, &g, &recipe, &keys, "value", &mut m, ctx)?;
        }
        if regimes.contains(&Regime::SubnormalOutputs) {
            attention_regimes::impose_subnormal_values(OP, &g, &keys, "value", &mut m, ctx)?;
        }
        if regimes.contains(&Regime::BatchDistinct) {
            attention_regimes::verify_distinct_batches(OP, &g, &keys, "value", &m)?;
        }
        Ok(m)
    }

    crate::ops::preset_family::editable_family_methods!();
}

impl crate::ops::preset_family::EditableRun for FaPrefill {
    type Recipe = crate::attention::Recipe;

    fn run_edited(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        edit: Option<fn(&mut crate::attention::Recipe) -> bool>,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<Option<TensorMap>, OpError> {
        let p: FaPrefillParams = parse_params(OP, params)?;
        let g = p.geometry()?;
        if recipe == ORACLE {
            let loaded = Loaded::read(&g, inputs)?;
            let o = oracle(&g, &loaded.attention_inputs(), threads).map_err(|e| op_error(OP, e))?;
            return Ok(Some(oracle_outputs(&g, &o.out, &o.lse)));
        }
        let mut r =
            preset(OP, recipe, g.dtype, p.q_tile, p.kv_tile)?.on_vector_cores(p.vector_cores);
        if let Some(f) = edit
            && !f(&mut r)
        {
            return Ok(None);
        }
        let loaded = Loaded::read(&g, inputs)?;
        let o =
            attention(&g, &r, &loaded.attention_inputs(), threads).map_err(|e| op_error(OP, e))?;
        Ok(Some(recipe_outputs(&g, &o.out, o.lse.as_deref())))
    }
}

/// The attention geometry of `fa_prefill` parameters (the fault catalogue permutes heads
/// through it).
pub fn geometry_of(params: &serde_json::Value) -> Result<Geometry, OpError> {
    parse_params::<FaPrefillParams>(OP, params)?.geometry()
}

/// The scores' ingredients of an `fa_prefill` case ([`attention_regimes::score_view`]).
pub(crate) fn score_view(
    params: &serde_json::Value,
    inputs: &TensorMap,
) -> Result<ScoreView, OpError> {
    let g = geometry_of(params)?;
    let loaded = Loaded::read(&g, inputs)?;
    Ok(ScoreView {
        query: loaded.query,
        key: loaded.key,
        mask: loaded.mask.map(<[u8]>::to_vec),
        g,
    })
}
