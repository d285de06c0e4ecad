//! The `rounding_ties` regime of the attention families ([`super::regime::Regime::RoundingTies`]):
//! inputs on which the case's recipe meets exact ties at its two low-precision casts, so that
//! a kernel that breaks ties the other way (ties away where the recipe rounds to even, or the
//! reverse) differs on many elements, on every seed, instead of on the one or two a random
//! draw happens to hold.
//!
//! Both constructions steer a query slot (batch, row, head) through a few dedicated key
//! components, with the query zero elsewhere, so its scores are exact functions of those
//! components whatever the order of the QK reduction (every product of two inputs is exact in
//! f32, and a sum of at most two non-zero products is rounded once):
//!
//! - **Output ties** (the final cast of O): the slot's query is `a e_c`. The keys of one set
//!   `I` of `2^p` keys (whole pairs `2u, 2u + 1`, inside one 16-key block) get component `c`
//!   = 0, every other key of the batch entry gets `-X` with `a X scale >= 256`, so the slot's
//!   weights are exactly 1 on `I` and exactly 0 elsewhere (exp underflows to 0; a tile seen
//!   before `I` is wiped by a rescale factor of exactly 0). Chosen value columns hold `t_lo` on
//!   even keys of `I` and `t_hi` (the next value away from zero) on odd keys, so the output is
//!   the midpoint of `t_lo` and `t_hi` exactly: the sum of whole pairs is exact in f32, and
//!   dividing by (or multiplying with the reciprocal of) a power of two is exact. `t_lo` has an
//!   even last bit, so ties-to-even gives `t_lo` and ties-away gives `t_hi`.
//! - **P ties** (the cast of P before P V): the slot's query is `a e_c1 + a' (e_c2 + e_c3)`
//!   with `a' = a / 64`, and the three products of a planted key add exactly in f32 in any
//!   order (checked per draw). One key
//!   `m` of a 16-key block gets score 0 (the row maximum: every other key of the batch entry
//!   gets component `c1` = `-X`); up to 8 other keys of the block get `(c1, c2, c3)` drawn from
//!   the stream until the recipe's own P, computed with the recipe's own score and exp
//!   arithmetic, is a tie that the two tie-breaking rules round apart; the maximum's value row
//!   is 0, so the output is made of the planted keys alone. The maximum lies in the
//!   same 16-key block as the ties, so every KV tile or split that holds them has it as its
//!   running maximum (tiles and splits are whole multiples of 16 keys). For the two-pass
//!   (vLLM) recipes, P is `e / (sum + eps)` and the sum depends on every tie planted, so each
//!   query slot holds one planted key besides the maximum: its row sum is `1 + e` rounded
//!   once, whatever the order, and the search computes P exactly as the kernel does.
//!
//! Every slot uses key components no other slot of its KV head uses, so the constructions do
//! not disturb each other; they cannot be combined with `large_logits` / `late_max`, which
//! rebuild whole query and key rows.

use super::attention_regimes::KeyRows;
use super::regime::Regime;
use super::{ElemType, GenContext, OpError, Tensor, TensorMap};
use crate::attention::mask::BatchMask;
use crate::attention::online::SoftmaxArith;
use crate::attention::recipe::{Algorithm, Combine, Normalize, ORescale, ScorePrecision, SplitKv};
use crate::attention::split_kv::{combine_row, PartialRow};
use crate::attention::two_pass::row_lse;
use crate::attention::{Geometry, Recipe};
use crate::formats::{DType, Rounding};

/// Keys per block inside which a construction stays (every KV tile, cache block and split of
/// the presets is a whole multiple of it).
const BLOCK: usize = 16;
/// P ties planted per slot (at most).
const P_TIES_PER_SLOT: usize = 8;
/// The construction plants P ties until it has at least this many (when the shape allows).
pub const P_TIES_TARGET: usize = 16;
/// The fewest P ties the regime promises under a two-pass recipe (one per query slot: see the
/// module documentation).
pub const TWO_PASS_FLOOR: usize = 1;
/// Output value columns carrying ties per output slot (at most `head_dim`).
const TIE_COLUMNS: usize = 16;
/// The fewest P ties / output ties the regime promises (when the recipe can hold them).
pub const TIES_FLOOR: usize = 8;
/// Output slots sharing one key set (at most).
const OUT_SLOTS: usize = 4;
/// Draws per planted P tie before the construction gives up (a tie is about 1 in 2^17 draws
/// for bf16 P, so this is never reached in practice).
const MAX_DRAWS: usize = 4_000_000;
/// Keys of weight exactly 1 in a row-sum tie (the sum is then 16 plus the planted key's
/// 2^-7: the midpoint of 16 and the next f16 value).
const SUM_KEYS: usize = 16;
/// Row-sum tie slots (at most).
const SUM_SLOTS: usize = 2;
/// Common scores tried per combine slot.
const COMBINE_CANDIDATES: usize = 32;
/// An excluded key's scaled score is at most minus this (exp underflows to exactly 0).
const EXCLUDE: f64 = 256.0;

