//! vLLM paged attention's softmax (numerics.md "vLLM paged attention"): not online. For each
//! row, all scores of the key range first (`qk = scale * dot` in f32), then the max, `e =
//! exp(qk - max)`, the sum (16-lane order), `p = e * (1 / (sum + eps))` cast to the P dtype,
//! and `out = sum_j p_j v_j` accumulated in f32 in key order. The output is already
//! normalised; masked keys (and keys outside the range) do not take part.

use super::kernel::{pv_tile, qk_tile};
use super::online::{lane_sum, SoftmaxArith};
use super::recipe::{EmptyRow, LseFormula, Recipe};
use super::rows::{HeadTask, RowsResult};
use crate::math;
use std::ops::Range;

/// A row's LSE from its row sum and its maximum in the scaled (natural) domain, by the
/// recipe's formula.
pub(crate) fn row_lse(recipe: &Recipe, sum: f32, scaled_max: f32) -> f32 {
    match recipe.lse {
        LseFormula::LnSumPlusMax => recipe.ln_impl.ln_of(sum) + scaled_max,
        LseFormula::Log2Domain => {
            (math::log2_f32(sum) + scaled_max * math::LOG2_E_F32) * std::f32::consts::LN_2
        }
    }
}

/// vLLM-style two-pass attention of `rows` of `task` over `keys`.
pub fn two_pass_rows(
    recipe: &Recipe,
    task: &HeadTask,
    rows: Range<usize>,
    keys: Range<usize>,
) -> RowsResult {
    let nr = rows.len();
    let dim = task.q.dim();
    let nk = keys.len();
    let arith = SoftmaxArith::new(recipe, task.scale);
    let qrows: Vec<&[f32]> = rows.clone().map(|i| task.q.row(i)).collect();
    let mut s = vec![0.0f32; nr * nk];
    if nk > 0 {
        qk_tile(recipe.qk_order, &qrows, &task.k, keys.clone(), &mut s, nk);
    }
    let mut max = vec![f32::NEG_INFINITY; nr];
    let mut sum = vec![0.0f32; nr];
    let mut has_key = vec![false; nr];
    for r in 0..nr {
        let i = rows.start + r;
        let srow = &mut s[r * nk..(r + 1) * nk];
        let mut allowed = vec![false; nk];
        let mut mx = f32::NEG_INFINITY;
        for (c, x) in srow.iter_mut().enumerate() {
            let ok = task.mask.allowed(i, keys.start + c);
            allowed[c] = ok;
            if ok {
                *x = arith.score(*x);
                has_key[r] = true;
                if *x > mx {
                    mx = *x;
                }
            }
        }
        let mu = SoftmaxArith::guard(mx);
        for (c, x) in srow.iter_mut().enumerate() {
            *x = if allowed[c] { arith.p(*x, mu) } else { 0.0 };
        }
        let total = lane_sum(srow);
        let inv = 1.0 / (total + recipe.epsilon);
        for x in srow.iter_mut() {
            *x = recipe.p_dtype.quantize_f32(*x * inv, recipe.p_rounding);
        }
        max[r] = mx;
        sum[r] = total;
    }
    let mut out = vec![0.0f32; nr * dim];
    if nk > 0 {
        pv_tile(&s, nk, nr, &task.v, keys, &mut out);
    }
    let mut lse = vec![0.0f32; nr];
    for r in 0..nr {
        if !has_key[r]
            && let EmptyRow::Zero { lse: v } = recipe.empty_row
        {
            out[r * dim..(r + 1) * dim].fill(0.0);
            lse[r] = v;
            continue;
        }
        lse[r] = row_lse(
            recipe,
            sum[r],
            arith.scaled_max(SoftmaxArith::guard(max[r])),
        );
    }
    RowsResult {
        out,
        lse,
        max,
        sum,
        has_key,
    }
}
