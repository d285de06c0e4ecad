//! FlashAttention-2 online softmax, every numerically relevant step chosen by the [`Recipe`].
//!
//! For one query tile (rows) and a key range, KV tiles of `kv_tile` keys are visited in the
//! recipe's order; a tile fully masked for every row of the query tile is skipped (as kernels
//! skip it). Per visited tile and row (numerics.md "Online softmax"):
//! 1. `S = Q K^T` in f32 ([`super::kernel::qk_tile`], the recipe's reduction order);
//! 2. scale (after the matmul, or folded into the exp2 exponent), mask fill, in the score
//!    precision;
//! 3. `m_new = max(m_old, rowmax S)`; a max of -inf is used as 0 in exponents (the FA2 guard);
//! 4. `P = exp(S - m_new)` (exp or exp2 flavour); `alpha = exp(m_old - m_new)`;
//! 5. `P` cast to the P dtype with the P rounding; the tile's row sum (of raw or rounded P, in
//!    the 16-lane order of [`crate::dot`]) gives `l = l * alpha + rowsum`;
//! 6. `PV` in f32 ([`super::kernel::pv_tile`]), then `O = O * alpha + PV` (vector f32) or
//!    `O = q(alpha) * q(O) + PV` (seed 000 diagonal matmul, q = cast to the P dtype);
//!
//! and at the end `O / (l + eps)` or `O * (1 / (l + eps))`, LSE by the recipe's formula, and
//! the empty-row policy for rows that saw no allowed key.

use super::kernel::{pv_tile, pv_tile_lanes, qk_tile};
use super::recipe::{
    BlockOrder, EmptyRow, ExpFlavour, LseFormula, MaskFill, MathImpl, Normalize, ORescale, PvOrder,
    Recipe, ReductionOrder, RowSumOf, ScalePlacement, ScorePrecision,
};
use super::rows::{HeadTask, RowsResult};
use super::vexp;
use crate::dot::{combine_lanes, LANES};
use crate::formats::{f16, DType, Rounding};
use crate::math;
use std::ops::Range;

/// Rounds to f16 with RNE and back (the f16 score-precision steps).
#[inline(always)]
fn r16(x: f32) -> f32 {
    f16::quantize_f32_f16(x, Rounding::RNE)
}

/// The per-recipe constants of the softmax arithmetic.
#[derive(Clone, Copy)]
pub(crate) struct SoftmaxArith {
    precision: ScorePrecision,
    placement: ScalePlacement,
    exp: ExpFlavour,
    fma: bool,
    fill: MaskFill,
    exp_impl: MathImpl,
    /// The scale in the score precision.
    scale: f32,
    /// `f32(scale * log2(e))` for the folded exponent.
    scale_log2: f32,
}

impl SoftmaxArith {
    pub(crate) fn new(recipe: &Recipe, scale: f32) -> SoftmaxArith {
        SoftmaxArith {
            precision: recipe.score_precision,
            placement: recipe.scale_placement,
            exp: recipe.exp,
            fma: recipe.exp_fma,
            fill: recipe.mask_fill,
            exp_impl: recipe.exp_impl,
            scale: match recipe.score_precision {
                ScorePrecision::F32 => scale,
                ScorePrecision::F16 => r16(scale),
            },
            scale_log2: scale * math::LOG2_E_F32,
        }
    }

    /// Whether P is `expf(s - m)` on f32 scores (the slice fast path applies).
    #[inline(always)]
    pub(crate) fn is_plain_exp(&self) -> bool {
        self.precision == ScorePrecision::F32
            && self.placement == ScalePlacement::AfterMatmul
            && self.exp == ExpFlavour::Exp
            && self.exp_impl == MathImpl::LibmF32
    }

    /// The score of an allowed key from its dot product.
    #[inline(always)]
    pub(crate) fn score(&self, dot: f32) -> f32 {
        match (self.precision, self.placement) {
            (ScorePrecision::F32, ScalePlacement::AfterMatmul) => dot * self.scale,
            (ScorePrecision::F32, ScalePlacement::FoldedIntoExp2) => dot,
            (ScorePrecision::F16, _) => r16(r16(dot) * self.scale),
        }
    }