fn err(op: &str, message: impl Into<String>) -> OpError {
    OpError::Regime {
        op: op.to_string(),
        regime: Regime::RoundingTies.name().to_string(),
        message: message.into(),
    }
}

/// What the construction planted (for tests and messages).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Planted {
    /// P elements that are exact ties of the P cast.
    pub p_ties: usize,
    /// Output elements that are exact ties of the output cast.
    pub out_ties: usize,
    /// Row sums that are exact ties of their cast to f16 (recipes that divide O by an f16 sum).
    pub sum_ties: usize,
    /// Output elements whose exact value, combined from two split-KV partitions, is the
    /// midpoint of two neighbours of the output dtype.
    pub combine_ties: usize,
}

/// Whether the recipe's output cast sees an f32 value (no earlier cast of O made it exact).
fn output_can_tie(g: &Geometry, r: &Recipe) -> bool {
    g.dtype != DType::F32
        && r.o_rescale != ORescale::VectorF16
        && r.split
            .as_ref()
            .is_none_or(|s| s.partial_dtype == DType::F32)
}

/// Whether P can tie under the recipe: P cast to bf16/f16 from an f32 exp (an f16 exp already
/// rounds P to f16, so the cast after it is exact).
fn p_can_tie(r: &Recipe) -> bool {
    r.score_precision == ScorePrecision::F32 && r.p_dtype != DType::F32
}

/// The allowed keys of row `i` of batch `b` inside block `blk`.
fn block_keys(g: &Geometry, mask: Option<&[u8]>, b: usize, i: usize, blk: usize) -> Vec<usize> {
    let m = BatchMask::new(g, b, mask);
    let (lo, hi) = m.interval(i);
    let start = (blk * BLOCK).max(lo);
    let end = ((blk + 1) * BLOCK).min(hi).min(g.lk[b]);
    (start..end).filter(|&j| m.allowed(i, j)).collect()
}

/// The binade of a positive finite `x`: `floor(log2 x)`, read from its bits.
fn binade(x: f64) -> i32 {
    ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// Explicit mantissa bits of a dtype.
fn mantissa_bits(dtype: DType) -> u32 {
    match dtype {
        DType::Bf16 => 7,
        DType::F16 => 10,
        DType::F32 => 23,
    }
}

/// `(1 + m / 2^bits) 2^e` with `m` the low `bits` bits of `r`: a value of a dtype with `bits`
/// explicit mantissa bits (for `e` in its normal range), built exactly from its fields.
fn value(e: i32, r: u64, bits: u32) -> f64 {
    let m = r & ((1u64 << bits) - 1);
    let frac = 1.0 + m as f64 / (1u64 << bits) as f64;
    frac * f64::from_bits(((e + 1023) as u64) << 52)
}

/// The power of two at or below `x` (x >= 1).
fn pow2_floor(x: f64) -> f64 {
    let mut p = 1.0;
    while p * 2.0 <= x {
        p *= 2.0;
    }
    while p > x {
        p /= 2.0;
    }
    p
}

struct Work<'a> {
    op: &'a str,
    g: &'a Geometry,
    et: ElemType,
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
    /// Element offsets written (query, key, value).
    dq: Vec<usize>,
    dk: Vec<usize>,
    dv: Vec<usize>,
    /// Key components taken, per KV head (shared prefixes make them global per head).
    taken: Vec<Vec<bool>>,
    /// Query slots taken.
    slots: Vec<(usize, usize, usize)>,
    /// Value rows (element offsets) the output ties fixed.
    tie_value_rows: Vec<usize>,
}

impl Work<'_> {
    fn round(&self, x: f64) -> f64 {
        self.g.dtype.quantize_f64(x, Rounding::RNE)
    }

    fn free_components(&self, kvh: usize) -> Vec<usize> {
        (0..self.g.head_dim)
            .filter(|&c| !self.taken[kvh][c])
            .collect()
    }

    fn take_component(&mut self, kvh: usize, ctx: &mut GenContext) -> Option<usize> {
        let free = self.free_components(kvh);
        if free.is_empty() {
            return None;
        }
        let c = free[ctx.below(free.len() as u64) as usize];
        self.taken[kvh][c] = true;
        Some(c)
    }

    /// Sets query slot (b, i, h) to `parts` (component, value), zero elsewhere.
    fn set_query(&mut self, b: usize, i: usize, h: usize, parts: &[(usize, f64)]) {
        let o = self.g.q_offset(b, i, h);
        for x in 0..self.g.head_dim {
            self.q[o + x] = 0.0;
            self.dq.push(o + x);
        }
        for &(c, a) in parts {
            self.q[o + c] = a;
        }
        self.slots.push((b, i, h));
    }

    fn set_key(&mut self, keys: &KeyRows, b: usize, j: usize, kvh: usize, c: usize, x: f64) {
        let o = (keys.offset)(b, j, kvh) + c;
        self.k[o] = x;
        self.dk.push(o);
    }

    fn set_value(&mut self, keys: &KeyRows, b: usize, j: usize, kvh: usize, c: usize, x: f64) {
        let o = (keys.offset)(b, j, kvh) + c;
        self.v[o] = x;
        self.dv.push(o);
    }
}

