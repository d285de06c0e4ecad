//! Split-KV (flash-decoding, vLLM v2): the key range is cut into partitions of
//! `split.partition` keys, each partition is attended independently (its normalised output
//! stored in the partial dtype), and the partials are combined in partition order:
//! - [`Combine::Lse`] (numerics.md "Split-KV combine"): M = max_s lse_s; L = ln(sum_s
//!   exp(lse_s - M)) + M; O = sum_s exp(lse_s - L) O_s;
//! - [`Combine::VllmExpSum`] (vLLM v2 reduce): M = max_s m_s; w_s = sum_s * exp(m_s - M);
//!   O = sum_s (O_s * w_s) * (1 / (sum_s w_s + 1e-6)).
//!
//! All combine arithmetic is f32 in partition order. Partitions without an allowed key take
//! no part; a single partition is returned as is (after the partial rounding), as vLLM v2
//! copies its only partial output.

use super::online::online_rows;
use super::recipe::{Algorithm, Combine, EmptyRow, Recipe, SplitKv};
use super::rows::{HeadTask, RowsResult};
use super::two_pass::two_pass_rows;
use crate::math;
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
        let live: Vec<&RowsResult> = partials.iter().filter(|p| p.has_key[r]).collect();
        let orow = &mut out[r * dim..(r + 1) * dim];
        if live.is_empty() {
            match recipe.empty_row {
                EmptyRow::Zero { lse: v } => lse[r] = v,
                EmptyRow::Arithmetic => {
                    lse[r] = f32::NAN;
                    orow.fill(f32::NAN);
                }
            }
            continue;
        }
        has_key[r] = true;
        match split.combine {
            Combine::Lse => {
                let mut mm = f32::NEG_INFINITY;
                for p in &live {
                    if p.lse[r] > mm {
                        mm = p.lse[r];
                    }
                }
                let mut total = 0.0f32;
                for p in &live {
                    total += math::exp_f32(p.lse[r] - mm);
                }
                let big_l = math::ln_f32(total) + mm;
                for p in &live {
                    let w = math::exp_f32(p.lse[r] - big_l);
                    for (o, &x) in orow.iter_mut().zip(&p.out[r * dim..(r + 1) * dim]) {
                        *o += w * x;
                    }
                }
                lse[r] = big_l;
                max[r] = mm;
                sum[r] = total;
            }
            Combine::VllmExpSum => {
                let mut mm = f32::NEG_INFINITY;
                for p in &live {
                    if p.max[r] > mm {
                        mm = p.max[r];
                    }
                }
                let w: Vec<f32> = live
                    .iter()
                    .map(|p| p.sum[r] * math::exp_f32(p.max[r] - mm))
                    .collect();
                let mut g = 0.0f32;
                for &x in &w {
                    g += x;
                }
                let inv = 1.0 / (g + 1e-6);
                for (p, &ws) in live.iter().zip(&w) {
                    for (o, &x) in orow.iter_mut().zip(&p.out[r * dim..(r + 1) * dim]) {
                        *o += x * ws * inv;
                    }
                }
                lse[r] = math::ln_f32(g) + mm;
                max[r] = mm;
                sum[r] = g;
            }
        }
    }
    RowsResult {
        out,
        lse,
        max,
        sum,
        has_key,
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