    /// The score of a masked key.
    #[inline(always)]
    pub(crate) fn masked(&self, dot: f32) -> f32 {
        match self.fill {
            MaskFill::NegInf => f32::NEG_INFINITY,
            MaskFill::NegFltMax => -f32::MAX,
            MaskFill::AdditiveMinus10000 => match self.precision {
                ScorePrecision::F32 => self.score(dot) + -10000.0,
                ScorePrecision::F16 => r16(self.score(dot) + -10000.0),
            },
            MaskFill::SelectMinus1e12 => -1.0e12,
            MaskFill::SelectF16Lowest => -65504.0,
        }
    }

    /// The max used in exponents: the FA2 guard maps -inf to 0.
    #[inline(always)]
    pub(crate) fn guard(m: f32) -> f32 {
        if m == f32::NEG_INFINITY {
            0.0
        } else {
            m
        }
    }

    /// `exp(s - m)` in the recipe's flavour (`m` guarded).
    #[inline(always)]
    pub(crate) fn p(&self, s: f32, m: f32) -> f32 {
        match (self.placement, self.exp) {
            (ScalePlacement::FoldedIntoExp2, _) => {
                let ms = m * self.scale_log2;
                let x = if self.fma {
                    math::fma_f32(s, self.scale_log2, -ms)
                } else {
                    s * self.scale_log2 - ms
                };
                math::exp2_f32(x)
            }
            (ScalePlacement::AfterMatmul, ExpFlavour::Exp) => match self.precision {
                ScorePrecision::F32 => self.exp_impl.exp_of(s - m),
                ScorePrecision::F16 => r16(self.exp_impl.exp_of(r16(s - m))),
            },
            (ScalePlacement::AfterMatmul, ExpFlavour::Exp2) => match self.precision {
                ScorePrecision::F32 => math::exp2_f32((s - m) * math::LOG2_E_F32),
                ScorePrecision::F16 => r16(math::exp2_f32(r16(r16(s - m) * math::LOG2_E_F32))),
            },
        }
    }

    /// The rescale factor `exp(m_old - m_new)` (`m_new` guarded).
    #[inline(always)]
    pub(crate) fn alpha(&self, m_old: f32, m_new: f32) -> f32 {
        match (self.placement, self.exp) {
            (ScalePlacement::FoldedIntoExp2, _) => {
                math::exp2_f32((m_old - m_new) * self.scale_log2)
            }
            (ScalePlacement::AfterMatmul, ExpFlavour::Exp) => match self.precision {
                ScorePrecision::F32 => self.exp_impl.exp_of(m_old - m_new),
                ScorePrecision::F16 => r16(self.exp_impl.exp_of(r16(m_old - m_new))),
            },
            (ScalePlacement::AfterMatmul, ExpFlavour::Exp2) => match self.precision {
                ScorePrecision::F32 => math::exp2_f32((m_old - m_new) * math::LOG2_E_F32),
                ScorePrecision::F16 => {
                    r16(math::exp2_f32(r16(r16(m_old - m_new) * math::LOG2_E_F32)))
                }
            },
        }
    }

    /// The row max in the scaled (natural) domain, from the max of scores.
    #[inline(always)]
    pub(crate) fn scaled_max(&self, m: f32) -> f32 {
        match self.placement {
            ScalePlacement::AfterMatmul => m,
            ScalePlacement::FoldedIntoExp2 => m * self.scale,
        }
    }
}

/// Sum of `x` in `order`: the 16-lane order of [`crate::dot::dot_f32`], or sequentially.
#[inline(always)]
pub(crate) fn ordered_sum(x: &[f32], order: ReductionOrder) -> f32 {
    match order {
        ReductionOrder::Lanes16 => lane_sum(x),
        ReductionOrder::Sequential => {
            let mut s = 0.0f32;
            for &v in x {
                s += v;
            }
            s
        }
    }
}

/// Sum of `x` in the 16-lane order of [`crate::dot::dot_f32`].
#[inline(always)]
pub(crate) fn lane_sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            acc[l] += c[l];
        }
    }
    for (l, &v) in chunks.remainder().iter().enumerate() {
        acc[l] += v;
    }
    combine_lanes(acc)
}