/// The query scale `a` (a power of two, `a * scale` near 32) and the exclusion key value `-X`
/// (`a X scale >= 256`), both representable in the dtype.
fn steering(op: &str, w: &Work) -> Result<(f64, f64), OpError> {
    let scale = w.g.scale as f64;
    if !(scale.is_finite() && scale > 0.0) {
        return Err(err(op, "needs a positive, finite softmax scale"));
    }
    let a = pow2_floor(32.0 / scale).max(f64::MIN_POSITIVE);
    let a = w.round(a);
    let x = w.g.dtype.quantize_f64(EXCLUDE / (a * scale), Rounding::RNE);
    let x = if a * x * scale < EXCLUDE {
        w.round(x * 1.0625)
    } else {
        x
    };
    if !(a.is_finite() && x.is_finite() && a > 0.0 && a * x * scale >= EXCLUDE) {
        return Err(err(
            op,
            format!(
                "the softmax scale {scale} needs query or key values {} cannot hold",
                w.g.dtype.name()
            ),
        ));
    }
    Ok((a, -x))
}

/// Makes the `rounding_ties` regime true of `inputs` under `recipe` (see the module
/// documentation). `values` names the value tensor (same layout and offsets as the keys).
pub(crate) fn impose(
    op: &str,
    g: &Geometry,
    recipe: &Recipe,
    keys: &KeyRows,
    values: &'static str,
    inputs: &mut TensorMap,
    ctx: &mut GenContext,
) -> Result<Planted, OpError> {
    let out_ok = output_can_tie(g, recipe);
    let p_ok = p_can_tie(recipe);
    let sum_ok = matches!(recipe.normalize, Normalize::DivideF16 { .. });
    if !out_ok && !p_ok && !sum_ok && recipe.split.is_none() {
        return Err(err(
            op,
            format!(
                "recipe `{}` has no cast where ties can be planted (P in {} and no f32 value reaches the output cast)",
                recipe.name,
                recipe.p_dtype.name()
            ),
        ));
    }
    let read = |name: &str| -> Result<Vec<f64>, OpError> {
        Ok(inputs
            .get(name)
            .ok_or_else(|| OpError::MissingInput {
                op: op.to_string(),
                input: name.to_string(),
            })?
            .to_f64_vec())
    };
    let mask: Option<Vec<u8>> = if g.atten_mask {
        Some(
            inputs
                .get("atten_mask")
                .ok_or_else(|| OpError::MissingInput {
                    op: op.to_string(),
                    input: "atten_mask".to_string(),
                })?
                .data
                .clone(),
        )
    } else {
        None
    };
    let mut w = Work {
        op,
        g,
        et: ElemType::from(g.dtype),
        q: read("query")?,
        k: read(keys.tensor)?,
        v: read(values)?,
        dq: Vec::new(),
        dk: Vec::new(),
        dv: Vec::new(),
        taken: vec![vec![false; g.head_dim]; g.kv_heads],
        slots: Vec::new(),
        tie_value_rows: Vec::new(),
    };
    let (a, neg_x) = steering(op, &w)?;
    let mut rows: Vec<(usize, usize)> = (0..g.batch)
        .flat_map(|b| (0..g.lq[b]).map(move |i| (b, i)))
        .collect();
    ctx.shuffle(&mut rows);
    let mut planted = Planted::default();
    if out_ok {
        planted.out_ties = plant_output(&mut w, keys, mask.as_deref(), &rows, a, neg_x, ctx)?;
        if planted.out_ties < TIES_FLOOR {
            return Err(err(
                op,
                format!(
                    "only {} output ties fit (at least {TIES_FLOOR} needed): the case needs a query row that sees a whole pair of keys inside a 16-key block, and head_dim of 8 or more",
                    planted.out_ties
                ),
            ));
        }
    }
    if sum_ok {
        planted.sum_ties =
            plant_rowsum(&mut w, keys, mask.as_deref(), recipe, &rows, a, neg_x, ctx);
        if planted.sum_ties == 0 {
            return Err(err(
                op,
                format!(
                    "recipe `{}` casts its row sum to f16: the case needs a query row that sees {} keys inside one {}-key block",
                    recipe.name,
                    SUM_KEYS + 1,
                    2 * BLOCK
                ),
            ));
        }
    }
    if let Some(split) = recipe.split.as_ref() {
        planted.combine_ties = plant_combine(
            &mut w,
            keys,
            mask.as_deref(),
            recipe,
            split,
            &rows,
            a,
            neg_x,
            ctx,
        );
        if planted.combine_ties < TIES_FLOOR {
            return Err(err(
                op,
                format!(
                    "recipe `{}` combines {}-key partitions: the case needs a query row whose keys span two of them",
                    recipe.name, split.partition
                ),
            ));
        }
    }
    if p_ok {
        planted.p_ties = plant_p(&mut w, keys, mask.as_deref(), recipe, &rows, a, neg_x, ctx)?;
        let floor = if recipe.algorithm == Algorithm::TwoPass {
            TWO_PASS_FLOOR
        } else {
            TIES_FLOOR
        };
        if planted.p_ties < floor {
            return Err(err(
                op,
                format!(
                    "only {} P ties fit (at least {floor} needed): the case needs query rows that see 2 or more keys of a 16-key block (3 or more for online recipes), and free key components",
                    planted.p_ties
                ),
            ));
        }
    }
    write_back(inputs, "query", &w.q, &w.dq, w.et);
    write_back(inputs, keys.tensor, &w.k, &w.dk, w.et);
    write_back(inputs, values, &w.v, &w.dv, w.et);
    Ok(planted)
}

