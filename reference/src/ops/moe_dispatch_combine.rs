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

use super::dynamic_quant::{oracle_row, DqRecipe, ScaleForm};
use super::path::{odd_above_one, ParamPath};
use super::preset_family::{self, PresetFamily};
use super::regime::Regime;
use super::{
    input, parse_params, ElemType, GenContext, OpCost, OpDescription, OpError, OpFamily, Tensor,
    TensorMap, TensorSpec,
};
use crate::formats::{bf16, f16, Rounding, RoundingMode};
use crate::knob::Knob;
use crate::parallel::{map_tasks, Threads};

/// The op name.
pub const OP: &str = "moe_dispatch_combine";

/// Where a routed expert lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Expert e on rank `e / L + S`, local expert `e % L` (the kernel).
    Contiguous,
    /// Rank `S + (e / L + 1) mod (W - S)`: the expert-to-rank map off by one (a bug).
    OffByOne,
}

/// The order of a rank's received rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpandOrder {
    /// By local expert, then source rank, then the source's (token, k) order (the kernel).
    ExpertSourceToken,
    /// By source rank, then token, then k: the rows left in arrival order (a bug).
    SourceToken,
}

/// What the receive loop does at an (expert, source) block with no rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmptyBlocks {
    /// Skips it (the kernel's loop over every block).
    Skipped,
    /// Stops receiving: every later block of the rank is dropped (a bug).
    StopReceiving,
}

/// Whose scale a quantised row carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleSource {
    /// Its own (the kernel writes the scale after the row it quantised).
    OwnToken,
    /// The previous token's of the same source and destination expert (a bug).
    PreviousToken,
}

/// How `expert_token_nums` is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenNums {
    /// Counts for type 1, running sums for type 0 (the kernel).
    AsAsked,
    /// The other one (a bug).
    Swapped,
}

/// How often each routed row is multiplied by its weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightUse {
    Once,
    Twice,
    Ignored,
}

/// The order of the combine's weighted sum over k.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SumOrder {
    /// k = 0, 1, ..., K - 1 (the kernel's loop), then the shared experts.
    TopKAscending,
    /// k = K - 1, ..., 0 (a bug).
    TopKDescending,
}

/// The combine's accumulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accumulator {
    /// f32 throughout, rounded to the dtype once at the end (the kernel).
    F32,
    /// Rounded to the dtype after every add (a bug).
    DtypePerStep,
    /// f32, but each weighted routed row taken in by one fused multiply-add, the product never
    /// rounded on its own (a bug: the kernel's Muls then Add round twice, `moe.claim.no_fma`).
    FusedMultiplyAdd,
}

/// The numerics of one dispatch/combine round trip.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoeRecipe {
    /// The per-token INT8 quantisation of `quant_mode` 2 (the `dynamic_quant` recipe).
    pub quant: DqRecipe,
    pub placement: Placement,
    pub expand_order: ExpandOrder,
    pub empty_blocks: EmptyBlocks,
    pub scale_source: ScaleSource,
    pub token_nums: TokenNums,
    pub weights: WeightUse,
    /// The weights divided by their f32 sum before use (a bug: the API takes them as given).
    pub renormalise: bool,
    pub order: SumOrder,
    pub accumulator: Accumulator,
    /// The final cast of the f32 sum to the dtype.
    pub output_rounding: RoundingMode,
}

/// The recipe presets.
pub const PRESETS: [&str; 1] = ["ascend_v2"];

impl MoeRecipe {
    /// A preset by name.
    pub fn preset(name: &str) -> Option<MoeRecipe> {
        match name {
            "ascend_v2" => Some(MoeRecipe {
                quant: DqRecipe::kernel(ScaleForm::QuotientThenReciprocal),
                placement: Placement::Contiguous,
                expand_order: ExpandOrder::ExpertSourceToken,
                empty_blocks: EmptyBlocks::Skipped,
                scale_source: ScaleSource::OwnToken,
                token_nums: TokenNums::AsAsked,
                weights: WeightUse::Once,
                renormalise: false,
                order: SumOrder::TopKAscending,
                accumulator: Accumulator::F32,
                output_rounding: RoundingMode::NearestTiesToEven,
            }),
            _ => None,
        }
    }

    /// The ledger knobs of this recipe as preset `preset` (docs/ascend.md, ids
    /// `moe.<preset>.<field>`, and the dispatch kernel's quantisation as
    /// `moe.<preset>.quant.<field>`); destructures the struct, so a new field does not compile
    /// until it has a knob.
    pub fn knobs(&self, preset: &str) -> Vec<Knob> {
        let MoeRecipe {
            quant,
            placement,
            expand_order,
            empty_blocks,
            scale_source,
            token_nums,
            weights,
            renormalise,
            order,
            accumulator,
            output_rounding,
        } = self;
        let mut k = vec![
            Knob::new(format!("moe.{preset}.placement"), format!("{placement:?}")),
            Knob::new(
                format!("moe.{preset}.expand_order"),
                format!("{expand_order:?}"),
            ),
            Knob::new(
                format!("moe.{preset}.empty_blocks"),
                format!("{empty_blocks:?}"),
            ),
            Knob::new(
                format!("moe.{preset}.scale_source"),
                format!("{scale_source:?}"),
            ),
            Knob::new(
                format!("moe.{preset}.token_nums"),
                format!("{token_nums:?}"),
            ),
            Knob::new(format!("moe.{preset}.weights"), format!("{weights:?}")),
            Knob::new(
                format!("moe.{preset}.renormalise"),
                format!("{renormalise}"),
            ),
            Knob::new(format!("moe.{preset}.order"), format!("{order:?}")),
            Knob::new(
                format!("moe.{preset}.accumulator"),
                format!("{accumulator:?}"),
            ),
            Knob::new(
                format!("moe.{preset}.output_rounding"),
                crate::knob::rounding_name(&Rounding::ieee(*output_rounding)),
            ),
        ];
        k.extend(quant.knobs_under(&format!("moe.{preset}.quant")));
        k
    }
}

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