/// Final normalisation, LSE and empty-row policy of one row, in place.
pub(crate) fn finish_row(
    recipe: &Recipe,
    arith: &SoftmaxArith,
    o: &mut [f32],
    m: f32,
    l: f32,
    has_key: bool,
) -> f32 {
    if !has_key {
        match recipe.empty_row {
            EmptyRow::Zero { lse } => {
                o.fill(0.0);
                return lse;
            }
            // No tile visited: no key at all.
            EmptyRow::DecodeKernel { empty_kv_lse } if l == 0.0 => {
                o.fill(0.0);
                return empty_kv_lse;
            }
            _ => {}
        }
    }
    let denom = l + recipe.epsilon;
    match recipe.normalize {
        Normalize::Divide => o.iter_mut().for_each(|x| *x /= denom),
        Normalize::Reciprocal => {
            let inv = 1.0 / denom;
            o.iter_mut().for_each(|x| *x *= inv)
        }
        Normalize::DivideF16 { sum_rounding } => {
            // The quotient of two f16 values computed in f32 and rounded once to f16 is the
            // correctly rounded f16 quotient: f32 carries 24 >= 2 * 11 + 2 bits, so the
            // double rounding is innocuous (the same holds for the f16 multiply and add of
            // ORescale::VectorF16).
            let d16 = f16::quantize_f32_f16(denom, sum_rounding);
            o.iter_mut().for_each(|x| *x = r16(r16(*x) / d16))
        }
    }
    let ms = arith.scaled_max(SoftmaxArith::guard(m));
    match recipe.lse {
        LseFormula::LnSumPlusMax => recipe.ln_impl.ln_of(l) + ms,
        LseFormula::Log2Domain => {
            (math::log2_f32(l) + ms * math::LOG2_E_F32) * std::f32::consts::LN_2
        }
    }
}

/// Lanes of the row max: element c goes to lane c % 8; lanes combine in order 0..8. Each
/// step keeps the larger value (`>`), so a NaN score never becomes the max (it reaches the
/// output through its own exp) and the bits do not depend on the vector width.
const MAX_LANES: usize = 8;

#[inline(always)]
fn lane_max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; MAX_LANES];
    let mut chunks = x.chunks_exact(MAX_LANES);
    for c in &mut chunks {
        for l in 0..MAX_LANES {
            if c[l] > acc[l] {
                acc[l] = c[l];
            }
        }
    }
    for (l, &v) in chunks.remainder().iter().enumerate() {
        if v > acc[l] {
            acc[l] = v;
        }
    }
    let mut m = f32::NEG_INFINITY;
    for v in acc {
        if v > m {
            m = v;
        }
    }
    m
}

/// Step 2 of the module docs for one row of a tile: scores of allowed keys (those in
/// `interval` passing `allowed`), mask fill for the rest; returns the row max and whether a
/// key was allowed.
#[inline(always)]
fn row_scores(
    arith: &SoftmaxArith,
    srow: &mut [f32],
    start: usize,
    interval: (usize, usize),
    allowed: impl Fn(usize) -> bool,
) -> (f32, bool) {
    let (lo, hi) = interval;
    let a = lo.clamp(start, start + srow.len()) - start;
    let z = hi.clamp(start, start + srow.len()) - start;
    let z = z.max(a);
    let mut any = false;
    for (c, x) in srow.iter_mut().enumerate() {
        let ok = c >= a && c < z && allowed(start + c);
        *x = if ok {
            arith.score(*x)
        } else {
            arith.masked(*x)
        };
        any |= ok;
    }
    (lane_max(srow), any)
}

/// [`row_scores`] without an explicit mask: the allowed keys are exactly the interval, so
/// the row is three runs (masked, scored, masked), each a branch-free loop.
#[inline(always)]
fn row_scores_interval(
    arith: &SoftmaxArith,
    srow: &mut [f32],
    start: usize,
    interval: (usize, usize),
) -> (f32, bool) {
    let (lo, hi) = interval;
    let a = lo.clamp(start, start + srow.len()) - start;
    let z = (hi.clamp(start, start + srow.len()) - start).max(a);
    let (head, rest) = srow.split_at_mut(a);
    let (mid, tail) = rest.split_at_mut(z - a);
    for part in [head, tail] {
        match arith.fill {
            MaskFill::NegInf => part.fill(f32::NEG_INFINITY),
            MaskFill::NegFltMax => part.fill(-f32::MAX),
            MaskFill::AdditiveMinus10000 => part.iter_mut().for_each(|x| *x = arith.masked(*x)),
            MaskFill::SelectMinus1e12 => part.fill(-1.0e12),
            MaskFill::SelectF16Lowest => part.fill(-65504.0),
        }
    }
    match (arith.precision, arith.placement) {
        (ScorePrecision::F32, ScalePlacement::AfterMatmul) => {
            let scale = arith.scale;
            mid.iter_mut().for_each(|x| *x *= scale);
        }
        (ScorePrecision::F32, ScalePlacement::FoldedIntoExp2) => {}
        (ScorePrecision::F16, _) => mid.iter_mut().for_each(|x| *x = arith.score(*x)),
    }
    (lane_max(srow), z > a)
}