fn write_back(inputs: &mut TensorMap, name: &str, vals: &[f64], dirty: &[usize], et: ElemType) {
    let Some(t) = inputs.get_mut(name) else {
        return;
    };
    let es = t.dtype.size_bytes();
    for &o in dirty {
        let enc = Tensor::round_values(et, vec![1], &[vals[o]], Rounding::RNE);
        t.data[o * es..(o + 1) * es].copy_from_slice(&enc.data);
    }
}

/// Every query slot (batch, row, head) of `rows`, in an order drawn from the stream.
fn query_slots(
    rows: impl Iterator<Item = (usize, usize)>,
    heads: usize,
    ctx: &mut GenContext,
) -> Vec<(usize, usize, usize)> {
    let mut slots: Vec<(usize, usize, usize)> = rows
        .flat_map(|(b, i)| (0..heads).map(move |h| (b, i, h)))
        .collect();
    ctx.shuffle(&mut slots);
    slots
}

/// The value `1 + k ulp` with `k` odd, with a random sign, and its neighbour away from zero
/// (their exact midpoint rounds to the neighbour under ties-to-even, to the value below it
/// when a combine lands just short of it).
fn odd_pair(dtype: DType, ctx: &mut GenContext) -> (f64, f64) {
    let bits = mantissa_bits(dtype);
    let ulp = 1.0 / (1u64 << bits) as f64;
    let k = (2 * ctx.below((1u64 << (bits - 1)) - 1) + 1) as f64;
    let lo = 1.0 + k * ulp;
    let sign = if ctx.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
    (sign * lo, sign * (lo + ulp))
}

/// The value `1 + k ulp` with `k` even (so the midpoint to the next value rounds to it under
/// ties-to-even), with a random sign, and its neighbour away from zero.
fn tie_pair(dtype: DType, ctx: &mut GenContext) -> (f64, f64) {
    let bits = mantissa_bits(dtype);
    let ulp = 1.0 / (1u64 << bits) as f64;
    let k = (2 * ctx.below(1u64 << (bits - 1))) as f64;
    let lo = 1.0 + k * ulp;
    let sign = if ctx.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
    (sign * lo, sign * (lo + ulp))
}

/// Output ties: see the module documentation. Returns the number of tie elements.
fn plant_output(
    w: &mut Work,
    keys: &KeyRows,
    mask: Option<&[u8]>,
    rows: &[(usize, usize)],
    a: f64,
    neg_x: f64,
    ctx: &mut GenContext,
) -> Result<usize, OpError> {
    let g = w.g;
    // The first row (in the stream's order) with a block holding a whole key pair.
    for &(b, i) in rows {
        let blocks = g.lk[b].div_ceil(BLOCK);
        let mut with_pairs: Vec<(usize, Vec<usize>)> = Vec::new();
        for blk in 0..blocks {
            let ks = block_keys(g, mask, b, i, blk);
            let pairs: Vec<usize> = ks
                .iter()
                .copied()
                .filter(|&j| j % 2 == 0 && ks.contains(&(j + 1)))
                .collect();
            if !pairs.is_empty() {
                with_pairs.push((blk, pairs));
            }
        }
        if with_pairs.is_empty() {
            continue;
        }
        let (_, pairs) = &with_pairs[ctx.below(with_pairs.len() as u64) as usize];
        let n = pow2_floor(pairs.len() as f64) as usize;
        let set: Vec<usize> = pairs[..n].iter().flat_map(|&j| [j, j + 1]).collect();
        let h = ctx.below(g.heads as u64) as usize;
        let kvh = g.kv_head(h);
        let Some(c) = w.take_component(kvh, ctx) else {
            continue;
        };
        // Keys: component c is 0 on the set, -X on every other key of the batch entry.
        for j in 0..g.lk[b] {
            let x = if set.contains(&j) { 0.0 } else { neg_x };
            w.set_key(keys, b, j, kvh, c, x);
        }
        // Values: whole pairs (t_lo, t_hi) on the chosen columns.
        let mut cols: Vec<usize> = (0..g.head_dim).collect();
        ctx.shuffle(&mut cols);
        cols.truncate(TIE_COLUMNS.min(g.head_dim));
        w.tie_value_rows
            .extend(set.iter().map(|&j| (keys.offset)(b, j, kvh)));
        for &col in &cols {
            let (lo, hi) = tie_pair(g.dtype, ctx);
            for &j in &set {
                w.set_value(keys, b, j, kvh, col, if j % 2 == 0 { lo } else { hi });
            }
        }
        // Slots: this one, and more (rows of the batch entry that see the whole set, heads of
        // the same KV head), each with the same query.
        let mut slots = vec![(i, h)];
        let mut more: Vec<(usize, usize)> = (0..g.lq[b])
            .flat_map(|i2| {
                (0..g.heads)
                    .filter(move |&h2| g.kv_head(h2) == kvh)
                    .map(move |h2| (i2, h2))
            })
            .filter(|&(i2, h2)| {
                (i2, h2) != (i, h)
                    && !w.slots.contains(&(b, i2, h2))
                    && set
                        .iter()
                        .all(|&j| BatchMask::new(g, b, mask).allowed(i2, j))
            })
            .collect();
        ctx.shuffle(&mut more);
        slots.extend(more.into_iter().take(OUT_SLOTS - 1));
        for &(i2, h2) in &slots {
            w.set_query(b, i2, h2, &[(c, a)]);
        }
        return Ok(slots.len() * cols.len());
    }
    Ok(0)
}