impl MoeDispatchCombine {
    fn specs(&self, c: &Case) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
        let (w, bs, h, k) = (c.ranks, c.bs, c.hidden, c.top_k);
        let ne = c.shared_experts + c.experts;
        let mut inputs = vec![
            TensorSpec::new("x", c.dtype, vec![w, bs, h], &["rank", "t", "h"]),
            TensorSpec::new(
                "expert_ids",
                ElemType::I32,
                vec![w, bs, k],
                &["rank", "t", "k"],
            ),
            TensorSpec::new(
                "expert_scales",
                ElemType::F32,
                vec![w, bs, k],
                &["rank", "t", "k"],
            ),
            TensorSpec::new("expert_gain", c.dtype, vec![ne], &["e"]),
        ];
        if c.smooth {
            inputs.push(TensorSpec::new(
                "scales",
                ElemType::F32,
                vec![ne, h],
                &["e", "h"],
            ));
        }
        if c.mask {
            inputs.push(TensorSpec::new(
                "x_active_mask",
                ElemType::U8,
                vec![w, bs],
                &["rank", "t"],
            ));
        }
        let n = c.rows();
        let mut outputs = vec![TensorSpec::new(
            "expand_x",
            if c.quant { ElemType::I8 } else { c.dtype },
            vec![n, h],
            &["row", "h"],
        )];
        if c.quant {
            outputs.push(TensorSpec::new(
                "dynamic_scales",
                ElemType::F32,
                vec![n],
                &["row"],
            ));
        }
        outputs.push(TensorSpec::new(
            "expert_token_nums",
            ElemType::I64,
            vec![c.token_nums_len()],
            &["expert"],
        ));
        outputs.push(TensorSpec::new(
            "out",
            c.dtype,
            vec![c.active_tokens(), h],
            &["token", "h"],
        ));
        (inputs, outputs)
    }

    fn decoded(&self, c: &Case, inputs: &TensorMap) -> Result<Inputs, OpError> {
        let (specs, _) = self.specs(c);
        let get = |name: &str| -> Result<&Tensor, OpError> {
            let spec = specs
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| failed(format!("no input `{name}`")))?;
            input(OP, inputs, spec)
        };
        let x = get("x")?.bits16().map_err(failed)?;
        let ids = get("expert_ids")?.to_i64_vec().map_err(failed)?;
        let weights = get("expert_scales")?.to_f32_vec().map_err(failed)?;
        let gain = get("expert_gain")?.bits16().map_err(failed)?;
        let smooth = if c.smooth {
            Some(get("scales")?.to_f32_vec().map_err(failed)?)
        } else {
            None
        };
        if c.mask {
            let m = &get("x_active_mask")?.data;
            for r in 0..c.ranks {
                for t in 0..c.bs {
                    let want = u8::from(t < c.active[r]);
                    if m[r * c.bs + t] != want {
                        return Err(OpError::InvalidInput {
                            op: OP.into(),
                            input: "x_active_mask".into(),
                            message: format!(
                                "rank {r} token {t} is {}, the case's `active` ({}) makes it {want}: true values first, the count from the parameters",
                                m[r * c.bs + t],
                                c.active[r]
                            ),
                        });
                    }
                }
            }
        }
        let k = c.top_k;
        for r in 0..c.ranks {
            for t in 0..c.active[r] {
                let row = &ids[(r * c.bs + t) * k..(r * c.bs + t + 1) * k];
                for (i, &e) in row.iter().enumerate() {
                    if e < 0 || e as usize >= c.experts {
                        return Err(OpError::InvalidInput {
                            op: OP.into(),
                            input: "expert_ids".into(),
                            message: format!(
                                "rank {r} token {t} k {i}: {e} is outside [0, {})",
                                c.experts
                            ),
                        });
                    }
                    if row[..i].contains(&e) {
                        return Err(OpError::InvalidInput {
                            op: OP.into(),
                            input: "expert_ids".into(),
                            message: format!(
                                "rank {r} token {t}: expert {e} twice (the API requires the K ids of a row to differ)"
                            ),
                        });
                    }
                }
            }
        }
        Ok(Inputs {
            x,
            ids,
            weights,
            gain,
            smooth,
        })
    }

    /// The quantisation of token `t` of rank `s` for smooth row `srow`: `(q, scale)`.
    fn quantise(
        &self,
        c: &Case,
        r: &MoeRecipe,
        inp: &Inputs,
        s: usize,
        t: usize,
        srow: usize,
    ) -> (Vec<i8>, f32) {
        let h = c.hidden;
        let base = (s * c.bs + t) * h;
        let v: Vec<f32> = (0..h)
            .map(|j| {
                let a = decode(c.dtype, inp.x[base + j]);
                match inp.smooth.as_ref() {
                    Some(sm) => a * sm[srow * h + j],
                    None => a,
                }
            })
            .collect();
        let amax = v
            .iter()
            .fold(0.0f32, |m, &x| if x.abs() > m { x.abs() } else { m });
        let (scale, factor) = r.quant.scale_and_factor(amax);
        let q = v
            .iter()
            .map(|&x| r.quant.to_int8(r.quant.scaled(x, factor)))
            .collect();
        (q, scale)
    }

    /// Every rank's received rows (ranks in order) under `r`.
    fn dispatch(&self, c: &Case, r: &MoeRecipe, inp: &Inputs, threads: Threads) -> Vec<Vec<Row>> {
        let (k, h) = (c.top_k, c.hidden);
        let make_row = |s: usize, t: usize, slot: usize, srow: usize, gain: usize| -> Row {
            if c.quant {
                let (q, own) = self.quantise(c, r, inp, s, t, srow);
                let scale = if r.scale_source == ScaleSource::PreviousToken && t > 0 {
                    self.quantise(c, r, inp, s, t - 1, srow).1
                } else {
                    own
                };
                Row {
                    source: s,
                    token: t,
                    slot,
                    gain,
                    data: Vec::new(),
                    q,
                    scale,
                }
            } else {
                let base = (s * c.bs + t) * h;
                Row {
                    source: s,
                    token: t,
                    slot,
                    gain,
                    data: inp.x[base..base + h].to_vec(),
                    q: Vec::new(),
                    scale: 0.0,
                }
            }
        };
        map_tasks(c.ranks, threads, |d| {
            let mut rows = Vec::new();
            if d < c.shared_ranks {
                let ps = c.per_shared();
                let i = d / ps;
                for s in (0..c.ranks).filter(|s| s % ps == d % ps) {
                    for t in 0..c.active[s] {
                        rows.push(make_row(s, t, k + i, i, c.gain_index(d, 0)));
                    }
                }
                return rows;
            }
            // The (token, k) pairs of source s bound for local expert l of this rank.
            let bound = |s: usize, t: usize, kk: usize| -> Option<(usize, usize)> {
                let e = inp.ids[(s * c.bs + t) * k + kk] as usize;
                let (rank, l) = c.place(e, r.placement);
                (rank == d).then_some((l, e))
            };
            match r.expand_order {
                ExpandOrder::ExpertSourceToken => {
                    'blocks: for l in 0..c.local {
                        for s in 0..c.ranks {
                            let before = rows.len();
                            for t in 0..c.active[s] {
                                for kk in 0..k {
                                    if let Some((_, e)) = bound(s, t, kk).filter(|&(ll, _)| ll == l)
                                    {
                                        rows.push(make_row(
                                            s,
                                            t,
                                            kk,
                                            c.shared_experts + e,
                                            c.gain_index(d, l),
                                        ));
                                    }
                                }
                            }
                            if rows.len() == before && r.empty_blocks == EmptyBlocks::StopReceiving
                            {
                                break 'blocks;
                            }
                        }
                    }
                }
                ExpandOrder::SourceToken => {
                    for s in 0..c.ranks {
                        for t in 0..c.active[s] {
                            for kk in 0..k {
                                if let Some((l, e)) = bound(s, t, kk) {
                                    rows.push(make_row(
                                        s,
                                        t,
                                        kk,
                                        c.shared_experts + e,
                                        c.gain_index(d, l),
                                    ));
                                }
                            }
                        }
                    }
                }
            }
            rows
        })
    }

    /// `expert_token_nums` of every rank from the received rows.
    fn token_nums(&self, c: &Case, r: &MoeRecipe, inp: &Inputs, rows: &[Vec<Row>]) -> Vec<i64> {
        let cumsum = c.cumsum != (r.token_nums == TokenNums::Swapped);
        let mut out = Vec::with_capacity(c.token_nums_len());
        for (d, rr) in rows.iter().enumerate() {
            if d < c.shared_ranks {
                out.push(rr.len() as i64);
                continue;
            }
            let mut counts = vec![0i64; c.local];
            for row in rr {
                let e = inp.ids[(row.source * c.bs + row.token) * c.top_k + row.slot] as usize;
                counts[c.place(e, r.placement).1] += 1;
            }
            let mut acc = 0i64;
            for n in counts {
                acc = if cumsum { acc + n } else { n };
                out.push(acc);
            }
        }
        out
    }

    /// The expert step of one row: `round_dtype(fl32(deq * gain))`.
    fn expert_out(&self, c: &Case, inp: &Inputs, row: &Row) -> Vec<f32> {
        let g = decode(c.dtype, inp.gain[row.gain]);
        (0..c.hidden)
            .map(|j| {
                let deq = if c.quant {
                    row.q[j] as f32 * row.scale
                } else {
                    decode(c.dtype, row.data[j])
                };
                decode(
                    c.dtype,
                    round_f32(c.dtype, deq * g, RoundingMode::NearestTiesToEven),
                )
            })
            .collect()
    }
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

