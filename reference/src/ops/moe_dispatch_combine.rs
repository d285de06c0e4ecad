//! `moe_dispatch_combine`: the expert-parallel communication kernels of DeepSeek-style MoE
//! serving, `torch_npu.npu_moe_distribute_dispatch_v2` and `npu_moe_distribute_combine_v2`
//! (aclnnMoeDistributeDispatchV2 / CombineV2), over simulated ranks, judged as one round trip
//! (docs/ascend.md, rows `moe.*`; docs/suites.md).
//!
//! Why one op: the combine's metadata inputs (`assist_info_for_combine`, `ep_send_counts`) are
//! opaque by the kernel's own README (their values differ by product, algorithm and version),
//! so a combine can only be fed by the dispatch that made them. The op computes every rank's
//! dispatch from every rank's inputs, applies a KNOWN expert step (conform's own, not a kernel:
//! each expert multiplies its rows by a power-of-two gain), and combines them back.
//!
//! Params (JSON, unknown keys rejected): `{"ranks": W, "bs": BS, "hidden": H, "experts": E,
//! "top_k": K, "shared_experts": Ns, "shared_ranks": S, "quant_mode": 0|2, "smooth": false,
//! "dtype": "bf16"|"f16", "expert_token_nums_type": 0|1, "active": [a_0, ...]}`. The first S
//! ranks hold the shared experts (Ns of them, S / Ns ranks each), the other W - S hold the
//! routed experts, L = E / (W - S) each: expert e on rank e / L + S as local expert e % L.
//! `active` (one count per rank) adds the 1-D `x_active_mask`: rank r's first a_r tokens are
//! active, the rest are not sent.
//!
//! Tensors: inputs `x` `[W, BS, H]` (the dtype), `expert_ids` I32 `[W, BS, K]` (distinct per
//! row), `expert_scales` F32 `[W, BS, K]`, `expert_gain` `[Ns + E]` (the expert step: shared
//! experts first, then routed, the `scales` row order of the API), optional `scales` F32
//! `[Ns + E, H]` (smooth rows, with `smooth`) and `x_active_mask` U8 `[W, BS]` (with `active`).
//! Outputs: `expand_x` `[N, H]` (the dtype, or I8 with `quant_mode` 2): every rank's received
//! rows, ranks in order, each rank's rows by local expert, then source rank, then the source's
//! (token, k) order (N = the sum over ranks of a_r * (K + Ns), known from the parameters since
//! every active pair sends exactly one row); `dynamic_scales` F32 `[N]` (`quant_mode` 2);
//! `expert_token_nums` I64 `[S + (W - S) * L]` (each rank's entries in rank order: 1 per
//! shared rank, L per routed rank; counts or running sums by `expert_token_nums_type`); `out`
//! `[sum a_r, H]` (the combine's result for every active token, ranks in order).
//!
//! Recipes: `ascend_v2` is the kernels' arithmetic as their public source writes it (see
//! [`MoeRecipe`]); `oracle` is exact: the rows and counts are exact anyway, quantisation by
//! [`super::dynamic_quant::oracle_row`], and `out` the f64 weighted sum of the exact expert
//! outputs in k order (F64 outputs, unrounded).
//!
//! Every rounding point is explicit: the quantisation (the `dynamic_quant` recipe
//! `ascend_a2`), the expert step (`q * scale` in f32, times the gain, one rounding to the
//! dtype with nearest-even), each combine product and each add in f32 (nearest even, no fused
//! multiply-add), and the final cast by [`MoeRecipe::output_rounding`]. Tokens and rows are
//! independent, so the bits are the same for any thread count.
//!
//! Regimes: `moe_routing_edges`, `moe_combine_order` and (with `quant_mode` 2)
//! `rounding_ties`; see [`MoeDispatchCombine::impose`].

mod compute;
pub(crate) mod faults;
mod preset;
mod recipe;
mod regimes;

use super::dynamic_quant::{oracle_row, DqRecipe, ScaleForm};
use super::path::{odd_above_one, ParamPath};
use super::preset_family::{self, PresetFamily};
use super::regime::Regime;
use super::{
    input, parse_params, ElemType, GenContext, OpCost, OpDescription, OpError, OpFamily, Tensor,
    TensorMap, TensorSpec,
};
use crate::formats::{bf16, f16, Rounding, RoundingMode};
use crate::parallel::{map_tasks, Threads};
pub use recipe::*;

/// The op name.
pub const OP: &str = "moe_dispatch_combine";

