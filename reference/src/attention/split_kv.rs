//! Split-KV (flash-decoding, vLLM v2): the key range is cut into partitions of
//! `split.partition` keys, each partition is attended independently (its normalised output
//! stored in the partial dtype), and the partials are combined in partition order:
//! - [`Combine::Lse`] (numerics.md "Split-KV combine"): M = max_s lse_s; L = ln(sum_s
//!   exp(lse_s - M)) + M; O = sum_s exp(lse_s - L) O_s;
//! - [`Combine::VllmExpSum`] (vLLM v2 reduce): M = max_s m_s; w_s = sum_s * exp(m_s - M);
//!   O = sum_s (O_s * w_s) * (1 / (sum_s w_s + 1e-6));
//! - [`Combine::AscendSumMax`] (Ascend flash decode): M = max_s m_s; w_s = sum_s * exp(m_s -
//!   M); W = sum_s w_s; O = sum_s (w_s / W) * O_s; lse = ln(W) + M.
//!
//! All combine arithmetic is f32 in partition order. Partitions without an allowed key take
//! no part; a single partition is returned as is (after the partial rounding), as vLLM v2
//! copies its only partial output.

use super::online::online_rows;
use super::recipe::{Algorithm, Combine, EmptyRow, MathImpl, Recipe, SplitKv};
use super::rows::{HeadTask, RowsResult};
use super::two_pass::two_pass_rows;
use std::ops::Range;

/// One pass of the recipe's algorithm over `keys`, without splitting.
pub fn base_rows(
    recipe: &Recipe,
    kv_tile: usize,
    task: &HeadTask,
    rows: Range<usize>,
    keys: Range<usize>,
) -> RowsResult {
    match recipe.algorithm {
        Algorithm::Online => online_rows(recipe, kv_tile, task, rows, keys),
        Algorithm::TwoPass => two_pass_rows(recipe, task, rows, keys),
    }
}

/// Split-KV attention of `rows` over `keys` with the partitioning `split`.
pub fn split_rows(
    recipe: &Recipe,
    split: &SplitKv,
    kv_tile: usize,
    task: &HeadTask,
    rows: Range<usize>,
    keys: Range<usize>,
) -> RowsResult {
    let part = split.partition.max(1);
    let n_parts = keys.len().div_ceil(part).max(1);
    let partials: Vec<RowsResult> = (0..n_parts)
        .map(|p| {
            let ks = keys.start + p * part..(keys.start + (p + 1) * part).min(keys.end);
            let mut r = base_rows(recipe, kv_tile, task, rows.clone(), ks);
            for x in r.out.iter_mut() {
                *x = split.partial_dtype.quantize_f32(*x, split.partial_rounding);
            }
            r
        })
        .collect();
    let partials = match <[RowsResult; 1]>::try_from(partials) {
        Ok([only]) => return only,
        Err(all) => all,
    };
    let nr = rows.len();
    let dim = task.q.dim();
    let mut out = vec![0.0f32; nr * dim];
    let mut lse = vec![0.0f32; nr];
    let mut max = vec![f32::NEG_INFINITY; nr];
    let mut sum = vec![0.0f32; nr];
    let mut has_key = vec![false; nr];
    for r in 0..nr {
        // A partition is live when it saw an allowed key, or, for the decode kernel (no
        // row-invalid correction), when it computed a row over masked keys.
        let computed = |p: &RowsResult| {
            p.has_key[r] || (!recipe.empty_row.skips_masked_tiles() && p.sum[r] > 0.0)
        };
        let live: Vec<&RowsResult> = partials.iter().filter(|p| computed(p)).collect();
        let orow = &mut out[r * dim..(r + 1) * dim];
        if live.is_empty() {
            match recipe.empty_row {
                EmptyRow::Zero { lse: v } => lse[r] = v,
                EmptyRow::DecodeKernel { empty_kv_lse } => lse[r] = empty_kv_lse,
                EmptyRow::Arithmetic => {
                    lse[r] = f32::NAN;
                    orow.fill(f32::NAN);
                }
            }
            continue;
        }
        has_key[r] = partials.iter().any(|p| p.has_key[r]);
        let parts: Vec<PartialRow> = live
            .iter()
            .map(|p| PartialRow {
                lse: p.lse[r],
                max: p.max[r],
                sum: p.sum[r],
                out: &p.out[r * dim..(r + 1) * dim],
            })
            .collect();
        (lse[r], max[r], sum[r]) =
            combine_row(split.combine, recipe.exp_impl, recipe.ln_impl, &parts, orow);
    }
    RowsResult {
        out,
        lse,
        max,
        sum,
        has_key,
    }
}

/// One row of one partition, as the combine sees it.
pub(crate) struct PartialRow<'a> {
    pub lse: f32,
    pub max: f32,
    pub sum: f32,
    /// The partition's normalised output row (after the partial rounding).
    pub out: &'a [f32],
}