/// P ties: see the module documentation. Returns the number of tie elements.
#[allow(clippy::too_many_arguments)]
fn plant_p(
    w: &mut Work,
    keys: &KeyRows,
    mask: Option<&[u8]>,
    recipe: &Recipe,
    rows: &[(usize, usize)],
    a: f64,
    neg_x: f64,
    ctx: &mut GenContext,
) -> Result<usize, OpError> {
    let g = w.g;
    let arith = SoftmaxArith::new(recipe, g.scale);
    let two_pass = recipe.algorithm == Algorithm::TwoPass;
    // Scaled score range of a planted key: P near 1 for online recipes (a tie there moves the
    // output most); e below 2^-29 for two-pass ones (the row sum stays exactly 1).
    let (s_lo, s_hi) = if two_pass {
        (-3.0, -0.05)
    } else {
        (-6.0, -0.01)
    };
    let per_slot = if two_pass { 1 } else { P_TIES_PER_SLOT };
    let scale = g.scale as f64;
    let a1 = a;
    let a2 = w.round(a / 64.0);
    // k1: magnitudes that put a k1 (scaled) in the score range, drawn by binade.
    let (m_lo, m_hi) = (-s_hi / (a1 * scale), -s_lo / (a1 * scale));
    let (e_lo, e_hi) = (binade(m_lo), binade(m_hi));
    let bits = mantissa_bits(g.dtype);
    let slots = query_slots(rows.iter().copied(), g.heads, ctx);
    let mut total = 0;
    for (b, i, h) in slots {
        if total >= P_TIES_TARGET {
            break;
        }
        if w.slots.contains(&(b, i, h)) {
            continue;
        }
        let blocks = g.lk[b].div_ceil(BLOCK);
        let mut order: Vec<usize> = (0..blocks).collect();
        ctx.shuffle(&mut order);
        let Some(ks) = order
            .into_iter()
            .map(|blk| block_keys(g, mask, b, i, blk))
            .find(|ks| ks.len() > per_slot.min(2))
        else {
            continue;
        };
        let kvh = g.kv_head(h);
        if w.free_components(kvh).len() < 3 {
            continue;
        }
        let c1 = w.take_component(kvh, ctx).expect("three free");
        let c2 = w.take_component(kvh, ctx).expect("three free");
        let c3 = w.take_component(kvh, ctx).expect("three free");
        let tops: Vec<usize> = ks
            .iter()
            .copied()
            .filter(|&j| !w.tie_value_rows.contains(&(keys.offset)(b, j, kvh)))
            .collect();
        if tops.is_empty() {
            continue;
        }
        let top = tops[ctx.below(tops.len() as u64) as usize];
        let mut tie_keys: Vec<usize> = ks.iter().copied().filter(|&j| j != top).collect();
        ctx.shuffle(&mut tie_keys);
        tie_keys.truncate(per_slot);
        for j in 0..g.lk[b] {
            if j != top && !tie_keys.contains(&j) {
                w.set_key(keys, b, j, kvh, c1, neg_x);
            }
        }
        for c in [c1, c2, c3] {
            w.set_key(keys, b, top, kvh, c, 0.0);
        }
        // The maximum's value row is 0, so the output is made of the planted keys alone and a
        // P that rounds the other way moves most of its elements.
        for x in 0..g.head_dim {
            w.set_value(keys, b, top, kvh, x, 0.0);
        }
        for &j in &tie_keys {
            let mut found = None;
            for _ in 0..MAX_DRAWS {
                let r = ctx.next_u64();
                let e1 = e_lo + (r % (e_hi - e_lo + 1) as u64) as i32;
                let k1 = -value(e1, r >> 8, bits);
                // k2, k3: 1 to 16 binades below a k1 (in a / 64 units), random sign and
                // mantissa.
                let fine = |r: u64| {
                    let e = e1 + 6 - 1 - (r % 16) as i32;
                    let sign = if (r >> 4) & 1 == 0 { 1.0 } else { -1.0 };
                    sign * value(e, r >> 5, bits)
                };
                let r = ctx.next_u64();
                let (k2, k3) = (fine(r), fine(r >> 32));
                if [k1, k2, k3].iter().any(|&k| w.round(k) != k) {
                    continue; // below the dtype's normal range
                }
                let t = [
                    (a1 as f32) * (k1 as f32),
                    (a2 as f32) * (k2 as f32),
                    (a2 as f32) * (k3 as f32),
                ];
                // Every partial sum exact in f32, so any order of the QK reduction gives the
                // same dot product.
                let exact = |x: f32, y: f32| ((x + y) as f64) == (x as f64) + (y as f64);
                let dot = t[0] + t[1] + t[2];
                if !(exact(t[0], t[1])
                    && exact(t[0], t[2])
                    && exact(t[1], t[2])
                    && (dot as f64) == (t[0] as f64) + (t[1] as f64) + (t[2] as f64))
                {
                    continue;
                }
                let s = arith.score(dot);
                if !((s as f64) < s_hi && (s as f64) > s_lo) {
                    continue;
                }
                let e = arith.p(s, 0.0);
                // Two-pass: the row holds e = 1 (the maximum), this e and zeros, so its sum
                // is 1 + e rounded once, whatever the order.
                let p = if two_pass {
                    e * (1.0f32 / ((1.0f32 + e) + recipe.epsilon))
                } else {
                    e
                };
                let even = recipe.p_dtype.quantize_f32(p, Rounding::RNE);
                let away = recipe.p_dtype.quantize_f32(p, Rounding::RNA);
                if p > 0.0 && even != away {
                    found = Some((k1, k2, k3));
                    break;
                }
            }
            let Some((k1, k2, k3)) = found else {
                return Err(err(
                    w.op,
                    format!("no P tie found within {MAX_DRAWS} draws for batch {b} row {i} head {h} key {j}"),
                ));
            };
            w.set_key(keys, b, j, kvh, c1, k1);
            w.set_key(keys, b, j, kvh, c2, k2);
            w.set_key(keys, b, j, kvh, c3, k3);
        }
        w.set_query(b, i, h, &[(c1, a1), (c2, a2), (c3, a2)]);
        total += tie_keys.len();
    }
    Ok(total)
}

