//! The regimes of `mla_decode` that the other attention families have too, built for the MLA
//! kernel's own arithmetic: ties at its casts (`rounding_ties`), subnormal latent columns
//! (`subnormal_outputs`) and moderate row maxima against its softmax step
//! (`moderate_late_max`, `moderate_early_max`).
//!
//! The latent row of a key is also its value row and one KV head serves every query head, so
//! a construction cannot rebuild keys per head. Two tools do the work:
//!
//! - a *steered slot*: one query head of one batch entry whose latent query and rope query are
//!   zero except on a few rope channels of its own (no other construction of the entry uses
//!   them). Its score of a key is then the f32 product of the few nonzero terms, exact whatever
//!   the kernel's K order (each product of two bf16 or f16 values is exact in f32; every
//!   subset sum of the terms is checked to be exact), times the f32 scale: the construction
//!   computes the recipe's own scores, P and output for it. An *exclusion* channel puts every
//!   key the slot must not see `>= EXCLUDE` below its maximum (its P is exactly 0).
//! - a *sign key*: a key whose 576 elements are `beta * sign(q)` for one head's query, which
//!   scores `scale * beta * sum |q|` for that head and about a tenth of that's spread for the
//!   others.
//!
//! `rounding_ties`: one steered slot in a batch entry of one softmax step (`lk <= step`) sees
//! two keys of equal score `M` (1 to 6) and nothing else, so its output is exactly the mean of
//! the two value rows; 16 of its columns are redrawn until that mean is a tie of the output
//! cast. A second slot sees a maximum key of score `M` (drawn until the AMLA factor of `M` is
//! a tie of the factor cast) and 8 keys of its first step whose score is drawn until the
//! recipe's own P (`exp(s - M)` times the cast factor) is a tie of the P cast.
//! `subnormal_outputs`: two latent columns hold subnormals of the dtype at every valid key,
//! positive in one, negative in the other; every entry is one softmax step, so every output of
//! those columns is a nonzero subnormal (over several steps the AMLA correction is an integer
//! added to O's f32 bits, which is not a rescale of an f32 subnormal).
//! `moderate_late_max` / `moderate_early_max`: sign keys per head of every entry long enough:
//! one after the first step leading the first step's largest score by 5.5 to 9.5 and the later
//! steps' own keys by 6.5 or more (late), or one
//! in the first step above everything and one after it that is the later steps' largest, 0.75
//! to 2.75 below it (early). Every promise is checked on the rounded inputs.

use super::{Case, MlaDecode, MlaRecipe, OP, STEP};
use crate::attention::mla::{amla_factor, p_before_cast, p_factor, to_dtype, LATENT, ROPE};
use crate::formats::{bf16, f16, DType, Rounding};
use crate::ops::attention_regimes::{moderate_recipe_name, subnormal_codes};
use crate::ops::regime::{Regime, MODERATE_EARLY_MARGIN, MODERATE_LATE_GAP};
use crate::ops::{ElemType, GenContext, OpError, Tensor, TensorMap};

/// P ties the regime plants (one steered slot).
const P_TIES: usize = 8;
/// Output columns the output-tie slot redraws until they are ties.
const TIE_COLUMNS: usize = 16;
/// An excluded key's scaled score is at least this far below the slot's maximum (its exp is
/// exactly 0 in f32).
const EXCLUDE: f64 = 300.0;
/// The rope value every excluded key holds on a slot's exclusion channel (negated).
const EXCLUDE_KEY: f64 = 4.0;
/// Candidates tried per tie before the construction gives up.
const MAX_DRAWS: usize = 1 << 22;

fn regime_err(r: Regime, message: impl Into<String>) -> OpError {
    OpError::Regime {
        op: OP.into(),
        regime: r.name().into(),
        message: message.into(),
    }
}

/// The regimes this module builds.
pub(super) fn is_own(r: Regime) -> bool {
    r.is_moderate_max() || matches!(r, Regime::RoundingTies | Regime::SubnormalOutputs)
}

