//! The attention half's regimes of `pa_decode_int8`: the regimes of the other attention
//! families (moderate row maxima, subnormal value columns, ties at the P and output casts),
//! built on the INT8 cache's own codes, so that the attention recipe meets them on the values
//! it dequantises.
//!
//! The attention recipe reads `(y + o) * s` (f32) for every valid key, so a construction can
//! only choose codes `y` (the old cache's, written as they are, and the new rows', written
//! through the quantise-on-write) and, per channel, a scale and an offset. Every construction
//! steers a query slot through *steering channels* of its KV head (key channels no other
//! construction of that head uses): their scale is set to a power of two `2^-k` and their
//! offset to a nonzero integer (0 without offsets), so that a code `y` dequantises to `(y + o)
//! 2^-k` exactly, a new row's value `(y + o) 2^-k` is exact in the dtype and quantises back
//! to `y`, and the code `-o` dequantises to exactly 0. The query of the slot is zero except on
//! its steering channels, so its scores are exact functions of those codes whatever the order
//! of the QK reduction (each product is exact in f32, and the few nonzero ones add exactly;
//! checked per draw). All need per-channel key parameters (`key_antiquant_mode = 0`).
//!
//! - `moderate_late_max` / `moderate_early_max`: per batch entry with keys on both sides of
//!   the end `T` of the recipe's first KV tile and per KV head, one steering channel; the
//!   query of every head of the group is `A e_c`, so the score of key `x` is `u (y_x + o)`
//!   with `u = scale A 2^-k` chosen so that code 127 scores about 16. The maximum `j` gets 127,
//!   the runner-up `e` the code whose score is the maximum's less a lead drawn in 6..8 (late:
//!   `j` at `T` or later, `e` before) or 1..2 (early: `j` before `T`, `e` after), every other
//!   key a code drawn below `e`'s, so the earlier (later) tiles still weigh.
//! - `subnormal_outputs`: two value channels per KV head get the scale `2^-127` (bf16) or
//!   `2^-15` (f16), subnormals of the dtype whose reciprocal is still finite in it, and codes
//!   with `|y + o| < 2` of one sign (offsets `k/16`): every dequantised value of the column is
//!   a nonzero subnormal of the dtype of that sign, and so is every output of the column.
//!   Needs per-channel value parameters.
//! - `attention_ties`: output ties, where one slot's query `a e_c` gives a set of 2^p keys of
//!   one 16-key block score 0 (code `-o`) and every other key of the batch entry a score below
//!   -256 (code -128), so the output is the mean of the set's values, exactly; codes of the
//!   set's chosen value columns are drawn until that mean is a tie of the output cast (its two
//!   tie rules round it apart; the sum exact in any order, checked). P ties, where a slot's
//!   query `a0 e_c0 + a1 e_c1 + a2 e_c2 + a3 e_c3` gives one key of a block score 0 (the
//!   maximum, its value row dequantising to about 0), up to 8 keys of the block a score drawn
//!   through the codes of c1..c3 until the recipe's own P is a tie of its cast, and every
//!   other key below -256 through c0. Needs a recipe that does not split the keys over
//!   vector cores on this shape (a combine would round the tie away).

use super::{pow2, quantise, C8Recipe, Case};
use crate::attention::online::SoftmaxArith;
use crate::attention::recipe::{ORescale, ScorePrecision};
use crate::attention::Recipe;
use crate::formats::{DType, Rounding};
use crate::ops::regime::{Regime, MODERATE_EARLY_MARGIN, MODERATE_LATE_GAP};
use crate::ops::{ElemType, GenContext, OpError, Tensor, TensorMap};

use super::{dequantise_one, param_tensor, OP};

/// Keys per block inside which a tie construction stays.
const BLOCK: usize = 16;
/// P ties planted per slot (at most), and the total the construction aims at.
const P_TIES_PER_SLOT: usize = 8;
const P_TIES_TARGET: usize = 16;
/// The fewest P ties and output ties `attention_ties` promises.
pub(crate) const TIES_FLOOR: usize = 8;
/// Value columns carrying output ties per slot (at most).
const TIE_COLUMNS: usize = 16;
/// Query heads sharing one output-tie key set (at most).
const OUT_SLOTS: usize = 4;
/// Candidates tried per tie before a column or key is given up.
const MAX_DRAWS: usize = 1 << 20;
/// An excluded key's scaled score is at most minus this (its exp is exactly 0 in f32).
const EXCLUDE: f64 = 300.0;
/// The score code 127 of a moderate-maximum steering channel aims at.
const MODERATE_TARGET: f64 = 16.0;