/// The recipe the regime plants ties for: the case's own (from `ctx`).
pub(crate) fn recipe_of(op: &str, ctx: &GenContext, dtype: DType) -> Result<Recipe, OpError> {
    let Some(name) = ctx.recipe.as_deref() else {
        return Err(err(
            op,
            "needs the case's recipe (none was given to the generator)",
        ));
    };
    if name == super::ORACLE {
        return Err(err(
            op,
            "needs a recipe preset (the oracle has no low-precision cast to tie)",
        ));
    }
    Recipe::preset(name, dtype).ok_or_else(|| OpError::UnknownRecipe {
        op: op.to_string(),
        recipe: name.to_string(),
        known: crate::attention::PRESETS.join(", "),
    })
}

/// Split-KV combine ties: a query slot whose weights are exactly equal on one set of keys in
/// each of two partitions (1 to 8 keys, all with the same score, every other key excluded),
/// with chosen value columns holding `t_lo` on the first set and `t_hi` on the second. Each
/// partial output is then exactly `t_lo` or `t_hi` (a mean of equal values, with a weight of
/// exactly `1/n`), so the combined output is their midpoint up to the combine formula's own
/// rounding: the formulas (exp-sum weights and `1 / (W + eps)`, LSE weights, sum-max weights)
/// land on, just below or just above it (the exp-sum formula's `1e-6` always puts it below for
/// sets of 8 keys or fewer), and round it apart. `t_lo` has an odd last bit, so an exact
/// midpoint rounds (to even) to `t_hi`. The set size and the common score differ from slot to
/// slot, so the slots land differently. Up to 4 slots take one, leaving one for P ties when
/// every slot of the case is eligible. Returns the number of tie columns planted.
#[allow(clippy::too_many_arguments)]
fn plant_combine(
    w: &mut Work,
    keys: &KeyRows,
    mask: Option<&[u8]>,
    recipe: &Recipe,
    split: &SplitKv,
    rows: &[(usize, usize)],
    a: f64,
    neg_x: f64,
    ctx: &mut GenContext,
) -> usize {
    let g = w.g;
    let partition = split.partition.max(1);
    let slots = query_slots(
        rows.iter().copied().filter(|&(b, _)| g.lk[b] > partition),
        g.heads,
        ctx,
    );
    // Every eligible slot up to 4, but one left for a P tie when no other slot could hold it.
    let all = rows.len() * g.heads;
    let spare = usize::from(slots.len() == all && slots.len() > 1);
    let budget = (slots.len() - spare).clamp(1, 4);
    // Set sizes 1, 2, 4, 8 (powers of two, so a weight of 1/n is exact), in a drawn order.
    let mut sizes = [1usize, 2, 4, 8];
    ctx.shuffle(&mut sizes);
    let bits = mantissa_bits(g.dtype);
    let mut total = 0;
    let mut planted = 0;
    for (b, i, h) in slots {
        if planted >= budget {
            break;
        }
        if w.slots.contains(&(b, i, h)) {
            continue;
        }
        let kvh = g.kv_head(h);
        let size = sizes[planted % sizes.len()];
        let free_row = |w: &Work, j: usize| !w.tie_value_rows.contains(&(keys.offset)(b, j, kvh));
        // Per partition, the blocks that hold `size` free keys the row sees.
        let parts = g.lk[b].div_ceil(partition);
        let mut sets: Vec<Vec<usize>> = Vec::new();
        for part in 0..parts {
            let first = part * partition / BLOCK;
            let last = ((part + 1) * partition).min(g.lk[b]).div_ceil(BLOCK);
            let mut blocks: Vec<Vec<usize>> = (first..last)
                .map(|blk| {
                    block_keys(g, mask, b, i, blk)
                        .into_iter()
                        .filter(|&j| free_row(w, j))
                        .collect::<Vec<_>>()
                })
                .filter(|ks| ks.len() >= size)
                .collect();
            if !blocks.is_empty() {
                let pick = ctx.below(blocks.len() as u64) as usize;
                let mut ks = blocks.swap_remove(pick);
                ks.truncate(size);
                sets.push(ks);
            }
        }
        if sets.len() < 2 {
            continue;
        }
        let x = sets.swap_remove(ctx.below(sets.len() as u64) as usize);
        let y = sets.swap_remove(ctx.below(sets.len() as u64) as usize);
        // In partition order; which of the two holds t_lo is drawn.
        let (early, late) = if x[0] < y[0] { (x, y) } else { (y, x) };
        let (first, second) = if ctx.next_u64() & 1 == 0 {
            (early, late)
        } else {
            (late, early)
        };
        let Some(c) = w.take_component(kvh, ctx) else {
            continue;
        };
        let mut cols: Vec<usize> = (0..g.head_dim).collect();
        ctx.shuffle(&mut cols);
        cols.truncate(TIE_COLUMNS.min(g.head_dim));
        let pairs: Vec<(f64, f64)> = cols.iter().map(|_| odd_pair(g.dtype, ctx)).collect();
        // The common score: among drawn candidates, the one under which the recipe's combine
        // rounds most columns apart from every other combine formula (computed with the
        // reference's own combine of two partials).
        let mut best: Option<(usize, f64)> = None;
        for attempt in 0..COMBINE_CANDIDATES {
            let r = ctx.next_u64();
            let delta = if attempt == 0 {
                0.0
            } else {
                let sign = if r & 1 == 0 { 1.0 } else { -1.0 };
                w.round(sign * value(-8 + ((r >> 1) % 6) as i32, r >> 8, bits))
            };
            let apart = combine_apart(
                w.g,
                recipe,
                split,
                a,
                delta,
                size,
                first[0] > second[0],
                &pairs,
            );
            if best.is_none_or(|(n, _)| apart > n) {
                best = Some((apart, delta));
            }
            if apart == cols.len() {
                break;
            }
        }
        let delta = best.map_or(0.0, |(_, d)| d);
        for j in 0..g.lk[b] {
            let x = if first.contains(&j) || second.contains(&j) {
                delta
            } else {
                neg_x
            };
            w.set_key(keys, b, j, kvh, c, x);
        }
        for (&col, &(lo, hi)) in cols.iter().zip(&pairs) {
            for &j in &first {
                w.set_value(keys, b, j, kvh, col, lo);
            }
            for &j in &second {
                w.set_value(keys, b, j, kvh, col, hi);
            }
        }
        w.tie_value_rows.extend(
            first
                .iter()
                .chain(&second)
                .map(|&j| (keys.offset)(b, j, kvh)),
        );
        w.set_query(b, i, h, &[(c, a)]);
        total += cols.len();
        planted += 1;
    }
    total
}