/// Shape-only checks (against the `ascend_mla` step; [`impose`] checks the recipe's own).
pub(super) fn check(c: &Case, regimes: &[Regime]) -> Result<(), OpError> {
    for &r in regimes.iter().filter(|&&r| is_own(r)) {
        if let Some(other) = regimes.iter().find(|&&o| o != r) {
            return Err(regime_err(
                r,
                format!(
                    "cannot be combined with {} in one case (both rebuild keys or queries); declare it in another case",
                    other.name()
                ),
            ));
        }
        shape_fits(c, r, STEP)?;
    }
    Ok(())
}

fn shape_fits(c: &Case, r: Regime, step: usize) -> Result<(), OpError> {
    let lk = &c.g.lk;
    let n = c.p.num_heads;
    match r {
        Regime::RoundingTies => {
            if n < 2 || !lk.iter().any(|&l| (2..=step).contains(&l)) {
                return Err(regime_err(
                    r,
                    format!("needs two or more query heads and a sequence of 2 to {step} keys (one softmax step: its output ties are exact means)"),
                ));
            }
            if !lk.iter().any(|&l| l.min(step) > P_TIES) {
                return Err(regime_err(
                    r,
                    format!(
                        "needs a sequence with more than {P_TIES} keys in its first softmax step"
                    ),
                ));
            }
        }
        Regime::SubnormalOutputs => {
            if lk.iter().any(|&l| l > step) {
                return Err(regime_err(
                    r,
                    format!("needs every sequence within one {step}-key softmax step (the AMLA correction between steps is added to O's f32 bits, not a rescale of a subnormal)"),
                ));
            }
        }
        _ => {
            if !lk.iter().any(|&l| l >= step + n) {
                return Err(regime_err(
                    r,
                    format!("needs a sequence with {n} keys or more after the first {step}-key softmax step (one per query head)"),
                ));
            }
        }
    }
    Ok(())
}

/// A key or query element's place: a row of the old caches or of this step's new rows.
enum Loc {
    Cache(usize),
    New(usize),
}

/// The case's inputs as 16-bit patterns, addressed by (batch entry, key position) and
/// (batch entry, head).
struct Rows<'c> {
    c: &'c Case,
    blocks: Vec<Vec<usize>>,
    q_nope: Vec<u16>,
    q_rope: Vec<u16>,
    kv: Vec<u16>,
    k_rope: Vec<u16>,
    kv_cache: Vec<u16>,
    rope_cache: Vec<u16>,
}