#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    ranks: usize,
    bs: usize,
    hidden: usize,
    experts: usize,
    top_k: usize,
    #[serde(default)]
    shared_experts: usize,
    #[serde(default)]
    shared_ranks: usize,
    #[serde(default)]
    quant_mode: u32,
    #[serde(default)]
    smooth: bool,
    #[serde(default = "default_dtype")]
    dtype: String,
    #[serde(default = "default_token_nums_type")]
    expert_token_nums_type: u32,
    #[serde(default)]
    active: Option<Vec<usize>>,
}

fn default_dtype() -> String {
    super::DEFAULT_DTYPE.into()
}

fn default_token_nums_type() -> u32 {
    1
}

/// A validated case.
#[derive(Clone, Debug)]
pub struct Case {
    pub ranks: usize,
    pub bs: usize,
    pub hidden: usize,
    pub experts: usize,
    pub top_k: usize,
    pub shared_experts: usize,
    pub shared_ranks: usize,
    /// Routed experts per routed rank.
    pub local: usize,
    pub quant: bool,
    pub smooth: bool,
    pub dtype: ElemType,
    pub cumsum: bool,
    /// Active tokens per rank.
    pub active: Vec<usize>,
    pub mask: bool,
}

impl Case {
    /// Ranks per shared expert.
    fn per_shared(&self) -> usize {
        self.shared_ranks
            .checked_div(self.shared_experts)
            .unwrap_or(1)
    }

    /// Received rows in all.
    pub fn rows(&self) -> usize {
        self.active.iter().sum::<usize>() * (self.top_k + self.shared_experts)
    }

    /// Active tokens in all.
    pub fn active_tokens(&self) -> usize {
        self.active.iter().sum()
    }

    /// Entries of `expert_token_nums`.
    pub fn token_nums_len(&self) -> usize {
        self.shared_ranks + (self.ranks - self.shared_ranks) * self.local
    }

    /// The rank and local index of routed expert `e` under `placement`.
    pub fn place(&self, e: usize, placement: Placement) -> (usize, usize) {
        let routed = self.ranks - self.shared_ranks;
        let base = e / self.local;
        let r = match placement {
            Placement::Contiguous => base,
            Placement::OffByOne => (base + 1) % routed,
        };
        (self.shared_ranks + r, e % self.local)
    }

    /// The gain row (in `expert_gain`) of the expert a row is processed by on rank `d`,
    /// local expert `l`.
    fn gain_index(&self, d: usize, l: usize) -> usize {
        if d < self.shared_ranks {
            d / self.per_shared()
        } else {
            self.shared_experts + (d - self.shared_ranks) * self.local + l
        }
    }
}

/// The `moe_dispatch_combine` op family.
pub struct MoeDispatchCombine;

fn invalid(param: &str, message: impl Into<String>) -> OpError {
    OpError::invalid_param(OP, param, message)
}

fn failed(message: impl std::fmt::Display) -> OpError {
    OpError::failed(OP, message)
}

fn regime_err(r: Regime, message: impl Into<String>) -> OpError {
    OpError::Regime {
        op: OP.into(),
        regime: r.name().into(),
        message: message.into(),
    }
}

fn decode(dtype: ElemType, bits: u16) -> f32 {
    match dtype {
        ElemType::F16 => f16::f16_to_f32(bits),
        _ => bf16::bf16_to_f32(bits),
    }
}

fn round_f32(dtype: ElemType, v: f32, mode: RoundingMode) -> u16 {
    match dtype {
        ElemType::F16 => f16::f32_to_f16(v, Rounding::ieee(mode)),
        _ => bf16::f32_to_bf16(v, Rounding::ieee(mode)),
    }
}

fn encode(dtype: ElemType, v: f64) -> u16 {
    match dtype {
        ElemType::F16 => f16::f64_to_f16(v, Rounding::RNE),
        _ => bf16::f64_to_bf16(v, Rounding::RNE),
    }
}

/// One received row: where it came from, which expert processes it, its payload.
#[derive(Clone, Debug)]
struct Row {
    source: usize,
    token: usize,
    /// k, or K + i for shared expert i.
    slot: usize,
    /// `expert_gain` row of the expert that processes it.
    gain: usize,
    /// The dtype bits (quant_mode 0) or int8 values (as u16) of the row.
    data: Vec<u16>,
    q: Vec<i8>,
    scale: f32,
}

/// The inputs decoded.
struct Inputs {
    x: Vec<u16>,
    ids: Vec<i64>,
    weights: Vec<f32>,
    gain: Vec<u16>,
    smooth: Option<Vec<f32>>,
}