/// How many of `pairs` (t_lo, t_hi per column) the recipe's combine rounds apart from every
/// other combine formula, for two partials of `size` keys each with common key component
/// `delta` (query `a`), holding t_lo (the first partition unless `hi_first`) and t_hi.
#[allow(clippy::too_many_arguments)]
fn combine_apart(
    g: &Geometry,
    recipe: &Recipe,
    split: &SplitKv,
    a: f64,
    delta: f64,
    size: usize,
    hi_first: bool,
    pairs: &[(f64, f64)],
) -> usize {
    let arith = SoftmaxArith::new(recipe, g.scale);
    let m = arith.score((a as f32) * (delta as f32));
    let sum = size as f32;
    let lse = row_lse(recipe, sum, arith.scaled_max(m));
    let lo: Vec<f32> = pairs.iter().map(|p| p.0 as f32).collect();
    let hi: Vec<f32> = pairs.iter().map(|p| p.1 as f32).collect();
    let (o1, o2) = if hi_first { (&hi, &lo) } else { (&lo, &hi) };
    let parts = [
        PartialRow {
            lse,
            max: m,
            sum,
            out: o1,
        },
        PartialRow {
            lse,
            max: m,
            sum,
            out: o2,
        },
    ];
    let result = |c: Combine| -> Vec<f32> {
        let mut o = vec![0.0f32; pairs.len()];
        combine_row(c, recipe.exp_impl, recipe.ln_impl, &parts, &mut o);
        o.iter()
            .map(|&x| g.dtype.quantize_f32(x, recipe.output_rounding))
            .collect()
    };
    let own = result(split.combine);
    let others: Vec<Vec<f32>> = [Combine::Lse, Combine::VllmExpSum, Combine::AscendSumMax]
        .into_iter()
        .filter(|&c| c != split.combine)
        .map(result)
        .collect();
    (0..pairs.len())
        .filter(|&i| others.iter().all(|o| o[i].to_bits() != own[i].to_bits()))
        .count()
}