impl<'c> Rows<'c> {
    fn new(f: &MlaDecode, c: &'c Case, m: &TensorMap) -> Result<Rows<'c>, OpError> {
        let d = f.decoded(c, m)?;
        let blocks = f.blocks(c, &d.table)?;
        let bits = |name: &str| -> Result<Vec<u16>, OpError> {
            m.get(name)
                .ok_or_else(|| OpError::MissingInput {
                    op: OP.into(),
                    input: name.into(),
                })?
                .bits16()
                .map_err(|e| super::failed(e.to_string()))
        };
        Ok(Rows {
            c,
            blocks,
            q_nope: bits("query")?,
            q_rope: bits("query_rope")?,
            kv: d.kv,
            k_rope: d.k_rope,
            kv_cache: d.kv_cache,
            rope_cache: d.rope_cache,
        })
    }

    fn loc(&self, b: usize, j: usize) -> Loc {
        let c = self.c;
        let bs = c.p.block_size;
        let old = c.g.lk[b] - c.p.new_tokens;
        if j < old {
            Loc::Cache(self.blocks[b][j / bs] * bs + j % bs)
        } else {
            Loc::New(b * c.p.new_tokens + j - old)
        }
    }

    fn latent(&mut self, b: usize, j: usize) -> &mut [u16] {
        let (v, r) = match self.loc(b, j) {
            Loc::Cache(r) => (&mut self.kv_cache, r),
            Loc::New(r) => (&mut self.kv, r),
        };
        &mut v[r * LATENT..(r + 1) * LATENT]
    }

    fn rope(&mut self, b: usize, j: usize) -> &mut [u16] {
        let (v, r) = match self.loc(b, j) {
            Loc::Cache(r) => (&mut self.rope_cache, r),
            Loc::New(r) => (&mut self.k_rope, r),
        };
        &mut v[r * ROPE..(r + 1) * ROPE]
    }

    fn enc(&self, x: f64) -> u16 {
        match self.c.p.dtype {
            DType::F16 => f16::f64_to_f16(x, Rounding::RNE),
            _ => bf16::f64_to_bf16(x, Rounding::RNE),
        }
    }

    fn dec(&self, bits: u16) -> f64 {
        MlaDecode::decode16(self.c, bits) as f64
    }

    /// Key j of entry b, 576 wide (latent then rope).
    fn key(&mut self, b: usize, j: usize) -> Vec<f64> {
        let mut k: Vec<f64> = self
            .latent(b, j)
            .to_vec()
            .iter()
            .map(|&x| self.dec(x))
            .collect();
        let rope: Vec<u16> = self.rope(b, j).to_vec();
        k.extend(rope.iter().map(|&x| self.dec(x)));
        k
    }

    /// The query of head h of entry b, 576 wide.
    fn query(&self, b: usize, h: usize) -> Vec<f64> {
        let (o, r) = (self.c.q_offset(b, h, LATENT), self.c.q_offset(b, h, ROPE));
        self.q_nope[o..o + LATENT]
            .iter()
            .chain(&self.q_rope[r..r + ROPE])
            .map(|&x| self.dec(x))
            .collect()
    }

    /// Makes head h of entry b a steered slot: zero everywhere but `channels` of its rope.
    fn steer(&mut self, b: usize, h: usize, channels: &[(usize, f64)]) {
        let (o, r) = (self.c.q_offset(b, h, LATENT), self.c.q_offset(b, h, ROPE));
        let zero = self.enc(0.0);
        self.q_nope[o..o + LATENT].fill(zero);
        self.q_rope[r..r + ROPE].fill(zero);
        for &(ch, a) in channels {
            self.q_rope[r + ch] = self.enc(a);
        }
    }

    /// The exact scaled scores (f64) of head h of entry b over its valid keys.
    fn scores(&mut self, b: usize, h: usize) -> Vec<f64> {
        let q = self.query(b, h);
        let scale = self.c.g.scale as f64;
        (0..self.c.g.lk[b])
            .map(|j| {
                let k = self.key(b, j);
                scale * q.iter().zip(&k).map(|(x, y)| x * y).sum::<f64>()
            })
            .collect()
    }

    /// Puts `beta * sign(q)` of head h's query into key j of entry b.
    fn sign_key(&mut self, b: usize, h: usize, j: usize, beta: f64) {
        let q = self.query(b, h);
        let v: Vec<u16> = q
            .iter()
            .map(|&x| self.enc(if x < 0.0 { -beta } else { beta }))
            .collect();
        self.latent(b, j).copy_from_slice(&v[..LATENT]);
        self.rope(b, j).copy_from_slice(&v[LATENT..]);
    }

    fn store(self, m: &mut TensorMap) {
        let c = self.c;
        let et = ElemType::from(c.p.dtype);
        let rows = c.rows();
        for (name, shape, bits) in [
            ("query", c.q_shape(LATENT), &self.q_nope),
            ("query_rope", c.q_shape(ROPE), &self.q_rope),
            ("kv", vec![rows, 1, LATENT], &self.kv),
            ("k_rope", vec![rows, 1, ROPE], &self.k_rope),
            ("kv_cache_in", c.cache_shape(LATENT), &self.kv_cache),
            ("rope_cache_in", c.cache_shape(ROPE), &self.rope_cache),
        ] {
            m.insert(name.into(), Tensor::from_bits16(et, shape, bits));
        }
    }
}

/// The recipe the regimes are built for: the case's preset (`ascend_mla` for an oracle case,
/// except for the moderate maxima, which refuse one: they need the recipe's step).
fn regime_recipe(c: &Case, regimes: &[Regime], ctx: &GenContext) -> Result<MlaRecipe, OpError> {
    let name = moderate_recipe_name(OP, regimes, ctx)?
        .or(ctx.recipe.as_deref())
        .and_then(|n| MlaRecipe::preset(n, c.p.dtype).map(|_| n))
        .unwrap_or("ascend_mla");
    Ok(MlaRecipe::preset(name, c.p.dtype).expect("the preset exists"))
}

/// Builds the declared regime (one per case, [`check`]).
pub(super) fn impose(
    f: &MlaDecode,
    c: &Case,
    regimes: &[Regime],
    m: &mut TensorMap,
    ctx: &mut GenContext,
) -> Result<(), OpError> {
    let Some(&r) = regimes.iter().find(|&&r| is_own(r)) else {
        return Ok(());
    };
    let recipe = regime_recipe(c, regimes, ctx)?;
    let step = recipe.kernel.step;
    shape_fits(c, r, step)?;
    let mut rows = Rows::new(f, c, m)?;
    match r {
        Regime::RoundingTies => ties(&mut rows, &recipe, ctx)?,
        Regime::SubnormalOutputs => subnormal_columns(&mut rows, ctx)?,
        Regime::ModerateLateMax => moderate(&mut rows, step, true, ctx)?,
        _ => moderate(&mut rows, step, false, ctx)?,
    }
    rows.store(m);
    Ok(())
}

/// Whether every subset sum of `terms` is exact in f32 (so any summation order gives it).
fn sums_exact(terms: &[f64]) -> bool {
    (1u32..1 << terms.len()).all(|mask| {
        let s: f64 = terms
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, &t)| t)
            .sum();
        (s as f32) as f64 == s
    })
}