fn regime_err(r: Regime, message: impl Into<String>) -> OpError {
    OpError::Regime {
        op: OP.into(),
        regime: r.name().into(),
        message: message.into(),
    }
}

/// The attention-half regimes of this family.
pub(crate) fn is_attention_half(r: Regime) -> bool {
    r.is_moderate_max() || matches!(r, Regime::SubnormalOutputs | Regime::AttentionTies)
}

/// Shape-only checks of the attention-half regimes (before any input exists).
pub(crate) fn check(c: &Case, regimes: &[Regime]) -> Result<(), OpError> {
    let half: Vec<Regime> = regimes
        .iter()
        .copied()
        .filter(|&r| is_attention_half(r))
        .collect();
    for &r in &half {
        if let Some(other) = regimes.iter().find(|&&o| o != r) {
            return Err(regime_err(
                r,
                format!(
                    "cannot be combined with {} in one case (both rebuild codes, scales or query rows); declare it in another case",
                    other.name()
                ),
            ));
        }
        let key_channel = r != Regime::SubnormalOutputs;
        if key_channel && c.key_mode != 0 {
            return Err(regime_err(
                r,
                "needs per-channel key scales (key_antiquant_mode = 0): the construction steers key channels whose scale it sets",
            ));
        }
        if r == Regime::SubnormalOutputs && (c.value_mode != 0 || c.plan.g.head_dim < 2) {
            return Err(regime_err(
                r,
                "needs per-channel value scales (value_antiquant_mode = 0) and head_dim >= 2: two value channels are scaled into the subnormal range",
            ));
        }
        if r == Regime::AttentionTies && !c.plan.g.lk.iter().any(|&l| old_len(c, l) >= BLOCK) {
            return Err(regime_err(
                r,
                format!("needs a sequence with a whole {BLOCK}-key block of old (not new) tokens"),
            ));
        }
    }
    Ok(())
}

/// Old (already cached) positions of a sequence of `len` keys.
fn old_len(c: &Case, len: usize) -> usize {
    len - c.p.new_tokens
}

/// One of the two caches: the new rows' values, the old cache's codes and the parameters.
struct Side {
    x: Vec<f64>,
    cache: Vec<i8>,
    scale: Vec<f64>,
    offset: Option<Vec<f64>>,
    mode: u32,
}

/// What the tie constructions have fixed: (batch, KV head, key) value rows and (batch, query
/// head) slots.
#[derive(Default)]
struct Taken {
    rows: Vec<(usize, usize, usize)>,
    heads: Vec<(usize, usize)>,
}

/// The case's inputs being rebuilt, with the recipe the codes are read under.
struct Work<'a> {
    c: &'a Case,
    r: C8Recipe,
    table: Vec<i64>,
    q: Vec<f64>,
    sides: [Side; 2],
    /// Key channels taken per KV head.
    taken: Vec<Vec<bool>>,
}

const KEY: usize = 0;
const VALUE: usize = 1;
const NAMES: [&str; 2] = ["key", "value"];

fn get<'m>(m: &'m TensorMap, name: &str) -> Result<&'m Tensor, OpError> {
    m.get(name).ok_or_else(|| OpError::MissingInput {
        op: OP.into(),
        input: name.into(),
    })
}