/// Steps 4-5 for one row: P in place (cast to the P dtype) and the row sum the recipe uses.
#[inline(always)]
fn row_probs(recipe: &Recipe, arith: &SoftmaxArith, srow: &mut [f32], mu: f32) -> f32 {
    let (p_dtype, p_rounding) = (recipe.p_dtype, recipe.p_rounding);
    if arith.is_plain_exp() {
        // s - m and expf, then the cast: the slice forms are bit-identical to the scalar.
        for x in srow.iter_mut() {
            *x -= mu;
        }
        vexp::exp_f32_slice(srow);
    } else {
        for x in srow.iter_mut() {
            *x = arith.p(*x, mu);
        }
    }
    let raw_sum = match recipe.rowsum_of {
        RowSumOf::RawP => Some(ordered_sum(srow, recipe.rowsum_order)),
        RowSumOf::RoundedP => None,
    };
    match p_dtype {
        DType::F32 => {}
        DType::Bf16 => vexp::quantize_bf16_slice(srow, p_rounding),
        DType::F16 => srow
            .iter_mut()
            .for_each(|x| *x = p_dtype.quantize_f32(*x, p_rounding)),
    }
    raw_sum.unwrap_or_else(|| ordered_sum(srow, recipe.rowsum_order))
}

/// Online softmax attention of query rows `rows` of `task` over keys `keys` with KV tiles of
/// `kv_tile` keys (tile boundaries at `keys.start + n * kv_tile`).
///
/// On x86_64 with AVX-512F the row arithmetic is compiled for it (wider vectors for the same
/// operations in the same order: the bits do not change).
pub fn online_rows(
    recipe: &Recipe,
    kv_tile: usize,
    task: &HeadTask,
    rows: Range<usize>,
    keys: Range<usize>,
) -> RowsResult {
    #[cfg(target_arch = "x86_64")]
    {
        if super::kernel::use_avx512() {
            // SAFETY: the callee's only requirement is AVX-512F, which `use_avx512`
            // (`crate::cpu::avx512`) detected at run time just above (the CONFORM_NO_AVX512 and
            // CONFORM_NO_SIMD switches only make it answer false).
            return unsafe { online_rows_avx512(recipe, kv_tile, task, rows, keys) };
        }
    }
    online_rows_body(recipe, kv_tile, task, rows, keys)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn online_rows_avx512(
    recipe: &Recipe,
    kv_tile: usize,
    task: &HeadTask,
    rows: Range<usize>,
    keys: Range<usize>,
) -> RowsResult {
    online_rows_body(recipe, kv_tile, task, rows, keys)
}

#[inline(always)]
fn online_rows_body(
    recipe: &Recipe,
    kv_tile: usize,
    task: &HeadTask,
    rows: Range<usize>,
    keys: Range<usize>,
) -> RowsResult {
    let nr = rows.len();
    let dim = task.q.dim();
    let arith = SoftmaxArith::new(recipe, task.scale);
    let kv_tile = kv_tile.max(1);
    let qrows: Vec<&[f32]> = rows.clone().map(|i| task.q.row(i)).collect();
    let mut m = vec![f32::NEG_INFINITY; nr];
    let mut l = vec![0.0f32; nr];
    let mut o = vec![0.0f32; nr * dim];
    let mut has_key = vec![false; nr];
    let mut alpha = vec![0.0f32; nr];
    // The previous tile's rescale factor per row (the lagged-rescale fault model).
    let mut lag = vec![1.0f32; nr];
    let mut fresh = vec![true; nr];
    let mut s = vec![0.0f32; nr * kv_tile];
    let mut pv = vec![0.0f32; nr * dim];
    let intervals: Vec<(usize, usize)> = rows.clone().map(|i| task.mask.interval(i)).collect();
    let explicit = task.mask.has_explicit();
    let n_tiles = keys.len().div_ceil(kv_tile);
    for t in 0..n_tiles {
        let t = match recipe.block_order {
            BlockOrder::Forward => t,
            BlockOrder::Reverse => n_tiles - 1 - t,
        };
        let tile = keys.start + t * kv_tile..(keys.start + (t + 1) * kv_tile).min(keys.end);
        if recipe.empty_row.skips_masked_tiles()
            && !task.mask.block_has_key(rows.clone(), tile.clone())
        {
            continue;
        }
        let bc = tile.len();
        qk_tile(
            recipe.qk_order,
            &qrows,
            &task.k,
            tile.clone(),
            &mut s,
            kv_tile,
        );
        for r in 0..nr {
            let i = rows.start + r;
            let srow = &mut s[r * kv_tile..r * kv_tile + bc];
            let (mx, any) = if explicit {
                row_scores(&arith, srow, tile.start, intervals[r], |j| {
                    task.mask.allowed(i, j)
                })
            } else {
                row_scores_interval(&arith, srow, tile.start, intervals[r])
            };
            has_key[r] |= any;
            let m_old = m[r];
            let m_new = if mx > m_old { mx } else { m_old };
            // The fault model that lets the running max fall to a tile's own maximum (a tile
            // without an allowed key keeps it), rescaling only when it rises.
            let (m_new, falls) = if recipe.o_rescale == ORescale::TileMaxNotCarried && any {
                (mx, mx < m_old)
            } else {
                (m_new, false)
            };
            let mu = SoftmaxArith::guard(m_new);
            let a = if falls { 1.0 } else { arith.alpha(m_old, mu) };
            fresh[r] = m_old == f32::NEG_INFINITY;
            alpha[r] = a;
            m[r] = m_new;
            let sum = row_probs(recipe, &arith, srow, mu);
            l[r] = l[r] * a + sum;
        }
        match recipe.pv_order {
            PvOrder::KeyByKey => pv_tile(&s, kv_tile, nr, &task.v, tile, &mut pv),
            PvOrder::Lanes16 => pv_tile_lanes(&s, kv_tile, nr, &task.v, tile, &mut pv),
        }
        for r in 0..nr {
            let a = alpha[r];
            let orow = &mut o[r * dim..(r + 1) * dim];
            let prow = &pv[r * dim..(r + 1) * dim];
            match recipe.o_rescale {
                ORescale::VectorF32 | ORescale::TileMaxNotCarried => {
                    for (x, &y) in orow.iter_mut().zip(prow) {
                        *x = *x * a + y;
                    }
                }
                ORescale::Lagged => {
                    // A row's first tile with a key has no factor to pass on.
                    let lagged = std::mem::replace(&mut lag[r], if fresh[r] { 1.0 } else { a });
                    for (x, &y) in orow.iter_mut().zip(prow) {
                        *x = *x * lagged + y;
                    }
                }
                ORescale::DiagonalMatmul => {
                    let aq = recipe.p_dtype.quantize_f32(a, recipe.p_rounding);
                    for (x, &y) in orow.iter_mut().zip(prow) {
                        *x = aq * recipe.p_dtype.quantize_f32(*x, recipe.p_rounding) + y;
                    }
                }
                ORescale::Skipped => {
                    for (x, &y) in orow.iter_mut().zip(prow) {
                        *x += y;
                    }
                }
                ORescale::HeldInPDtype => {
                    for (x, &y) in orow.iter_mut().zip(prow) {
                        *x = recipe.p_dtype.quantize_f32(*x * a + y, recipe.p_rounding);
                    }
                }
                ORescale::VectorF16 => {
                    // alpha is already an f16 value under f16 score precision; rounding it
                    // again is the identity there and keeps the multiply an f16 one otherwise.
                    let a16 = r16(a);
                    for (x, &y) in orow.iter_mut().zip(prow) {
                        *x = r16(r16(*x * a16) + r16(y));
                    }
                }
            }
        }
    }
    let mut lse = vec![0.0f32; nr];
    for r in 0..nr {
        lse[r] = finish_row(
            recipe,
            &arith,
            &mut o[r * dim..(r + 1) * dim],
            m[r],
            l[r],
            has_key[r],
        );
    }
    let max = m.iter().map(|&x| arith.scaled_max(x)).collect();
    RowsResult {
        out: o,
        lse,
        max,
        sum: l,
        has_key,
    }
}