/// Whether the two tie rules round `x` to `dtype` apart.
fn splits(dtype: DType, x: f32) -> bool {
    to_dtype(dtype, x, Rounding::RNE) != to_dtype(dtype, x, Rounding::RNA)
}

/// A value of either sign whose binade is drawn uniformly from `[2^-12, 1)` (then the
/// significand): draws spread over many distinct sums, where a uniform value would sit in its
/// top binades and repeat the same few.
fn spread(ctx: &mut GenContext) -> f64 {
    let e = ctx.below(12) as i32 + 1;
    let sign = if ctx.below(2) == 0 { 1.0 } else { -1.0 };
    // 2^-e built from its bits (exact, as powi is, without its loop: the tie searches draw
    // this value hundreds of thousands of times).
    sign * (1.0 + ctx.unit()) * f64::from_bits(((1023 - e) as u64) << 52)
}

/// `k` distinct indices of `0..n`.
fn distinct(ctx: &mut GenContext, n: usize, k: usize) -> Vec<usize> {
    let mut all: Vec<usize> = (0..n).collect();
    ctx.shuffle(&mut all);
    all.truncate(k);
    all
}

/// The smallest power of two `A` with `A * EXCLUDE_KEY * scale >= EXCLUDE + 16`: the weight of
/// a slot's exclusion channel.
fn exclusion_weight(rows: &Rows) -> Result<f64, OpError> {
    let scale = rows.c.g.scale as f64;
    let mut a = 1.0f64;
    while a * EXCLUDE_KEY * scale < EXCLUDE + 16.0 {
        a *= 2.0;
    }
    let max = if rows.c.p.dtype == DType::F16 {
        32768.0
    } else {
        1e30
    };
    if a > max {
        return Err(regime_err(
            Regime::RoundingTies,
            format!("the scale {scale} is too small for an exclusion weight in the dtype"),
        ));
    }
    Ok(a)
}