/// The most routed experts per token (`top_k`) and shared experts the parameters allow.
const MAX_TOP_K: usize = 8;
const MAX_SHARED: usize = 4;

/// One output element of the combine under `r`: the expert outputs `ys` of the token's routed
/// rows (k order, 0 for a row never received) weighted by `w`, then the shared rows `shared`
/// unweighted, cast to the dtype by the recipe's final rounding.
fn combine_element(r: &MoeRecipe, dtype: ElemType, ys: &[f32], w: &[f32], shared: &[f32]) -> u16 {
    let k = ys.len();
    let mut wk = [0.0f32; MAX_TOP_K];
    wk[..k].copy_from_slice(&w[..k]);
    if r.renormalise {
        let sum = w[..k].iter().fold(0.0f32, |a, &b| a + b);
        for x in wk[..k].iter_mut() {
            *x /= sum;
        }
    }
    let step = |acc: f32| -> f32 {
        match r.accumulator {
            Accumulator::F32 | Accumulator::FusedMultiplyAdd => acc,
            Accumulator::DtypePerStep => decode(
                dtype,
                round_f32(dtype, acc, RoundingMode::NearestTiesToEven),
            ),
        }
    };
    let mut acc = 0.0f32;
    for i in 0..k {
        let kk = match r.order {
            SumOrder::TopKAscending => i,
            SumOrder::TopKDescending => k - 1 - i,
        };
        let (y, wv) = (ys[kk], wk[kk]);
        acc = match (r.accumulator, r.weights) {
            (Accumulator::FusedMultiplyAdd, WeightUse::Once) => crate::math::fma_f32(y, wv, acc),
            (Accumulator::FusedMultiplyAdd, WeightUse::Twice) => {
                crate::math::fma_f32(y * wv, wv, acc)
            }
            (_, WeightUse::Once) => step(acc + y * wv),
            (_, WeightUse::Twice) => step(acc + (y * wv) * wv),
            (_, WeightUse::Ignored) => step(acc + y),
        };
    }
    for &y in shared {
        acc = step(acc + y);
    }
    round_f32(dtype, acc, r.output_rounding)
}