impl<'a> Work<'a> {
    fn read(c: &'a Case, r: C8Recipe, m: &TensorMap) -> Result<Work<'a>, OpError> {
        let table = get(m, "block_table")?
            .to_i64_vec()
            .map_err(|e| super::failed(e.to_string()))?;
        let side = |which: &str, mode: u32| -> Result<Side, OpError> {
            Ok(Side {
                x: get(m, which)?.to_f64_vec(),
                cache: super::i8_values(get(m, &format!("{which}_cache_in"))?),
                scale: get(m, &format!("{which}_antiquant_scale"))?.to_f64_vec(),
                offset: m
                    .get(&format!("{which}_antiquant_offset"))
                    .map(|t| t.to_f64_vec()),
                mode,
            })
        };
        Ok(Work {
            c,
            r,
            table,
            q: get(m, "query")?.to_f64_vec(),
            sides: [side("key", c.key_mode)?, side("value", c.value_mode)?],
            taken: vec![vec![false; c.plan.g.head_dim]; c.plan.g.kv_heads],
        })
    }

    fn write(self, m: &mut TensorMap) -> Result<(), OpError> {
        let g = &self.c.plan.g;
        let et = ElemType::from(g.dtype);
        m.insert(
            "query".into(),
            Tensor::round_values(et, g.q_shape(), &self.q, Rounding::RNE),
        );
        let cshape = self.c.p.cache_layout.shape(&self.c.cache());
        for (which, s) in NAMES.iter().zip(self.sides) {
            m.insert(
                (*which).into(),
                Tensor::round_values(
                    et,
                    vec![self.c.rows(), g.kv_heads, g.head_dim],
                    &s.x,
                    Rounding::RNE,
                ),
            );
            m.insert(
                format!("{which}_cache_in"),
                Tensor::from_i8(cshape.clone(), &s.cache),
            );
            for (name, vals) in [("scale", Some(&s.scale)), ("offset", s.offset.as_ref())] {
                let name = format!("{which}_antiquant_{name}");
                if let (Some(vals), Some(t)) = (vals, m.get(&name)) {
                    let t = param_tensor(t.dtype, t.shape.clone(), vals);
                    m.insert(name, t);
                }
            }
        }
        Ok(())
    }

    fn param_index(&self, side: usize, b: usize, pos: usize, h: usize, e: usize) -> usize {
        if self.sides[side].mode == 0 {
            h * self.c.plan.g.head_dim + e
        } else {
            b * self.c.token_len() + pos
        }
    }

    fn params(&self, side: usize, b: usize, pos: usize, h: usize, e: usize) -> (f32, f32) {
        let i = self.param_index(side, b, pos, h, e);
        let s = &self.sides[side];
        (
            s.scale[i] as f32,
            s.offset.as_ref().map_or(0.0, |o| o[i] as f32),
        )
    }

    /// Sets channel `e` of KV head `h` (per-channel parameters) to scale `s`, offset `o`.
    fn set_channel(&mut self, side: usize, h: usize, e: usize, s: f64, o: f64) {
        let i = h * self.c.plan.g.head_dim + e;
        let sd = &mut self.sides[side];
        sd.scale[i] = s;
        if let Some(off) = sd.offset.as_mut() {
            off[i] = o;
        }
    }

    /// A steering channel of KV head `h`: a free key channel, its scale `2^-k` (k in 5..=7)
    /// and its offset a nonzero integer in [-4, 4] (0 without offsets).
    fn steering(&mut self, h: usize, ctx: &mut GenContext) -> Option<(usize, f64, f64)> {
        let free: Vec<usize> = (0..self.c.plan.g.head_dim)
            .filter(|&e| !self.taken[h][e])
            .collect();
        if free.is_empty() {
            return None;
        }
        let e = free[ctx.below(free.len() as u64) as usize];
        self.taken[h][e] = true;
        let s = pow2(-(5 + ctx.below(3) as i32));
        let o = if self.sides[KEY].offset.is_some() {
            let k = 1 + ctx.below(4) as i32;
            if ctx.below(2) == 0 {
                k as f64
            } else {
                -k as f64
            }
        } else {
            0.0
        };
        self.set_channel(KEY, h, e, s, o);
        Some((e, s, o))
    }

    /// Where key `pos` of sequence `b` lives: `Ok(cache offset)` for an old token, `Err(new
    /// row)` for a token this step writes.
    fn place(&self, b: usize, pos: usize, h: usize, e: usize) -> Result<usize, usize> {
        let c = self.c;
        let g = &c.plan.g;
        let old = old_len(c, g.lk[b]);
        if pos < old {
            let cg = c.cache();
            let blk = self.table[b * c.plan.max_blocks + pos / cg.block_size] as usize;
            Ok(c.p.cache_layout.offset(&cg, blk, pos % cg.block_size, h, e))
        } else {
            let row = b * c.p.new_tokens + (pos - old);
            Err((row * g.kv_heads + h) * g.head_dim + e)
        }
    }

    /// Gives element (b, pos, h, e) of `side` the code `y` (a new token through a value the
    /// write quantises back to `y`; checked).
    fn set_code(
        &mut self,
        side: usize,
        b: usize,
        pos: usize,
        h: usize,
        e: usize,
        y: i32,
    ) -> Result<(), OpError> {
        let y = y.clamp(-128, 127);
        match self.place(b, pos, h, e) {
            Ok(at) => self.sides[side].cache[at] = y as i8,
            Err(at) => {
                let (s, o) = self.params(side, b, pos, h, e);
                let dtype = self.c.plan.g.dtype;
                let x = (y as f64 + o as f64) * s as f64;
                let got = quantise(dtype, self.sides[side].mode, &self.r, x as f32, s, o);
                if dtype.quantize_f64(x, Rounding::RNE) != x || got as i32 != y {
                    return Err(super::failed(format!(
                        "the new row value ({y} + {o}) * {s} does not write back code {y}"
                    )));
                }
                self.sides[side].x[at] = x;
            }
        }
        Ok(())
    }

    /// The value the attention recipe reads at (b, pos, h, e) of `side`.
    fn value(&self, side: usize, b: usize, pos: usize, h: usize, e: usize) -> f32 {
        let (s, o) = self.params(side, b, pos, h, e);
        let y = match self.place(b, pos, h, e) {
            Ok(at) => self.sides[side].cache[at],
            Err(at) => quantise(
                self.c.plan.g.dtype,
                self.sides[side].mode,
                &self.r,
                self.sides[side].x[at] as f32,
                s,
                o,
            ),
        };
        dequantise_one(self.c.plan.g.dtype, &self.r, y as f32, s, o)
    }

    /// Sets the query of (b, head h) to `parts` (channel, value), zero elsewhere.
    fn set_query(&mut self, b: usize, h: usize, parts: &[(usize, f64)]) {
        let g = &self.c.plan.g;
        let o = g.q_offset(b, 0, h);
        for x in 0..g.head_dim {
            self.q[o + x] = 0.0;
        }
        for &(e, a) in parts {
            self.q[o + e] = a;
        }
    }

    fn round(&self, x: f64) -> f64 {
        self.c.plan.g.dtype.quantize_f64(x, Rounding::RNE)
    }

    /// The scaled score of (b, h) at key `pos`, in f64 from the values the recipe reads.
    fn score(&self, b: usize, h: usize, pos: usize) -> f64 {
        let g = &self.c.plan.g;
        let qo = g.q_offset(b, 0, h);
        let kvh = g.kv_head(h);
        g.scale as f64
            * (0..g.head_dim)
                .filter(|&e| self.q[qo + e] != 0.0)
                .map(|e| self.q[qo + e] * self.value(KEY, b, pos, kvh, e) as f64)
                .sum::<f64>()
    }
}

/// The attention recipe the case runs, on its shape (the KV tile and any split-KV).
fn attention_recipe(c: &Case, r: &C8Recipe, regime: Regime) -> Result<(Recipe, usize), OpError> {
    let attn = super::PaDecodeInt8.attention_recipe(c, r)?;
    let (recipe, tile) = attn.for_problem(&c.plan.tiling_shape(), c.p.block_size);
    if tile == 0 {
        return Err(regime_err(regime, "the recipe's KV tile is empty"));
    }
    Ok((recipe, tile))
}

/// Makes the attention-half regime of `regimes` true of `m` (see the module doc).
pub(crate) fn impose(
    c: &Case,
    regimes: &[Regime],
    m: &mut TensorMap,
    ctx: &mut GenContext,
) -> Result<(), OpError> {
    let Some(regime) = regimes.iter().copied().find(|&r| is_attention_half(r)) else {
        return Ok(());
    };
    let name = match ctx.recipe.as_deref() {
        Some(n) if n != crate::ops::ORACLE => n.to_string(),
        _ => {
            return Err(regime_err(
                regime,
                "needs a recipe preset (the construction reads the codes under the recipe's dequantisation and attention arithmetic)",
            ))
        }
    };
    let r = C8Recipe::preset(&name).ok_or_else(|| OpError::UnknownRecipe {
        op: OP.into(),
        recipe: name.clone(),
        known: super::PRESETS.join(", "),
    })?;
    let mut w = Work::read(c, r.clone(), m)?;
    match regime {
        Regime::SubnormalOutputs => subnormal(&mut w, ctx)?,
        Regime::AttentionTies => {
            let (attn, _) = attention_recipe(c, &r, regime)?;
            ties(&mut w, &attn, ctx)?;
        }
        _ => {
            let (_, tile) = attention_recipe(c, &r, regime)?;
            moderate(&mut w, regime, tile, ctx)?;
        }
    }
    w.write(m)
}

fn moderate(
    w: &mut Work,
    regime: Regime,
    tile: usize,
    ctx: &mut GenContext,
) -> Result<(), OpError> {
    let g = w.c.plan.g.clone();
    let scale = g.scale as f64;
    let late = regime == Regime::ModerateLateMax;
    // Channels per KV head, shared by every batch entry.
    let mut channels = Vec::with_capacity(g.kv_heads);
    for h in 0..g.kv_heads {
        let ch = w
            .steering(h, ctx)
            .ok_or_else(|| regime_err(regime, "no free key channel"))?;
        channels.push(ch);
    }
    let mut targets = Vec::new();
    for b in 0..g.batch {
        let lk = g.lk[b];
        if lk <= tile {
            continue;
        }
        for (h, &(e, s, o)) in channels.iter().enumerate() {
            let a = w.round(MODERATE_TARGET / (scale * (127.0 + o) * s));
            let u = scale * a * s;
            let lead = if late {
                6.0 + 2.0 * ctx.unit()
            } else {
                1.0 + ctx.unit()
            };
            let pick = |ctx: &mut GenContext, lo: usize, hi: usize| {
                lo + ctx.below((hi - lo) as u64) as usize
            };
            let (j, r) = if late {
                (pick(ctx, tile, lk), pick(ctx, 0, tile))
            } else {
                (pick(ctx, 0, tile), pick(ctx, tile, lk))
            };
            let sj = u * (127.0 + o);
            let yr = (((sj - lead) / u) - o).round() as i32;
            for x in 0..lk {
                let y = if x == j {
                    127
                } else if x == r {
                    yr
                } else {
                    -128 + ctx.below((yr + 128).max(1) as u64) as i32
                };
                w.set_code(KEY, b, x, h, e, y)?;
            }
            for hq in (0..g.heads).filter(|&hq| g.kv_head(hq) == h) {
                w.set_query(b, hq, &[(e, a)]);
                targets.push((b, hq, j));
            }
        }
    }
    if targets.is_empty() {
        return Err(regime_err(
            regime,
            format!("needs a sequence with keys on both sides of key {tile}, the end of the recipe's first KV tile"),
        ));
    }
    // The construction's promise, checked on the values the recipe reads.
    for &(b, h, j) in &targets {
        let sj = w.score(b, h, j);
        let lk = g.lk[b];
        let max_of = |r: std::ops::Range<usize>| {
            r.filter(|&x| x != j)
                .map(|x| w.score(b, h, x))
                .fold(f64::NEG_INFINITY, f64::max)
        };
        let rest = max_of(0..lk);
        let holds = if late {
            let gap = sj - max_of(0..(j / tile) * tile);
            gap >= MODERATE_LATE_GAP.0 && gap <= MODERATE_LATE_GAP.1 && sj - rest >= 5.0
        } else {
            let margin = sj - max_of(tile..lk);
            sj - rest >= MODERATE_EARLY_MARGIN.0
                && margin >= MODERATE_EARLY_MARGIN.0
                && margin <= MODERATE_EARLY_MARGIN.1
        };
        if !holds {
            return Err(super::failed(format!(
                "regime `{}`: the construction gave batch {b} head {h} a score of {sj} at key {j} (other keys up to {rest})",
                regime.name()
            )));
        }
    }
    Ok(())
}

/// The scale of a subnormal value channel: a subnormal of the dtype whose reciprocal is
/// finite in it (the write divides by it).
fn subnormal_scale(dtype: DType) -> Option<f64> {
    match dtype {
        DType::Bf16 => Some(pow2(-127)),
        DType::F16 => Some(pow2(-15)),
        DType::F32 => None,
    }
}

fn subnormal(w: &mut Work, ctx: &mut GenContext) -> Result<(), OpError> {
    let g = w.c.plan.g.clone();
    let r = Regime::SubnormalOutputs;
    let s = subnormal_scale(g.dtype).ok_or_else(|| regime_err(r, "needs bf16 or f16"))?;
    let min_normal = match g.dtype {
        DType::F16 => pow2(-14),
        _ => pow2(-126),
    };
    let offsets = w.sides[VALUE].offset.is_some();
    for h in 0..g.kv_heads {
        let c0 = ctx.below(g.head_dim as u64) as usize;
        let mut c1 = ctx.below(g.head_dim as u64 - 1) as usize;
        if c1 >= c0 {
            c1 += 1;
        }
        for (e, sign) in [(c0, 1i32), (c1, -1)] {
            let o = if offsets {
                sign as f64 * (1 + ctx.below(15)) as f64 / 16.0
            } else {
                0.0
            };
            w.set_channel(VALUE, h, e, s, o);
            for b in 0..g.batch {
                for pos in 0..g.lk[b] {
                    // |y + o| < 2 and of the column's sign: y in {0, sign} with an offset,
                    // y = sign without.
                    // A new token's code is `sign`: its value (sign + o) 2^-k is a subnormal
                    // that a flush before the write changes to another code.
                    let new = pos >= old_len(w.c, g.lk[b]);
                    let y = if offsets && !new {
                        sign * ctx.below(2) as i32
                    } else {
                        sign
                    };
                    w.set_code(VALUE, b, pos, h, e, y)?;
                    let v = w.value(VALUE, b, pos, h, e) as f64;
                    if !(v != 0.0 && v.abs() < min_normal && (v > 0.0) == (sign > 0)) {
                        return Err(super::failed(format!(
                            "subnormal_outputs: value column {e} of KV head {h} reads {v} at key {pos} of batch {b}, not a subnormal of its sign"
                        )));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Whether every partial sum of `vals`, in any order, is exact in f32 (all are multiples of
/// the finest one's last bit, and their magnitudes add up below 2^24 of it).
fn sums_exact(vals: &[f32]) -> bool {
    let granule = vals
        .iter()
        .filter(|v| **v != 0.0)
        .map(|v| {
            let b = (*v as f64).abs().to_bits();
            let exp = ((b >> 52) & 0x7ff) as i32 - 1023;
            let tz = (b & ((1u64 << 52) - 1)).trailing_zeros().min(52) as i32;
            exp - 52 + tz
        })
        .min();
    let Some(gexp) = granule else {
        return true;
    };
    let total: f64 = vals.iter().map(|v| (*v as f64).abs()).sum();
    total < pow2(gexp + 24)
}

fn ties(w: &mut Work, attn: &Recipe, ctx: &mut GenContext) -> Result<(), OpError> {
    let regime = Regime::AttentionTies;
    let g = w.c.plan.g.clone();
    if attn.split.is_some() {
        return Err(regime_err(
            regime,
            "the recipe splits the keys over vector cores on this shape (a combine rounds the ties away): use a shape with as many (batch, KV head) pairs as the SoC has vector cores, or shorter contexts",
        ));
    }
    let out_ok = g.dtype != DType::F32 && attn.o_rescale != ORescale::VectorF16;
    let p_ok = attn.score_precision == ScorePrecision::F32 && attn.p_dtype != DType::F32;
    let mut taken = Taken::default();
    let mut order: Vec<(usize, usize)> = (0..g.batch)
        .flat_map(|b| (0..g.heads).map(move |h| (b, h)))
        .filter(|&(b, _)| old_len(w.c, g.lk[b]) >= BLOCK)
        .collect();
    ctx.shuffle(&mut order);
    let mut out_ties = 0;
    if out_ok {
        // One output slot group per (batch, KV head), until the floor is passed twice over.
        for &(b, h) in &order {
            if out_ties >= 2 * TIES_FLOOR {
                break;
            }
            let kvh = g.kv_head(h);
            if taken
                .heads
                .iter()
                .any(|&(b2, h2)| b2 == b && g.kv_head(h2) == kvh)
            {
                continue;
            }
            out_ties += plant_output(w, b, h, &mut taken, ctx)?;
        }
        if out_ties < TIES_FLOOR {
            return Err(regime_err(
                regime,
                format!("only {out_ties} output ties fit (at least {TIES_FLOOR} needed)"),
            ));
        }
    }
    let mut p_ties = 0;
    if p_ok {
        for &(b, h) in &order {
            if p_ties >= P_TIES_TARGET {
                break;
            }
            if taken.heads.contains(&(b, h)) {
                continue;
            }
            p_ties += plant_p(w, b, h, attn, &mut taken, ctx)?;
        }
        if p_ties < TIES_FLOOR {
            return Err(regime_err(
                regime,
                format!("only {p_ties} P ties fit (at least {TIES_FLOOR} needed)"),
            ));
        }
    }
    if !out_ok && !p_ok {
        return Err(regime_err(
            regime,
            format!(
                "recipe `{}` has no P or output cast of an f32 value",
                attn.name
            ),
        ));
    }
    Ok(())
}

/// The query coefficient that puts code -128 of a steering channel (scale `s`, offset `o`)
/// at a scaled score below -[`EXCLUDE`]: a power of two.
fn exclusion_coefficient(w: &Work, s: f64, o: f64) -> Result<f64, OpError> {
    let scale = w.c.plan.g.scale as f64;
    let need = EXCLUDE / (scale * (128.0 - o) * s);
    let mut a = 1.0;
    while a < need {
        a *= 2.0;
    }
    if w.round(a) != a || !need.is_finite() {
        return Err(regime_err(
            Regime::AttentionTies,
            format!("the softmax scale {scale} needs query values the dtype cannot hold"),
        ));
    }
    Ok(a)
}

/// A random 16-key block of old tokens of sequence `b` whose value rows (KV head `kvh`) no
/// other construction fixed.
fn free_block(
    w: &Work,
    b: usize,
    kvh: usize,
    taken: &Taken,
    ctx: &mut GenContext,
) -> Option<Vec<usize>> {
    let old = old_len(w.c, w.c.plan.g.lk[b]);
    let mut blocks: Vec<usize> = (0..old / BLOCK).collect();
    ctx.shuffle(&mut blocks);
    blocks.into_iter().find_map(|blk| {
        let ks: Vec<usize> = (blk * BLOCK..(blk + 1) * BLOCK).collect();
        ks.iter()
            .all(|&j| !taken.rows.contains(&(b, kvh, j)))
            .then_some(ks)
    })
}

/// Output ties for query head `h` of batch `b` (and up to 3 more heads of its KV head):
/// returns the tie elements planted.
fn plant_output(
    w: &mut Work,
    b: usize,
    h: usize,
    taken: &mut Taken,
    ctx: &mut GenContext,
) -> Result<usize, OpError> {
    let g = w.c.plan.g.clone();
    let kvh = g.kv_head(h);
    let Some(block) = free_block(w, b, kvh, taken, ctx) else {
        return Ok(0);
    };
    let Some((c, s, o)) = w.steering(kvh, ctx) else {
        return Ok(0);
    };
    let a = exclusion_coefficient(w, s, o)?;
    // A set of 2^p keys of the block (p in 1..=4).
    let n = 1usize << (1 + ctx.below(4));
    let mut set = block.clone();
    ctx.shuffle(&mut set);
    set.truncate(n);
    let zero = -o as i32;
    for x in 0..g.lk[b] {
        let y = if set.contains(&x) { zero } else { -128 };
        w.set_code(KEY, b, x, kvh, c, y)?;
    }
    let mut cols: Vec<usize> = (0..g.head_dim).collect();
    ctx.shuffle(&mut cols);
    cols.truncate(TIE_COLUMNS.min(g.head_dim));
    let mut found = 0;
    for &col in &cols {
        let params: Vec<(f32, f32)> = set
            .iter()
            .map(|&j| w.params(VALUE, b, j, kvh, col))
            .collect();
        let mut hit = None;
        for _ in 0..MAX_DRAWS / 16 {
            let ys: Vec<i32> = set.iter().map(|_| ctx.below(256) as i32 - 128).collect();
            let vals: Vec<f32> = ys
                .iter()
                .zip(&params)
                .map(|(&y, &(s, o))| dequantise_one(g.dtype, &w.r, y as f32, s, o))
                .collect();
            if !sums_exact(&vals) {
                continue;
            }
            let mean = vals.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
            let even = g.dtype.quantize_f64(mean, Rounding::RNE);
            let away = g.dtype.quantize_f64(mean, Rounding::RNA);
            if even != away && mean.is_finite() {
                hit = Some(ys);
                break;
            }
        }
        if let Some(ys) = hit {
            for (&j, &y) in set.iter().zip(&ys) {
                w.set_code(VALUE, b, j, kvh, col, y)?;
            }
            found += 1;
        }
    }
    taken.rows.extend(set.iter().map(|&j| (b, kvh, j)));
    let mut heads: Vec<usize> = (0..g.heads)
        .filter(|&h2| h2 != h && g.kv_head(h2) == kvh && !taken.heads.contains(&(b, h2)))
        .collect();
    ctx.shuffle(&mut heads);
    heads.truncate(OUT_SLOTS - 1);
    heads.push(h);
    for &h2 in &heads {
        w.set_query(b, h2, &[(c, a)]);
        taken.heads.push((b, h2));
    }
    Ok(found * heads.len())
}

/// P ties for query head `h` of batch `b`: returns the tie elements planted.
fn plant_p(
    w: &mut Work,
    b: usize,
    h: usize,
    attn: &Recipe,
    taken: &mut Taken,
    ctx: &mut GenContext,
) -> Result<usize, OpError> {
    let g = w.c.plan.g.clone();
    let kvh = g.kv_head(h);
    let scale = g.scale as f64;
    let arith = SoftmaxArith::new(attn, g.scale);
    if w.taken[kvh].iter().filter(|t| !**t).count() < 4 {
        return Ok(0);
    }
    let Some(block) = free_block(w, b, kvh, taken, ctx) else {
        return Ok(0);
    };
    let mut ch = Vec::with_capacity(4);
    for _ in 0..4 {
        ch.push(w.steering(kvh, ctx).expect("four free channels"));
    }
    let a0 = exclusion_coefficient(w, ch[0].1, ch[0].2)?;
    // a1: code -128 of c1 scores about -6 (the range of the planted scores); a2 = a1 / 64.
    let mut a1 = 1.0;
    while scale * (a1 * 2.0) * (128.0 - ch[1].2) * ch[1].1 <= 6.0 {
        a1 *= 2.0;
    }
    while scale * a1 * (128.0 - ch[1].2) * ch[1].1 > 6.0 && a1 > pow2(-20) {
        a1 /= 2.0;
    }
    // a2 a power of two, a3 an odd 8-bit multiple of a2 / 256: the three terms then take
    // millions of distinct sums, enough for ties of a bf16 P (about 1 in 2^16 of them).
    let a2 = a1 / 64.0;
    let a3 = a2 * (129 + 2 * ctx.below(64)) as f64 / 256.0;
    let mut keys = block.clone();
    ctx.shuffle(&mut keys);
    let top = keys[0];
    let tie_keys: Vec<usize> = keys[1..=P_TIES_PER_SLOT].to_vec();
    for x in 0..g.lk[b] {
        if x == top {
            for &(e, _, o) in &ch {
                w.set_code(KEY, b, x, kvh, e, -o as i32)?;
            }
        } else if !tie_keys.contains(&x) {
            w.set_code(KEY, b, x, kvh, ch[0].0, -128)?;
        }
    }
    // The maximum's value row dequantises to about 0, so the output is made of the ties.
    for e in 0..g.head_dim {
        let (_, o) = w.params(VALUE, b, top, kvh, e);
        w.set_code(VALUE, b, top, kvh, e, (-o).round() as i32)?;
    }
    let coef = [a0, a1, a2, a3];
    let mut planted = 0;
    for &j in &tie_keys {
        w.set_code(KEY, b, j, kvh, ch[0].0, -ch[0].2 as i32)?;
        // Draws of (y1, y2), each with every y3 from a drawn start: one draw tries 256 sums.
        let mut hit = None;
        let term = |i: usize, y: i32| -> f32 {
            let k = (y as f64 + ch[i].2) * ch[i].1;
            (coef[i] as f32) * (k as f32)
        };
        let exact = |x: f32, y: f32| ((x + y) as f64) == (x as f64) + (y as f64);
        'search: for _ in 0..MAX_DRAWS / 256 {
            let y1 = -(ctx.below(128) as i32) - 1;
            let y2 = ctx.below(256) as i32 - 128;
            let start = ctx.below(256) as i32;
            let (t0, t1) = (term(1, y1), term(2, y2));
            if !exact(t0, t1) {
                continue;
            }
            for k in 0..256 {
                let y3 = (start + k) % 256 - 128;
                let t2 = term(3, y3);
                let dot = t0 + t1 + t2;
                if !(exact(t0, t2)
                    && exact(t1, t2)
                    && (dot as f64) == (t0 as f64) + (t1 as f64) + (t2 as f64))
                {
                    continue;
                }
                let sc = arith.score(dot);
                if !((sc as f64) < -0.01 && (sc as f64) > -6.0) {
                    continue;
                }
                let p = arith.p(sc, 0.0);
                let even = attn.p_dtype.quantize_f32(p, Rounding::RNE);
                let away = attn.p_dtype.quantize_f32(p, Rounding::RNA);
                if p > 0.0 && even != away {
                    hit = Some([y1, y2, y3]);
                    break 'search;
                }
            }
        }
        if let Some(ys) = hit {
            for i in 1..4 {
                w.set_code(KEY, b, j, kvh, ch[i].0, ys[i - 1])?;
            }
            planted += 1;
        } else {
            // Not planted: excluded like the other keys.
            w.set_code(KEY, b, j, kvh, ch[0].0, -128)?;
        }
    }
    taken.rows.extend(keys.iter().map(|&j| (b, kvh, j)));
    w.set_query(
        b,
        h,
        &[(ch[0].0, a0), (ch[1].0, a1), (ch[2].0, a2), (ch[3].0, a3)],
    );
    taken.heads.push((b, h));
    Ok(planted)
}