/// `rounding_ties` (module doc).
fn ties(rows: &mut Rows, recipe: &MlaRecipe, ctx: &mut GenContext) -> Result<(), OpError> {
    let c = rows.c;
    let (dtype, step, kernel) = (c.p.dtype, recipe.kernel.step, &recipe.kernel);
    let scale = c.g.scale;
    let lk = &c.g.lk;
    let pick = |ctx: &mut GenContext, ok: &dyn Fn(usize) -> bool| -> usize {
        let eligible: Vec<usize> = (0..c.p.batch).filter(|&b| ok(lk[b])).collect();
        eligible[ctx.below(eligible.len() as u64) as usize]
    };
    let bo = pick(ctx, &|l| (2..=step).contains(&l));
    let bp = pick(ctx, &|l| l.min(step) > P_TIES);
    let heads = distinct(ctx, c.p.num_heads, 2);
    let (ho, hp) = (heads[0], heads[1]);
    let ch = distinct(ctx, ROPE, 5);
    let a = exclusion_weight(rows)?;
    let err = |m: String| regime_err(Regime::RoundingTies, m);

    // Output ties: head ho of entry bo sees two keys of score M and nothing else.
    rows.steer(bo, ho, &[(ch[0], a)]);
    let pair = distinct(ctx, lk[bo], 2);
    let level = rows.enc((1.0 + 5.0 * ctx.unit()) / (scale as f64 * a));
    for j in 0..lk[bo] {
        let v = if pair.contains(&j) {
            level
        } else {
            rows.enc(-EXCLUDE_KEY)
        };
        rows.rope(bo, j)[ch[0]] = v;
    }
    let m_o = (a * rows.dec(level)) as f32 * scale;
    let fr = p_factor(kernel, dtype, m_o) as f64;
    for col in distinct(ctx, LATENT, TIE_COLUMNS) {
        let vb = rows.latent(bo, pair[1])[col];
        let vb = rows.dec(vb);
        let mut draws = 0;
        loop {
            let va = rows.latent(bo, pair[0])[col];
            let va = rows.dec(va);
            let (sum, mean) = (va + vb, (va + vb) / 2.0);
            if sums_exact(&[fr * va, fr * vb])
                && (mean as f32) as f64 == mean
                && splits(dtype, mean as f32)
            {
                debug_assert!((sum as f32) as f64 == sum);
                break;
            }
            draws += 1;
            if draws > MAX_DRAWS {
                return Err(err(format!("no output tie found in column {col}")));
            }
            let bits = rows.enc(ctx.standard_normal());
            rows.latent(bo, pair[0])[col] = bits;
        }
    }

    // P ties (and one factor tie): head hp of entry bp, maximum key jm of score M.
    let (a1, a2, a3) = (1.0f64, 0.375f64, 1.0f64);
    let (cx, c1, c2, c3) = (ch[1], ch[2], ch[3], ch[4]);
    rows.steer(bp, hp, &[(cx, a), (c1, a1), (c2, a2), (c3, a3)]);
    for j in 0..lk[bp] {
        rows.rope(bp, j)[cx] = rows.enc(-EXCLUDE_KEY);
    }
    // first[0] is the maximum key, the others the P ties.
    let first = distinct(ctx, lk[bp].min(step), P_TIES + 1);
    let s32 = |dot: f64| (dot as f32) * scale;
    let mut draws = 0;
    let (level, w, m_p) = loop {
        let level = rows.dec(rows.enc((1.0 + 5.0 * ctx.unit()) / (scale as f64 * a)));
        let w = rows.dec(rows.enc(spread(ctx)));
        let terms = [a * level, a3 * w];
        if sums_exact(&terms) {
            let m = s32(terms.iter().sum());
            let (_, f, _) = amla_factor(kernel, dtype, m);
            if !kernel.rescale.is_amla() || splits(dtype, f) {
                break (level, w, m);
            }
        }
        draws += 1;
        if draws > MAX_DRAWS {
            return Err(err("no maximum whose AMLA factor is a tie found".into()));
        }
    };
    let (lv, wv, zero) = (rows.enc(level), rows.enc(w), rows.enc(0.0));
    for &j in &first {
        let r = rows.rope(bp, j);
        r[cx] = lv;
        r[c3] = wv;
        r[c1] = zero;
        r[c2] = zero;
    }
    let factor = p_factor(kernel, dtype, m_p);
    for &j in &first[1..] {
        let mut draws = 0;
        loop {
            let d = -(0.1 + 2.9 * ctx.unit());
            let u1 = rows.dec(rows.enc(d / scale as f64));
            let u2 = rows.dec(rows.enc(spread(ctx)));
            let terms = [a * level, a3 * w, a1 * u1, a2 * u2];
            // The cheap tests first: a P tie is rare, an inexact sum rarer still.
            let s = s32(terms.iter().sum());
            if s < m_p && splits(dtype, p_before_cast(factor, s, m_p)) && sums_exact(&terms) {
                let (e1, e2) = (rows.enc(u1), rows.enc(u2));
                let r = rows.rope(bp, j);
                r[c1] = e1;
                r[c2] = e2;
                break;
            }
            draws += 1;
            if draws > MAX_DRAWS {
                return Err(err(format!("no P tie found for key {j}")));
            }
        }
    }

    // Every key a slot must not see is excluded; its chosen keys score as computed.
    for (b, h, m, seen) in [(bo, ho, m_o, &pair[..]), (bp, hp, m_p, &first[..])] {
        let s = rows.scores(b, h);
        for (j, &x) in s.iter().enumerate() {
            let fine = if seen.contains(&j) {
                x <= m as f64 + 1e-3 * (m as f64).abs()
            } else {
                x <= m as f64 - EXCLUDE
            };
            if !fine {
                return Err(err(format!(
                    "key {j} of batch entry {b} scores {x} for head {h} (maximum {m})"
                )));
            }
        }
    }
    Ok(())
}