/// Combines one row's partials (each partition with an allowed key, in order) into `orow`
/// (zeroed) by `combine`; returns the row's (lse, max, sum).
pub(crate) fn combine_row(
    combine: Combine,
    exp_impl: MathImpl,
    ln_impl: MathImpl,
    parts: &[PartialRow],
    orow: &mut [f32],
) -> (f32, f32, f32) {
    let exp = |x: f32| exp_impl.exp_of(x);
    let ln = |x: f32| ln_impl.ln_of(x);
    match combine {
        Combine::Lse => {
            let mut mm = f32::NEG_INFINITY;
            for p in parts {
                if p.lse > mm {
                    mm = p.lse;
                }
            }
            let mut total = 0.0f32;
            for p in parts {
                total += exp(p.lse - mm);
            }
            let big_l = ln(total) + mm;
            for p in parts {
                let w = exp(p.lse - big_l);
                for (o, &x) in orow.iter_mut().zip(p.out) {
                    *o += w * x;
                }
            }
            (big_l, mm, total)
        }
        Combine::VllmExpSum => {
            let mut mm = f32::NEG_INFINITY;
            for p in parts {
                if p.max > mm {
                    mm = p.max;
                }
            }
            let w: Vec<f32> = parts.iter().map(|p| p.sum * exp(p.max - mm)).collect();
            let mut g = 0.0f32;
            for &x in &w {
                g += x;
            }
            let inv = 1.0 / (g + 1e-6);
            for (p, &ws) in parts.iter().zip(&w) {
                for (o, &x) in orow.iter_mut().zip(p.out) {
                    *o += x * ws * inv;
                }
            }
            (ln(g) + mm, mm, g)
        }
        Combine::AscendSumMax => {
            let sm: Vec<(f32, f32, &[f32])> = parts.iter().map(|p| (p.max, p.sum, p.out)).collect();
            ascend_sum_max(&sm, exp_impl, ln_impl, orow)
        }
    }
}

/// The recipe's computation of `rows` over every valid key of `task`.
pub fn rows_result(
    recipe: &Recipe,
    kv_tile: usize,
    task: &HeadTask,
    rows: Range<usize>,
) -> RowsResult {
    let keys = 0..task.mask.lk;
    match &recipe.split {
        Some(split) => split_rows(recipe, split, kv_tile, task, rows, keys),
        None => base_rows(recipe, kv_tile, task, rows, keys),
    }
}

/// The Ascend flash-decode combine of one row's partials `(max, sum, normalised out)` into
/// `orow`: M = max m_s; w_s = l_s * exp(m_s - M); W = sum w_s (in order); O = sum (w_s / W)
/// O_s, the first term stored and the others added in order (so a stored -0.0 stays -0.0,
/// as the kernel's first multiply writes its destination). Returns (ln W + M, M, W).
fn ascend_sum_max(
    parts: &[(f32, f32, &[f32])],
    exp_impl: MathImpl,
    ln_impl: MathImpl,
    orow: &mut [f32],
) -> (f32, f32, f32) {
    let mut mm = f32::NEG_INFINITY;
    for &(m, _, _) in parts {
        if m > mm {
            mm = m;
        }
    }
    let w: Vec<f32> = parts
        .iter()
        .map(|&(m, l, _)| l * exp_impl.exp_of(m - mm))
        .collect();
    let mut total = 0.0f32;
    for &x in &w {
        total += x;
    }
    for (s, (&(_, _, out), &ws)) in parts.iter().zip(&w).enumerate() {
        let ws = ws / total;
        for (o, &x) in orow.iter_mut().zip(out) {
            *o = if s == 0 { ws * x } else { *o + ws * x };
        }
    }
    (ln_impl.ln_of(total) + mm, mm, total)
}

#[cfg(test)]
mod tests {
    use super::ascend_sum_max;
    use crate::attention::recipe::MathImpl::LibmF32;

    #[test]
    fn the_ascend_combine_weights_partials_by_sum_and_max() {
        // Two partials of one row: (max, sum, normalised out).
        let a = [0.25f32, -0.0, 1.5];
        let b = [-0.5f32, -0.0, 0.125];
        let (ma, la, mb, lb) = (2.0f32, 3.0f32, 1.0f32, 5.0f32);
        let mut o = [f32::NAN; 3];
        let (lse, m, w) = ascend_sum_max(&[(ma, la, &a), (mb, lb, &b)], LibmF32, LibmF32, &mut o);
        // In f64: the exact attention of the union of both key sets.
        let wa = la as f64;
        let wb = lb as f64 * libm::exp(mb as f64 - ma as f64);
        let total = wa + wb;
        for d in 0..3 {
            let want = (wa * a[d] as f64 + wb * b[d] as f64) / total;
            assert!(
                (o[d] as f64 - want).abs() <= 1e-6 * want.abs().max(1e-30),
                "{d}"
            );
        }
        assert_eq!(m, ma);
        assert!((w as f64 - total).abs() <= 1e-6 * total);
        assert!((lse as f64 - (libm::log(total) + ma as f64)).abs() <= 1e-6);
        // -0.0 in every partial stays -0.0 (stored, then -0.0 + -0.0).
        assert_eq!(o[1].to_bits(), (-0.0f32).to_bits());
        // One partial: weight exactly 1, its output and lse unchanged.
        let mut one = [0.0f32; 3];
        let (lse1, _, _) = ascend_sum_max(&[(ma, la, &a)], LibmF32, LibmF32, &mut one);
        assert_eq!(one.map(f32::to_bits), a.map(f32::to_bits));
        assert_eq!(lse1, crate::math::ln_f32(la) + ma);
    }
}