/// One witness token: its x row and its K weights.
struct FmaWitness {
    x: Vec<u16>,
    w: Vec<f32>,
}

/// A token (x row of `h` columns, K weights for routed gains `g`) on which the kernel's
/// combine (`ascend_v2`: each product rounded to f32, then added) and the same combine with a
/// fused multiply-add give other output bits on [`CONSTRUCTION_COLUMNS`] columns.
///
/// The weights make the first two routed products nearly cancel: `w1 * g1 = b` (an f32 in
/// [1, 2) with its last bit set) and `w0 * g0 = d - b` with `d` a small power-of-two multiple
/// (bf16: about 2^-17, f16: about 2^-14); every later weight is 0. On a column holding `x`
/// (a dtype value in [1, 2), either sign) the kernel's f32 sum is `fl(x a) + fl(x b)`, exact
/// by Sterbenz, so it keeps the rounding error of `x b`, which the fused form drops; the sum
/// is near `x d`, where that error is about an ulp of the dtype, so the two round apart on
/// about half the draws. Each column keeps the first `x` on which they differ; the other
/// columns keep the drawn x. The seed chooses the witness, never whether there is one.
fn fma_witness(
    dtype: ElemType,
    g: &[f32],
    h: usize,
    ctx: &mut GenContext,
) -> Result<FmaWitness, OpError> {
    let kernel = MoeRecipe::preset("ascend_v2").ok_or_else(|| failed("no preset"))?;
    let fused = MoeRecipe {
        accumulator: Accumulator::FusedMultiplyAdd,
        ..kernel
    };
    let (mantissa_bits, d_exp) = if dtype == ElemType::F16 {
        (10, -14)
    } else {
        (7, -17)
    };
    let k = g.len();
    let mut x: Vec<u16> = (0..h)
        .map(|_| encode(dtype, 2.0 * ctx.unit() - 1.0))
        .collect();
    let mut cols: Vec<usize> = (0..h).collect();
    ctx.shuffle(&mut cols);
    let cols = &cols[..CONSTRUCTION_COLUMNS];
    for _ in 0..WITNESS_DRAWS {
        let b = 1.0 + (2 * ctx.below(1 << 22) + 1) as f64 * pow2(-23);
        let d = (16 + ctx.below(16)) as f64 * pow2(d_exp - 4 + ctx.below(2) as i32);
        let a = d - b;
        let mut w = vec![0.0f32; k];
        w[0] = (a / g[0] as f64) as f32;
        w[1] = (b / g[1] as f64) as f32;
        if w[0] as f64 * g[0] as f64 != a || w[1] as f64 * g[1] as f64 != b {
            return Err(failed(format!(
                "order_witnesses: weights {a} / {} and {b} / {} are not exact in f32",
                g[0], g[1]
            )));
        }
        let mut all = true;
        for &j in cols {
            let mut hit = false;
            for _ in 0..WITNESS_DRAWS {
                let sign = if ctx.below(2) == 0 { 1.0 } else { -1.0 };
                let frac = ctx.below(1 << mantissa_bits) as f64 * pow2(-mantissa_bits);
                let xb = encode(dtype, sign * (1.0 + frac));
                let xv = decode(dtype, xb);
                let ys: Vec<f32> = g
                    .iter()
                    .map(|&gk| {
                        decode(
                            dtype,
                            round_f32(dtype, xv * gk, RoundingMode::NearestTiesToEven),
                        )
                    })
                    .collect();
                if combine_element(&kernel, dtype, &ys, &w, &[])
                    != combine_element(&fused, dtype, &ys, &w, &[])
                {
                    x[j] = xb;
                    hit = true;
                    break;
                }
            }
            if !hit {
                all = false;
                break;
            }
        }
        if all {
            return Ok(FmaWitness { x, w });
        }
    }
    Err(failed(format!(
        "order_witnesses: no fused multiply-add witness in {WITNESS_DRAWS} draws of weights"
    )))
}

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