/// `subnormal_outputs` (module doc).
fn subnormal_columns(rows: &mut Rows, ctx: &mut GenContext) -> Result<(), OpError> {
    let c = rows.c;
    let (lo, hi) = subnormal_codes(ElemType::from(c.p.dtype)).ok_or_else(|| {
        regime_err(
            Regime::SubnormalOutputs,
            "needs a float dtype with subnormals",
        )
    })?;
    let cols = distinct(ctx, LATENT, 2);
    for b in 0..c.p.batch {
        for j in 0..c.g.lk[b] {
            for (&col, sign) in cols.iter().zip([0u32, 0x8000]) {
                let bits = (lo + ctx.below((hi - lo + 1) as u64) as u32) | sign;
                rows.latent(b, j)[col] = bits as u16;
            }
        }
    }
    Ok(())
}

/// `moderate_late_max` (`late`) or `moderate_early_max` (module doc).
fn moderate(rows: &mut Rows, step: usize, late: bool, ctx: &mut GenContext) -> Result<(), OpError> {
    let c = rows.c;
    let n = c.p.num_heads;
    let scale = c.g.scale as f64;
    let r = if late {
        Regime::ModerateLateMax
    } else {
        Regime::ModerateEarlyMax
    };
    for b in 0..c.p.batch {
        let lk = c.g.lk[b];
        if lk < step + n {
            continue;
        }
        let later: Vec<usize> = distinct(ctx, lk - step, n)
            .into_iter()
            .map(|j| j + step)
            .collect();
        let early = distinct(ctx, step, n);
        let mut plan = Vec::with_capacity(n);
        for h in 0..n {
            let s = rows.scores(b, h);
            let weight: f64 = rows.query(b, h).iter().map(|x| x.abs()).sum::<f64>() * scale;
            if weight == 0.0 {
                return Err(regime_err(
                    r,
                    format!("head {h} of batch entry {b} has an all-zero query"),
                ));
            }
            let first_max = s[..step].iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let untouched = |j: &usize| !later.contains(j) && !early.contains(j);
            let rest = (0..lk)
                .filter(untouched)
                .map(|j| s[j])
                .fold(f64::NEG_INFINITY, f64::max);
            if late {
                // The key also leads the later steps' own keys by 5, with 1.5 to spare for the
                // other heads' late keys (a tenth of their score's spread reaches this head).
                let later_rest = (step..lk)
                    .filter(|j| !later.contains(j))
                    .map(|j| s[j])
                    .fold(f64::NEG_INFINITY, f64::max);
                let hi = MODERATE_LATE_GAP.1 - 0.5;
                // Where a later key comes within 3.5 of the first step's largest (wide score
                // spreads), a first-step key 1 below it becomes the first step's largest.
                let (first_max, raise) = if later_rest + MODERATE_LATE_GAP.0 + 1.5 - first_max > hi
                {
                    (
                        later_rest - 1.0,
                        Some((early[h], (later_rest - 1.0) / weight)),
                    )
                } else {
                    (first_max, None)
                };
                let lo = (MODERATE_LATE_GAP.0 + 0.5)
                    .max(later_rest + MODERATE_LATE_GAP.0 + 1.5 - first_max);
                let gap = lo + (hi - lo) * ctx.unit();
                plan.push((h, later[h], (first_max + gap) / weight, raise));
            } else {
                let margin = MODERATE_EARLY_MARGIN.0
                    + 0.25
                    + (MODERATE_EARLY_MARGIN.1 - MODERATE_EARLY_MARGIN.0 - 0.5) * ctx.unit();
                let top = rest + MODERATE_EARLY_MARGIN.1 + 0.5;
                plan.push((
                    h,
                    early[h],
                    top / weight,
                    Some((later[h], (top - margin) / weight)),
                ));
            }
        }
        for &(h, j, beta, second) in &plan {
            if beta <= 0.0 {
                return Err(regime_err(
                    r,
                    format!("head {h} of batch entry {b}: the maximum would score below 0"),
                ));
            }
            rows.sign_key(b, h, j, beta);
            if let Some((j2, beta2)) = second {
                rows.sign_key(b, h, j2, beta2);
            }
        }
        // The promises, on the rounded inputs.
        for &(h, j, _, _) in &plan {
            let s = rows.scores(b, h);
            let top = s[j];
            let others = (0..lk)
                .filter(|&i| i != j)
                .map(|i| s[i])
                .fold(f64::NEG_INFINITY, f64::max);
            let ok = if late {
                let first_max = s[..step].iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let gap = top - first_max;
                (MODERATE_LATE_GAP.0..=MODERATE_LATE_GAP.1).contains(&gap)
                    && top - others >= MODERATE_LATE_GAP.0
            } else {
                let later_max = s[step..].iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let lead = top - later_max;
                top > others && (MODERATE_EARLY_MARGIN.0..=MODERATE_EARLY_MARGIN.1).contains(&lead)
            };
            if !ok {
                return Err(regime_err(
                    r,
                    format!(
                        "head {h} of batch entry {b}: the maximum at key {j} ({top}) does not hold the regime's gap on the rounded inputs"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subset_sums_are_exact_only_when_every_partial_sum_is() {
        assert!(sums_exact(&[1.0, 2.0, 0.5]));
        assert!(!sums_exact(&[1.0, 1.0 / (1u64 << 30) as f64]));
        assert!(!sums_exact(&[16777216.0, 1.0, -1.0]));
    }

    #[test]
    fn a_tie_splits_the_rules_and_a_non_tie_does_not() {
        // bf16 keeps 8 significant bits: 1 + 2^-8 is halfway between 1 (even) and 1 + 2^-7
        // (odd); 1 + 3 2^-8 is halfway between an odd value and the even one above it.
        assert!(splits(DType::Bf16, 1.0 + 1.0 / 256.0));
        assert!(!splits(DType::Bf16, 1.0 + 3.0 * 1.0 / 256.0));
        assert!(!splits(DType::Bf16, 1.0 + 1.0 / 512.0));
        assert!(splits(DType::F16, 1.0 + 1.0 / 2048.0));
        assert!(!splits(DType::F16, 1.0 + 3.0 * 1.0 / 2048.0));
    }
}