/// Row-sum ties, for recipes that cast the f32 row sum to f16 before dividing O by it (the f16
/// high-performance prompt kernel): a query slot sees 16 keys of score 0 (weight exactly 1)
/// and one key whose weight, computed with the recipe's own f16 score and exp arithmetic, is
/// exactly 2^-7, all inside one 32-key block (so inside one KV tile, whose running maximum is
/// then 0), every other key excluded. Its row sum is 16 + 2^-7 exactly, the midpoint of 16
/// and the next f16 value: ties-to-even gives 16, ties-away 16 + 2^-6, and every output
/// element of the row is divided by one or the other. Returns the slots planted.
#[allow(clippy::too_many_arguments)]
fn plant_rowsum(
    w: &mut Work,
    keys: &KeyRows,
    mask: Option<&[u8]>,
    recipe: &Recipe,
    rows: &[(usize, usize)],
    a: f64,
    neg_x: f64,
    ctx: &mut GenContext,
) -> usize {
    let g = w.g;
    let arith = SoftmaxArith::new(recipe, g.scale);
    let target = 1.0f32 / 128.0;
    // The key value whose weight is exactly 2^-7 (the f16 exp rounds near it).
    let scale = g.scale as f64;
    let centre = crate::math::ln_f64(1.0 / 128.0) / (a * scale);
    let bits = mantissa_bits(g.dtype) as i32;
    let mut delta = None;
    // From 2% beyond the centre towards zero, one representable value at a time.
    let mut x = w.round(centre * 1.02);
    for _ in 0..1024 {
        if x.is_nan() || x >= 0.0 {
            break;
        }
        let s = arith.score((a as f32) * (x as f32));
        if arith.p(s, 0.0) == target {
            delta = Some(x);
            break;
        }
        x = w.round(x + f64::from_bits(((binade(-x) - bits + 1023) as u64) << 52));
    }
    let Some(delta) = delta else {
        return 0;
    };
    let slots = query_slots(rows.iter().copied(), g.heads, ctx);
    let mut planted = 0;
    for (b, i, h) in slots {
        if planted >= SUM_SLOTS {
            break;
        }
        if w.slots.contains(&(b, i, h)) {
            continue;
        }
        let kvh = g.kv_head(h);
        let blocks: Vec<Vec<usize>> = (0..g.lk[b].div_ceil(2 * BLOCK))
            .map(|blk| {
                let mut ks = block_keys(g, mask, b, i, 2 * blk);
                ks.extend(block_keys(g, mask, b, i, 2 * blk + 1));
                ks
            })
            .filter(|ks| ks.len() > SUM_KEYS)
            .collect();
        if blocks.is_empty() {
            continue;
        }
        let mut ks = blocks[ctx.below(blocks.len() as u64) as usize].clone();
        ctx.shuffle(&mut ks);
        ks.truncate(SUM_KEYS + 1);
        let Some(c) = w.take_component(kvh, ctx) else {
            continue;
        };
        for j in 0..g.lk[b] {
            let v = if j == ks[0] {
                delta
            } else if ks.contains(&j) {
                0.0
            } else {
                neg_x
            };
            w.set_key(keys, b, j, kvh, c, v);
        }
        w.set_query(b, i, h, &[(c, a)]);
        planted += 1;
    }
    planted
}