/// An I64 tensor.
fn i64_tensor(values: Vec<i64>) -> Tensor {
    Tensor {
        dtype: ElemType::I64,
        shape: vec![values.len()],
        data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// Columns the combine constructions set (each kill shows on this many elements).
const CONSTRUCTION_COLUMNS: usize = 8;
/// Tie rows `rounding_ties` plants, and the ties in each.
const TIE_ROWS: usize = 2;
const TIES_PER_ROW: usize = 8;

/// Tokens `order_witnesses` plants witnesses on (each on [`CONSTRUCTION_COLUMNS`] columns).
const WITNESS_TOKENS: usize = 2;
/// Token-level draws (weights) and column-level draws (x) tried before the search gives up.
const WITNESS_DRAWS: usize = 64;

fn pow2(e: i32) -> f64 {
    let mut v = 1.0f64;
    if e >= 0 {
        for _ in 0..e {
            v *= 2.0;
        }
    } else {
        for _ in 0..(-e) {
            v *= 0.5;
        }
    }
    v
}

/// The preset that models the dispatch/combine v2 kernels.
const ASCEND_V2: &str = PRESETS[0];

/// Claims about `moe_dispatch_combine` (the dispatch/combine v2 kernels) fixed in the code
/// rather than a recipe field.
pub const CLAIMS: [&str; 8] = [
    "moe.claim.send_order",
    "moe.claim.opaque_metadata",
    "moe.claim.quant_per_destination",
    "moe.claim.shared_placement",
    "moe.claim.shared_unweighted",
    "moe.claim.no_fma",
    "moe.claim.mask_1d",
    "moe.claim.expert_step",
];

impl OpFamily for MoeDispatchCombine {
    fn faults(&self) -> Vec<&'static crate::ops::fault::Fault> {
        faults::FAULTS.iter().collect()
    }

    fn knob_family(&self) -> &'static str {
        "moe"
    }
    fn kernel_variants(&self) -> &'static [&'static crate::variant::KernelVariant] {
        static VARIANTS: [&crate::variant::KernelVariant; 1] = [&super::preset_variants::MOE_V2];
        &VARIANTS
    }
    fn preset_knobs(
        &self,
        preset: &str,
        dtype: crate::formats::DType,
        edit: Option<&crate::recipe_edit::RecipeEdit>,
    ) -> Option<Vec<crate::knob::Knob>> {
        let _ = dtype;
        if preset != ASCEND_V2 {
            return None;
        }
        MoeRecipe::preset(preset).map(|r| {
            let mut k = crate::recipe_edit::edited(r, edit).knobs(preset);
            k.extend(CLAIMS.iter().map(|&id| crate::knob::Knob::claim(id)));
            k.extend(
                super::dynamic_quant::CLAIMS
                    .iter()
                    .map(|&id| crate::knob::Knob::claim(id)),
            );
            k
        })
    }
    fn knob_ids(&self) -> Vec<String> {
        // The quantisation's knobs are dynamic_quant's own, which that family declares.
        let mut ids: Vec<String> = MoeRecipe::preset(ASCEND_V2)
            .map(|r| {
                r.knobs(ASCEND_V2)
                    .into_iter()
                    .map(|k| k.id)
                    .filter(|id| id.starts_with("moe."))
                    .collect()
            })
            .unwrap_or_default();
        ids.extend(CLAIMS.iter().map(|id| id.to_string()));
        ids
    }

    fn name(&self) -> &'static str {
        OP
    }

    fn default_dtype(&self) -> Option<&'static str> {
        Some(super::DEFAULT_DTYPE)
    }

    fn recipes(&self) -> Vec<&'static str> {
        PRESETS.to_vec()
    }

    fn paths(&self, params: &serde_json::Value) -> Result<Vec<ParamPath>, OpError> {
        let p: Params = parse_params(OP, params)?;
        Ok(vec![
            ParamPath::new(
                "cumulative_counts",
                "expert_token_nums_type 0: the expert token counts are returned as running sums",
                p.expert_token_nums_type == 0,
            ),
            ParamPath::new(
                "shared_expert_over_ranks",
                "a shared expert spread over two or more ranks: each token's copy goes to its own shared rank",
                p.shared_experts > 0 && p.shared_ranks > 1,
            ),
            ParamPath::new(
                "smooth_with_shared_expert",
                "smooth scales together with a shared expert: the shared rank's rows are quantised with their own smooth row",
                p.smooth && p.shared_experts > 0,
            ),
            ParamPath::new(
                "odd_ranks",
                "an odd world size above 1: rank strides and the experts' spread over ranks that no power of two hides",
                odd_above_one(p.ranks),
            ),
        ])
    }

    fn describe(&self, params: &serde_json::Value) -> Result<OpDescription, OpError> {
        let c = self.case(params)?;
        let (inputs, outputs) = self.specs(&c);
        let bytes = super::io_bytes(&inputs, &outputs);
        // Per received element: the quantisation's |v|, max and scaling (quant_mode 2), the
        // expert step's product, the combine's product and add.
        let per_row = if c.quant { 6.0 } else { 3.0 };
        Ok(OpDescription {
            inputs,
            outputs,
            cost: OpCost {
                flops: per_row * (c.rows() * c.hidden) as f64,
                bytes,
                compute: c.dtype,
            },
        })
    }

    fn generate(
        &self,
        params: &serde_json::Value,
        ctx: &mut GenContext,
    ) -> Result<TensorMap, OpError> {
        let c = self.case(params)?;
        super::refuse_non_finite(OP, &ctx.dist)?;
        let (specs, _) = self.specs(&c);
        let (w, bs, k) = (c.ranks, c.bs, c.top_k);
        let mut out = TensorMap::new();
        for s in &specs {
            let t = match s.name.as_str() {
                "x" => ctx.rounded_tensor(
                    c.dtype,
                    s.shape.clone(),
                    &super::special_values(c.dtype),
                    Rounding::RNE,
                ),
                "expert_ids" => {
                    // K distinct experts per token (a partial shuffle).
                    let mut ids = Vec::with_capacity(w * bs * k);
                    let mut pool: Vec<usize> = (0..c.experts).collect();
                    for _ in 0..w * bs {
                        for i in 0..k {
                            let j = i + ctx.below((c.experts - i) as u64) as usize;
                            pool.swap(i, j);
                            ids.push(pool[i] as i32);
                        }
                    }
                    Tensor::from_i32(s.shape.clone(), &ids)
                }
                "expert_scales" => {
                    // Router weights: positive, of order 1 / K, not normalised.
                    let v: Vec<f32> = (0..w * bs * k)
                        .map(|_| ((0.05 + 0.9 * ctx.unit()) * 2.0 / k as f64) as f32)
                        .collect();
                    Tensor::from_f32(s.shape.clone(), &v)
                }
                "expert_gain" => {
                    // Powers of two in [1/2, 2]: the expert step is exact but per expert.
                    let n: usize = s.shape.iter().product();
                    let bits: Vec<u16> = (0..n)
                        .map(|_| encode(c.dtype, pow2(ctx.below(3) as i32 - 1)))
                        .collect();
                    Tensor::from_bits16(c.dtype, s.shape.clone(), &bits)
                }
                "scales" => {
                    // SmoothQuant factors in [0.25, 1), as f32.
                    let n: usize = s.shape.iter().product();
                    let v: Vec<f32> = (0..n).map(|_| (0.25 + 0.75 * ctx.unit()) as f32).collect();
                    Tensor::from_f32(s.shape.clone(), &v)
                }
                "x_active_mask" => {
                    let active = &c.active;
                    let m: Vec<u8> = (0..w)
                        .flat_map(|r| (0..bs).map(move |t| u8::from(t < active[r])))
                        .collect();
                    Tensor::from_u8(s.shape.clone(), m)
                }
                other => return Err(failed(format!("no generator for `{other}`"))),
            };
            out.insert(s.name.clone(), t);
        }
        Ok(out)
    }

    fn regimes(&self) -> &'static [Regime] {
        &[
            Regime::RoundingTies,
            Regime::MoeRoutingEdges,
            Regime::MoeCombineOrder,
            Regime::OrderWitnesses,
        ]
    }

    fn check_regimes(&self, params: &serde_json::Value, regimes: &[Regime]) -> Result<(), OpError> {
        preset_family::only_own_regimes(OP, regimes)?;
        let c = self.case(params)?;
        let mut tokens_needed = 0;
        let routing_tokens = if regimes.contains(&Regime::MoeRoutingEdges) {
            2
        } else {
            0
        };
        for &r in regimes {
            match r {
                Regime::MoeRoutingEdges => {
                    let routed = c.ranks - c.shared_ranks;
                    if routed < 2 {
                        return Err(regime_err(
                            r,
                            "needs two or more routed ranks (one left empty)",
                        ));
                    }
                    if c.local < c.top_k + 1 {
                        return Err(regime_err(
                            r,
                            format!(
                                "needs more local experts per rank ({}) than top_k ({}): a token's K experts on one rank beside an expert left empty",
                                c.local, c.top_k
                            ),
                        ));
                    }
                    if c.experts - c.local - 1 < c.top_k {
                        return Err(regime_err(
                            r,
                            "needs top_k experts outside the empty rank and the empty expert",
                        ));
                    }
                    if !c.active.iter().any(|&a| a >= 2) {
                        return Err(regime_err(r, "needs a rank with two active tokens"));
                    }
                }
                Regime::MoeCombineOrder => {
                    if c.quant || c.shared_experts > 0 || c.top_k < 3 {
                        return Err(regime_err(
                            r,
                            "the order and precision constructions need quant_mode 0, no shared experts and top_k >= 3",
                        ));
                    }
                    if c.hidden < CONSTRUCTION_COLUMNS {
                        return Err(regime_err(r, "hidden is below the 8 construction columns"));
                    }
                    tokens_needed += 2;
                }
                Regime::OrderWitnesses => {
                    if c.quant || c.shared_experts > 0 || c.top_k < 2 {
                        return Err(regime_err(
                            r,
                            "the fused multiply-add witnesses need quant_mode 0, no shared experts and top_k >= 2 (two routed products that nearly cancel)",
                        ));
                    }
                    if c.hidden < CONSTRUCTION_COLUMNS {
                        return Err(regime_err(r, "hidden is below the 8 witness columns"));
                    }
                    tokens_needed += WITNESS_TOKENS;
                }
                Regime::RoundingTies => {
                    if !c.quant {
                        return Err(regime_err(
                            r,
                            "the ties are the quantisation's: quant_mode 2 only",
                        ));
                    }
                    if c.hidden < TIES_PER_ROW + 2 {
                        return Err(regime_err(r, "hidden is below the tie row's 9 columns"));
                    }
                    tokens_needed += TIE_ROWS;
                }
                _ => {}
            }
        }
        // Tokens beyond the two the routing regime takes.
        let spare = c.active_tokens().saturating_sub(routing_tokens);
        if tokens_needed > spare {
            return Err(regime_err(
                *regimes.last().unwrap_or(&Regime::MoeRoutingEdges),
                format!(
                    "the declared regimes take {tokens_needed} active tokens of their own (beyond the routing regime's two), the case has {}",
                    c.active_tokens()
                ),
            ));
        }
        Ok(())
    }

    preset_family::preset_family_methods!();
}