impl PresetFamily for MoeDispatchCombine {
    type Case = Case;
    type Recipe = MoeRecipe;
    const PRESETS: &'static [&'static str] = &PRESETS;

    fn case(&self, v: &serde_json::Value) -> Result<Case, OpError> {
        let p: Params = parse_params(OP, v)?;
        let dtype = super::x_dtype_16(OP, &p.dtype)?;
        if p.ranks < 2 || p.ranks > 1024 {
            return Err(invalid("ranks", "2..=1024 (ep_world_size)"));
        }
        if p.bs == 0 || p.bs > 512 {
            return Err(invalid(
                "bs",
                "1..=512 tokens per rank (the API's BS range)",
            ));
        }
        if p.hidden == 0 || !p.hidden.is_multiple_of(32) || p.hidden > 10240 {
            return Err(invalid(
                "hidden",
                format!("{}: a positive multiple of 32, at most 10240", p.hidden),
            ));
        }
        if p.shared_ranks >= p.ranks {
            return Err(invalid(
                "shared_ranks",
                "below ranks: at least one rank holds routed experts",
            ));
        }
        if p.shared_ranks == 0 && p.shared_experts != 0 {
            return Err(invalid(
                "shared_experts",
                "shared experts need shared ranks (shared_ranks > 0)",
            ));
        }
        if p.shared_ranks > 0
            && (p.shared_experts == 0
                || p.shared_experts > 4
                || !p.shared_ranks.is_multiple_of(p.shared_experts))
        {
            return Err(invalid(
                "shared_experts",
                "1..=4, dividing shared_ranks (shared_expert_rank_num % shared_expert_num == 0)",
            ));
        }
        let routed = p.ranks - p.shared_ranks;
        if p.experts == 0 || !p.experts.is_multiple_of(routed) || p.experts > 1024 {
            return Err(invalid(
                "experts",
                format!(
                    "{}: 1..=1024 and a multiple of the routed ranks ({routed}): moe_expert_num % (ep_world_size - shared_expert_rank_num) == 0",
                    p.experts
                ),
            ));
        }
        if p.top_k == 0 || p.top_k > 8 || p.top_k > p.experts {
            return Err(invalid("top_k", "1..=8 and at most experts"));
        }
        if p.quant_mode != 0 && p.quant_mode != 2 {
            return Err(invalid(
                "quant_mode",
                format!(
                    "{}: 0 (none) or 2 (per-token dynamic INT8); static quantisation is not modelled",
                    p.quant_mode
                ),
            ));
        }
        if p.smooth && p.quant_mode != 2 {
            return Err(invalid("smooth", "smooth scales need quant_mode 2"));
        }
        if p.expert_token_nums_type > 1 {
            return Err(invalid(
                "expert_token_nums_type",
                "0 (running sums) or 1 (counts)",
            ));
        }
        let mask = p.active.is_some();
        let active = p.active.unwrap_or_else(|| vec![p.bs; p.ranks]);
        if active.len() != p.ranks {
            return Err(invalid(
                "active",
                format!("{} counts for {} ranks", active.len(), p.ranks),
            ));
        }
        if let Some((r, a)) = active.iter().enumerate().find(|(_, a)| **a > p.bs) {
            return Err(invalid(
                "active",
                format!("rank {r}: {a} active tokens of {}", p.bs),
            ));
        }
        let elems = p
            .ranks
            .checked_mul(p.bs)
            .and_then(|n| n.checked_mul(p.hidden))
            .and_then(|n| n.checked_mul(p.top_k + p.shared_experts));
        if elems.is_none_or(|n| n > 1 << 30) {
            return Err(invalid(
                "ranks/bs/hidden/top_k",
                "more than 2^30 received elements",
            ));
        }
        Ok(Case {
            ranks: p.ranks,
            bs: p.bs,
            hidden: p.hidden,
            experts: p.experts,
            top_k: p.top_k,
            shared_experts: p.shared_experts,
            shared_ranks: p.shared_ranks,
            local: p.experts / routed,
            quant: p.quant_mode == 2,
            smooth: p.smooth,
            dtype,
            cumsum: p.expert_token_nums_type == 0,
            active,
            mask,
        })
    }

    fn run_oracle(
        &self,
        c: &Case,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let inp = self.decoded(c, inputs)?;
        let kernel = MoeRecipe::preset("ascend_v2").ok_or_else(|| failed("no preset"))?;
        // The routing is exact: the kernel's rows, with exact payloads.
        let rows = self.dispatch(c, &kernel, &inp, threads);
        let (h, k, ns) = (c.hidden, c.top_k, c.shared_experts);
        let slots = k + ns;
        let n = c.rows();
        let flat: Vec<&Row> = rows.iter().flatten().collect();
        // Exact payload of every row: (values, scale) with y exact integers when quantised.
        let exact: Vec<(Vec<f64>, f64)> = map_tasks(flat.len(), threads, |i| {
            let row = flat[i];
            let base = (row.source * c.bs + row.token) * h;
            if c.quant {
                let srow = if row.slot >= k {
                    row.slot - k
                } else {
                    row.gain
                };
                let v: Vec<f64> = (0..h)
                    .map(|j| {
                        let a = decode(c.dtype, inp.x[base + j]) as f64;
                        match inp.smooth.as_ref() {
                            Some(sm) => a * sm[srow * h + j] as f64,
                            None => a,
                        }
                    })
                    .collect();
                let (scale, y) = oracle_row(&v);
                (y.into_iter().map(f64::from).collect(), scale)
            } else {
                (
                    (0..h)
                        .map(|j| decode(c.dtype, inp.x[base + j]) as f64)
                        .collect(),
                    0.0,
                )
            }
        });
        let mut index = vec![usize::MAX; c.ranks * c.bs * slots];
        for (i, row) in flat.iter().enumerate() {
            index[(row.source * c.bs + row.token) * slots + row.slot] = i;
        }
        let mut expand = Vec::with_capacity(n * h);
        let mut scales = Vec::with_capacity(n);
        for (v, s) in &exact {
            expand.extend_from_slice(v);
            scales.push(*s);
        }
        let y_exact = |i: usize, j: usize| -> f64 {
            let g = decode(c.dtype, inp.gain[flat[i].gain]) as f64;
            let (v, s) = &exact[i];
            let deq = if c.quant { v[j] * s } else { v[j] };
            deq * g
        };
        let tokens: Vec<(usize, usize)> = (0..c.ranks)
            .flat_map(|s| (0..c.active[s]).map(move |t| (s, t)))
            .collect();
        let out_rows: Vec<Vec<f64>> = map_tasks(tokens.len(), threads, |i| {
            let (s, t) = tokens[i];
            (0..h)
                .map(|j| {
                    let mut acc = 0.0f64;
                    for kk in 0..k {
                        let at = index[(s * c.bs + t) * slots + kk];
                        acc += inp.weights[(s * c.bs + t) * k + kk] as f64 * y_exact(at, j);
                    }
                    for si in 0..ns {
                        acc += y_exact(index[(s * c.bs + t) * slots + k + si], j);
                    }
                    acc
                })
                .collect()
        });
        let nums = self.token_nums(c, &kernel, &inp, &rows);
        let mut m = TensorMap::new();
        m.insert("expand_x".into(), Tensor::of_f64(vec![n, h], &expand));
        if c.quant {
            m.insert("dynamic_scales".into(), Tensor::of_f64(vec![n], &scales));
        }
        m.insert(
            "expert_token_nums".into(),
            Tensor::of_f64(
                vec![nums.len()],
                &nums.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            ),
        );
        let out: Vec<f64> = out_rows.into_iter().flatten().collect();
        m.insert(
            "out".into(),
            Tensor::of_f64(vec![c.active_tokens(), h], &out),
        );
        Ok(m)
    }

    fn run_recipe(
        &self,
        c: &Case,
        r: &MoeRecipe,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let inp = self.decoded(c, inputs)?;
        let rows = self.dispatch(c, r, &inp, threads);
        let (h, k, ns) = (c.hidden, c.top_k, c.shared_experts);
        let slots = k + ns;
        // Where each (source, token, slot) row landed.
        let mut index = vec![usize::MAX; c.ranks * c.bs * slots];
        let mut flat: Vec<&Row> = Vec::with_capacity(c.rows());
        for rr in &rows {
            for row in rr {
                index[(row.source * c.bs + row.token) * slots + row.slot] = flat.len();
                flat.push(row);
            }
        }
        let n = c.rows();
        if flat.len() > n {
            return Err(failed(format!("{} rows received, {n} sent", flat.len())));
        }
        // The expert outputs of every received row.
        let outs: Vec<Vec<f32>> =
            map_tasks(flat.len(), threads, |i| self.expert_out(c, &inp, flat[i]));
        // expand_x and dynamic_scales, each rank's segment at its fixed offset.
        let mut seg = Vec::with_capacity(c.ranks);
        {
            // Rows a rank should receive with the kernel's placement (its segment length).
            let kernel = MoeRecipe::preset("ascend_v2").ok_or_else(|| failed("no preset"))?;
            let mut counts = vec![0usize; c.ranks];
            let ps = c.per_shared();
            for s in 0..c.ranks {
                for t in 0..c.active[s] {
                    for kk in 0..k {
                        let e = inp.ids[(s * c.bs + t) * k + kk] as usize;
                        counts[c.place(e, kernel.placement).0] += 1;
                    }
                    for i in 0..ns {
                        counts[i * ps + s % ps] += 1;
                    }
                }
            }
            // A recipe that moves rows between ranks keeps the total; segments follow the
            // rows it actually delivered when they do not fit the kernel's counts.
            let delivered: Vec<usize> = rows.iter().map(|rr| rr.len()).collect();
            let moved = delivered.iter().zip(&counts).any(|(a, b)| a > b);
            let lens = if moved { delivered } else { counts };
            let mut off = 0;
            for len in lens {
                seg.push(off);
                off += len;
            }
        }
        let mut expand_bits = vec![0u16; n * h];
        let mut expand_q = vec![0i8; n * h];
        let mut dyn_scales = vec![0f32; n];
        for (d, rr) in rows.iter().enumerate() {
            for (i, row) in rr.iter().enumerate() {
                let at = seg[d] + i;
                if at >= n {
                    return Err(failed("a rank's rows overflow the expand buffer"));
                }
                if c.quant {
                    expand_q[at * h..(at + 1) * h].copy_from_slice(&row.q);
                    dyn_scales[at] = row.scale;
                } else {
                    expand_bits[at * h..(at + 1) * h].copy_from_slice(&row.data);
                }
            }
        }
        // The combine, per active token.
        let tokens: Vec<(usize, usize)> = (0..c.ranks)
            .flat_map(|s| (0..c.active[s]).map(move |t| (s, t)))
            .collect();
        let dtype = c.dtype;
        let out_rows: Vec<Vec<u16>> = map_tasks(tokens.len(), threads, |i| {
            let (s, t) = tokens[i];
            let w = &inp.weights[(s * c.bs + t) * k..(s * c.bs + t + 1) * k];
            let y_of = |slot: usize, j: usize| -> f32 {
                let at = index[(s * c.bs + t) * slots + slot];
                if at == usize::MAX {
                    0.0
                } else {
                    outs[at][j]
                }
            };
            let mut ys = [0.0f32; MAX_TOP_K];
            let mut shared = [0.0f32; MAX_SHARED];
            (0..h)
                .map(|j| {
                    for (kk, y) in ys.iter_mut().enumerate().take(k) {
                        *y = y_of(kk, j);
                    }
                    for (si, y) in shared.iter_mut().enumerate().take(ns) {
                        *y = y_of(k + si, j);
                    }
                    combine_element(r, dtype, &ys[..k], w, &shared[..ns])
                })
                .collect()
        });
        let out: Vec<u16> = out_rows.into_iter().flatten().collect();
        let mut m = TensorMap::new();
        if c.quant {
            m.insert("expand_x".into(), Tensor::from_i8(vec![n, h], &expand_q));
            m.insert(
                "dynamic_scales".into(),
                Tensor::from_f32(vec![n], &dyn_scales),
            );
        } else {
            m.insert(
                "expand_x".into(),
                Tensor::from_bits16(dtype, vec![n, h], &expand_bits),
            );
        }
        m.insert(
            "expert_token_nums".into(),
            i64_tensor(self.token_nums(c, r, &inp, &rows)),
        );
        m.insert(
            "out".into(),
            Tensor::from_bits16(dtype, vec![c.active_tokens(), h], &out),
        );
        Ok(m)
    }

    /// Makes every regime of `regimes` true (docs/suites.md):
    /// - `moe_routing_edges`: a routed rank none of whose experts any active token picks (it
    ///   receives nothing); on another routed rank B, local expert 0 picked by nobody (an
    ///   expert with no rows, first in B's receive loop); on a source rank with two or more
    ///   active tokens, token 0 sends all K rows to B (local experts 1..=K) and token 1 sends
    ///   one of them to B's local expert 1 too (so B's rows by expert differ from its rows by
    ///   arrival); every other active token draws K distinct experts off the empty rank and
    ///   B's expert 0; token 0's weights are all 3/4 (their sum, 3K/4, is never 1).
    /// - `moe_combine_order` (quant_mode 0, no shared experts): on one token, 8 columns of x
    ///   are 1 and the weights make the products `1 + 2^-8, 2^-24, 2^-24, 0, ...` (the gains are
    ///   powers of two, so the weights are exact): k order rounds to 1 in bf16, the reverse
    ///   order to 1 + 2^-7; on another, products `1 + 2^-8, 2^-9, 0, ...`: an f32 sum rounds
    ///   to 1 + 2^-7, a sum rounded to the dtype per step to 1. The first is an exact tie of
    ///   the final cast, so its tie rule is judged too.
    /// - `rounding_ties` (quant_mode 2): on 2 tokens a row max `A = 127 * 2^-p` and 8 exact .5
    ///   ties of the quantisation's cast at columns whose smooth scale (every row) is 1/2.
    fn impose(
        &self,
        c: &Case,
        regimes: &[Regime],
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError> {
        let (bs, h, k) = (c.bs, c.hidden, c.top_k);
        let dtype = c.dtype;
        let mut x = m
            .get("x")
            .ok_or_else(|| failed("no x"))?
            .bits16()
            .map_err(failed)?;
        let mut ids: Vec<i32> = m
            .get("expert_ids")
            .ok_or_else(|| failed("no expert_ids"))?
            .to_i64_vec()
            .map_err(failed)?
            .into_iter()
            .map(|v| v as i32)
            .collect();
        let mut wts = m
            .get("expert_scales")
            .ok_or_else(|| failed("no expert_scales"))?
            .to_f32_vec()
            .map_err(failed)?;
        let gain = m
            .get("expert_gain")
            .ok_or_else(|| failed("no expert_gain"))?
            .bits16()
            .map_err(failed)?;
        let mut smooth = match m.get("scales") {
            Some(t) => Some(t.to_f32_vec().map_err(failed)?),
            None => None,
        };
        // Active tokens not yet taken by a construction.
        let mut free: Vec<(usize, usize)> = (0..c.ranks)
            .flat_map(|s| (0..c.active[s]).map(move |t| (s, t)))
            .collect();
        if regimes.contains(&Regime::MoeRoutingEdges) {
            let routed = c.ranks - c.shared_ranks;
            let empty = ctx.below(routed as u64) as usize;
            let busy = (empty + 1 + ctx.below(routed as u64 - 1) as usize) % routed;
            let e_none = busy * c.local;
            let allowed: Vec<usize> = (0..c.experts)
                .filter(|&e| e / c.local != empty && e != e_none)
                .collect();
            let sources: Vec<usize> = (0..c.ranks).filter(|&s| c.active[s] >= 2).collect();
            let src = sources[ctx.below(sources.len() as u64) as usize];
            for s in 0..c.ranks {
                for t in 0..c.active[s] {
                    let row = &mut ids[(s * bs + t) * k..(s * bs + t + 1) * k];
                    if s == src && t == 0 {
                        let mut locals: Vec<usize> = (1..c.local).collect();
                        ctx.shuffle(&mut locals);
                        let mut pick: Vec<usize> = locals[..k].to_vec();
                        // Local expert 1 first among them is not required: token 1 picks
                        // local 1, which token 0 holds.
                        if !pick.contains(&1) {
                            pick[0] = 1;
                        }
                        for (i, l) in pick.iter().enumerate() {
                            row[i] = (busy * c.local + l) as i32;
                        }
                        continue;
                    }
                    let mut pool = allowed.clone();
                    for i in 0..k {
                        let j = i + ctx.below((pool.len() - i) as u64) as usize;
                        pool.swap(i, j);
                        row[i] = pool[i] as i32;
                    }
                    if s == src && t == 1 {
                        let want = (busy * c.local + 1) as i32;
                        if !row.contains(&want) {
                            row[ctx.below(k as u64) as usize] = want;
                        }
                    }
                }
            }
            for kk in 0..k {
                wts[(src * bs) * k + kk] = 0.75;
            }
            free.retain(|&(s, t)| !(s == src && t < 2));
        }
        ctx.shuffle(&mut free);
        let mut next = free.into_iter();
        let mut take = || {
            next.next()
                .ok_or_else(|| failed("out of tokens (checked before)"))
        };
        for &r in regimes {
            match r {
                Regime::MoeCombineOrder => {
                    let mut cols: Vec<usize> = (0..h).collect();
                    ctx.shuffle(&mut cols);
                    let cols = &cols[..CONSTRUCTION_COLUMNS];
                    // Half an ulp of the dtype at 1: bf16 2^-8, f16 2^-11.
                    let tie = if dtype == ElemType::F16 {
                        pow2(-11)
                    } else {
                        pow2(-8)
                    };
                    let order = [1.0 + tie, pow2(-24), pow2(-24)];
                    let precision = [1.0 + tie, tie / 2.0];
                    let targets: [&[f64]; 2] = [&order, &precision];
                    for prods in targets {
                        let (s, t) = take()?;
                        let one = encode(dtype, 1.0);
                        for &j in cols {
                            x[(s * bs + t) * h + j] = one;
                        }
                        for kk in 0..k {
                            let e = ids[(s * bs + t) * k + kk] as usize;
                            let g = decode(dtype, gain[c.shared_experts + e]) as f64;
                            let p = prods.get(kk).copied().unwrap_or(0.0);
                            let wv = p / g;
                            if wv as f32 as f64 != wv {
                                return Err(failed(format!(
                                    "moe_combine_order: weight {wv} is not exact in f32"
                                )));
                            }
                            wts[(s * bs + t) * k + kk] = wv as f32;
                        }
                    }
                }
                Regime::OrderWitnesses => {
                    for _ in 0..WITNESS_TOKENS {
                        let (s, t) = take()?;
                        let g: Vec<f32> = (0..k)
                            .map(|kk| {
                                let e = ids[(s * bs + t) * k + kk] as usize;
                                decode(dtype, gain[c.shared_experts + e])
                            })
                            .collect();
                        let found = fma_witness(dtype, &g, h, ctx)?;
                        x[(s * bs + t) * h..(s * bs + t + 1) * h].copy_from_slice(&found.x);
                        wts[(s * bs + t) * k..(s * bs + t + 1) * k].copy_from_slice(&found.w);
                    }
                }
                Regime::RoundingTies => {
                    let mut cols: Vec<usize> = (0..h).collect();
                    ctx.shuffle(&mut cols);
                    let cols: Vec<usize> = cols[..=TIES_PER_ROW].to_vec();
                    let sv = if c.smooth { 0.5f64 } else { 1.0 };
                    if let Some(sm) = smooth.as_mut() {
                        for e in 0..c.shared_experts + c.experts {
                            for &j in &cols {
                                sm[e * h + j] = 0.5;
                            }
                        }
                    }
                    let quant = DqRecipe::kernel(ScaleForm::QuotientThenReciprocal);
                    for _ in 0..TIE_ROWS {
                        let (s, t) = take()?;
                        // f16 keeps 2^(-p-1) normal and 127 * 2^-p finite for p in -3..=10.
                        let p = ctx.below(14) as i32 - 3;
                        let a = 127.0 * pow2(-p);
                        let base = (s * bs + t) * h;
                        for j in 0..h {
                            let u = 2.0 * ctx.unit() - 1.0;
                            x[base + j] = encode(dtype, u * 0.95 * a);
                        }
                        let (_, factor) = quant.scale_and_factor(a as f32);
                        let put = |x: &mut Vec<u16>, j: usize, v: f64| -> Result<(), OpError> {
                            let xv = v / sv;
                            let b = encode(dtype, xv);
                            if decode(dtype, b) as f64 != xv {
                                return Err(failed(format!(
                                    "{xv} is not exact in {}",
                                    dtype.name()
                                )));
                            }
                            x[base + j] = b;
                            Ok(())
                        };
                        let sign =
                            |ctx: &mut GenContext| if ctx.below(2) == 0 { 1.0 } else { -1.0 };
                        let sg = sign(ctx);
                        put(&mut x, cols[0], sg * a)?;
                        for &j in &cols[1..] {
                            let kk = 2 * ctx.below(63) as i64;
                            let v = sign(ctx) * (2 * kk + 1) as f64 * pow2(-p - 1);
                            put(&mut x, j, v)?;
                            let q = quant.scaled(v as f32, factor) as f64;
                            if q.abs() != kk as f64 + 0.5 {
                                return Err(failed(format!(
                                    "rounding_ties: {v} scaled to {q}, not the tie {kk}.5"
                                )));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        let put_back = |m: &mut TensorMap, name: &str, t: Tensor| {
            m.insert(name.to_string(), t);
        };
        let xs = m.get("x").map(|t| t.shape.clone()).unwrap_or_default();
        put_back(m, "x", Tensor::from_bits16(dtype, xs, &x));
        let is = m
            .get("expert_ids")
            .map(|t| t.shape.clone())
            .unwrap_or_default();
        put_back(m, "expert_ids", Tensor::from_i32(is, &ids));
        let ws = m
            .get("expert_scales")
            .map(|t| t.shape.clone())
            .unwrap_or_default();
        put_back(m, "expert_scales", Tensor::from_f32(ws, &wts));
        if let Some(sm) = smooth {
            let ss = m.get("scales").map(|t| t.shape.clone()).unwrap_or_default();
            put_back(m, "scales", Tensor::from_f32(ss, &sm));
        }
        Ok(())
    }

    fn recipe_preset(_: &Case, name: &str) -> Option<MoeRecipe> {
        MoeRecipe::preset(name)
    }
}
