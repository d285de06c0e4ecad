//! The numeric regimes of the attention families ([`super::regime`]), made true after the
//! ordinary draw of a case's inputs, and a read-only view of a case's scores and mask (what
//! the regime checks and the attention faults need).
//!
//! Construction, per batch entry with a suitable row (the row, the keys and the signs are
//! drawn from the case's stream):
//!
//! - `masked_rows_lse`: when no valid query row is already without keys, one valid row (not
//!   one the other regimes use) gets an explicit mask row of all 1s.
//! - `large_logits` / `late_max`: a row `i` and a key `j` it sees (for `late_max`, `j` at or
//!   after the first KV tile, and a first-tile key made visible too). For each KV head the key
//!   row `k_j` is scaled (rounded once to the dtype) until its norm is at least 2.6 times that
//!   of every other key the row sees, and each query head of the group gets `q_i = round(c
//!   k_j)` with `c` chosen so that the scaled score is [`LARGE_LOGIT_TARGET`] (or
//!   [`LATE_MAX_TARGET`]). Every term `q_d k_d` is then non-negative, so the score is the
//!   target to within the dtype's rounding, and every other score of the row is at most
//!   1/2.6 of it (Cauchy-Schwarz). The result is checked before it is returned.

use super::regime::{
    Regime, LARGE_LOGIT_FLOOR, LARGE_LOGIT_TARGET, LATE_MAX_GAP, LATE_MAX_TARGET,
    MODERATE_EARLY_MARGIN, MODERATE_LATE_GAP,
};
use super::{ElemType, GenContext, OpError, Tensor, TensorMap};
use crate::attention::{mask::BatchMask, Geometry};
use crate::formats::Rounding;
use crate::math::sqrt_f64;

/// `masked_rows_lse` masks rows until this many LSE elements (rows x heads) belong to fully
/// masked rows, where the shape has the rows to spare.
const EMPTY_ROW_ELEMENTS: usize = 8;

/// A key row's norm is raised to at least this multiple of every other visible key's norm.
const DOMINANCE: f64 = 2.6;

/// Where the key rows of a case live.
pub(crate) struct KeyRows<'a> {
    /// The input tensor holding them (`key`, `key_cache`).
    pub tensor: &'static str,
    /// Element offset of key row (b, j, KV head) in that tensor (`head_dim` values contiguous).
    pub offset: &'a dyn Fn(usize, usize, usize) -> usize,
    /// Keys below this may be shared with another batch entry (a shared prefix): never chosen.
    pub first_free: usize,
    /// The paged cache's block size (`None`: the keys are a contiguous tensor).
    pub block: Option<usize>,
}

fn regime_err(op: &str, r: Regime, message: impl Into<String>) -> OpError {
    OpError::Regime {
        op: op.to_string(),
        regime: r.name().to_string(),
        message: message.into(),
    }
}

fn interval(g: &Geometry, b: usize, i: usize) -> (usize, usize) {
    BatchMask::structured(g.sparse, g.lq[b], g.lk[b]).interval(i)
}

fn large_ok((lo, hi): (usize, usize), first_free: usize) -> bool {
    hi > lo.max(first_free)
}

fn late_ok((lo, hi): (usize, usize), late: usize, first_free: usize) -> bool {
    lo < late && hi > late.max(first_free)
}

/// A moderate maximum needs a key it may rebuild on each side of the first tile's end.
fn moderate_ok((lo, hi): (usize, usize), tile: usize, first_free: usize) -> bool {
    lo.max(first_free) < tile && hi > tile.max(first_free)
}

/// The KV tile the case's recipe runs with on this problem (the prompt kernel's run-time
/// block, the decode kernel's sInner, or the recipe's fixed tile), which the moderate-maximum
/// regimes place the row maximum against. `recipe` is the case's recipe as the op runs it.
pub(crate) fn recipe_kv_tile(
    op: &str,
    recipe: &crate::attention::Recipe,
    shape: &crate::attention::ifa_tiling::IfaShape,
    fixed_tile: usize,
) -> Result<usize, OpError> {
    let (_, tile) = recipe.for_problem(shape, fixed_tile);
    if tile == 0 {
        return Err(regime_err(
            op,
            Regime::ModerateLateMax,
            "the recipe's KV tile is empty",
        ));
    }
    Ok(tile)
}

/// The name of the case's recipe, which the moderate-maximum regimes need (an oracle has no
/// KV tile).
pub(crate) fn moderate_recipe_name<'a>(
    op: &str,
    regimes: &[Regime],
    ctx: &'a GenContext,
) -> Result<Option<&'a str>, OpError> {
    let Some(r) = regimes.iter().copied().find(|r| r.is_moderate_max()) else {
        return Ok(None);
    };
    match ctx.recipe.as_deref() {
        Some(name) if name != super::ORACLE => Ok(Some(name)),
        _ => Err(regime_err(
            op,
            r,
            "needs a recipe preset (the row maximum is placed against the recipe's KV tile; the oracle has none)",
        )),
    }
}

fn valid_rows(g: &Geometry) -> impl Iterator<Item = (usize, usize)> + '_ {
    (0..g.batch).flat_map(move |b| (0..g.lq[b]).map(move |i| (b, i)))
}

/// Checks that the geometry can hold `regimes` (before any input exists), naming the first
/// regime it cannot hold and why.
pub(crate) fn check(
    op: &str,
    g: &Geometry,
    regimes: &[Regime],
    late_from: usize,
    first_free: usize,
    block: Option<usize>,
) -> Result<(), OpError> {
    for &r in regimes {
        if !r.applies_to(op) {
            return Err(OpError::regime_not_for(op, r));
        }
        match r {
            Regime::MaskedRowsLse => {
                if !g.softmax_lse_flag {
                    return Err(regime_err(
                        op,
                        r,
                        "needs softmax_lse_flag = true (the regime judges the LSE of fully masked rows)",
                    ));
                }
                let structural = valid_rows(g).any(|(b, i)| {
                    let (lo, hi) = interval(g, b, i);
                    lo == hi
                });
                if !g.atten_mask && !structural {
                    return Err(regime_err(
                        op,
                        r,
                        "needs atten_mask = true (or a sparse mode or lengths that leave a valid query row without keys)",
                    ));
                }
            }
            Regime::LateMax
                if !valid_rows(g)
                    .any(|(b, i)| late_ok(interval(g, b, i), late_from, first_free)) =>
            {
                let longest = valid_rows(g)
                    .map(|(b, i)| {
                        let (lo, hi) = interval(g, b, i);
                        hi - lo
                    })
                    .max()
                    .unwrap_or(0);
                return Err(regime_err(
                    op,
                    r,
                    format!(
                        "needs a valid query row that sees keys both before and at or after key {late_from} (one KV tile); the longest row here sees {longest} keys"
                    ),
                ));
            }
            Regime::ModerateLateMax | Regime::ModerateEarlyMax => {
                if let Some(other) = regimes.iter().find(|&&o| {
                    o != r
                        && (o.is_moderate_max()
                            || matches!(o, Regime::LargeLogits | Regime::LateMax))
                }) {
                    return Err(regime_err(
                        op,
                        r,
                        format!(
                            "cannot be combined with {} in one case (both rebuild whole query and key rows); declare it in another case",
                            other.name()
                        ),
                    ));
                }
                if !valid_rows(g)
                    .any(|(b, i)| moderate_ok(interval(g, b, i), late_from, first_free))
                {
                    return Err(regime_err(
                        op,
                        r,
                        format!(
                            "needs a valid query row that sees keys (beyond the {first_free} shared ones) both before and at or after key {late_from}, the end of the recipe's first KV tile"
                        ),
                    ));
                }
            }
            Regime::SubnormalOutputs => {
                if regimes.contains(&Regime::RoundingTies) {
                    return Err(regime_err(
                        op,
                        r,
                        "cannot be combined with rounding_ties in one case (both rebuild value columns); declare it in another case",
                    ));
                }
                if g.head_dim < 2 || subnormal_codes(ElemType::from(g.dtype)).is_none() {
                    return Err(regime_err(
                        op,
                        r,
                        format!(
                            "needs head_dim >= 2 (a positive and a negative value column) and a float dtype with subnormals; here head_dim {}, {}",
                            g.head_dim,
                            g.dtype.name()
                        ),
                    ));
                }
            }
            Regime::RoundingTies => {
                if regimes.contains(&Regime::LargeLogits)
                    || regimes.contains(&Regime::LateMax)
                    || regimes.iter().any(|r| r.is_moderate_max())
                {
                    return Err(regime_err(
                        op,
                        r,
                        "cannot be combined with large_logits, late_max or a moderate maximum in one case (they rebuild whole query and key rows); declare it in another case",
                    ));
                }
                // The ties are planted on a valid row that sees at least two keys.
                if !valid_rows(g).any(|(b, i)| {
                    let (lo, hi) = interval(g, b, i);
                    hi >= lo + 2
                }) {
                    return Err(regime_err(
                        op,
                        r,
                        "needs a valid query row that sees at least two keys",
                    ));
                }
            }
            Regime::LargeLogits
                if !valid_rows(g).any(|(b, i)| large_ok(interval(g, b, i), first_free)) =>
            {
                return Err(regime_err(
                    op,
                    r,
                    "needs a valid query row that sees at least one key",
                ));
            }
            Regime::PaddedRowsLse => {
                if !g.softmax_lse_flag {
                    return Err(regime_err(
                        op,
                        r,
                        "needs softmax_lse_flag = true (the regime judges the LSE of padded rows)",
                    ));
                }
                if g.layout.is_varlen() {
                    return Err(regime_err(
                        op,
                        r,
                        "needs a padded layout (BSND, BSH, BNSD): TND has no padded rows",
                    ));
                }
                if !(0..g.batch).any(|b| g.lq[b] < g.q_seq) {
                    return Err(regime_err(
                        op,
                        r,
                        format!(
                            "needs a batch entry whose actual_seq_lengths is below q_seq {} (a padded row)",
                            g.q_seq
                        ),
                    ));
                }
            }
            Regime::BatchDistinct => {
                if g.batch < 2 {
                    return Err(regime_err(op, r, "needs batch >= 2"));
                }
                if let Some(b) = (0..g.batch).find(|&b| g.lq[b] == 0 || g.lk[b] <= first_free) {
                    return Err(regime_err(
                        op,
                        r,
                        format!(
                            "needs every batch entry to have a query row and a key beyond the shared prefix ({first_free} keys); entry {b} has {} query rows and {} keys",
                            g.lq[b], g.lk[b]
                        ),
                    ));
                }
            }
            Regime::SeqNeHeads => match block {
                Some(bs) => {
                    if g.heads < 2 || bs == g.kv_heads {
                        return Err(regime_err(
                            op,
                            r,
                            format!(
                                "needs num_heads >= 2 (decode's S is 1) and block_size != num_key_value_heads; here {} heads, block_size {bs}, {} KV heads",
                                g.heads, g.kv_heads
                            ),
                        ));
                    }
                }
                None => {
                    if g.layout.is_varlen() || g.q_seq == g.heads || g.kv_seq == g.kv_heads {
                        return Err(regime_err(
                            op,
                            r,
                            format!(
                                "needs a padded layout with q_seq != num_heads and kv_seq != num_key_value_heads; here {} layout, q_seq {} with {} heads, kv_seq {} with {} KV heads",
                                g.layout.name(),
                                g.q_seq,
                                g.heads,
                                g.kv_seq,
                                g.kv_heads
                            ),
                        ));
                    }
                }
            },
            Regime::GqaGroups if g.kv_heads < 2 || g.group < 2 => {
                return Err(regime_err(
                    op,
                    r,
                    format!(
                        "needs num_key_value_heads >= 2 and num_heads / num_key_value_heads >= 2; here {} KV heads, group {}",
                        g.kv_heads, g.group
                    ),
                ));
            }
            // Every other regime is one the attention families do not declare (refused above)
            // or the runner's (the repeated call): a regime added for another family needs no
            // arm here.
            _ => {}
        }
    }
    Ok(())
}

/// Checks, after every construction, that the batch entries of `inputs` hold data of their
/// own (the `batch_distinct` regime): the first query row of every pair of entries differs,
/// and so do the key and value rows at the first unshared key. The ordinary draw gives this
/// on every seed (two equal rows of `head_dim` random values have no practical chance); the
/// check makes the guarantee explicit.
pub(crate) fn verify_distinct_batches(
    op: &str,
    g: &Geometry,
    keys: &KeyRows,
    value_tensor: &str,
    inputs: &TensorMap,
) -> Result<(), OpError> {
    let d = g.head_dim;
    let q = tensor(op, inputs, "query")?;
    let k = tensor(op, inputs, keys.tensor)?;
    let v = tensor(op, inputs, value_tensor)?;
    let row = |t: &Tensor, offset: usize| {
        let es = t.dtype.size_bytes();
        t.data[offset * es..(offset + d) * es].to_vec()
    };
    let query = |b: usize| {
        (0..g.heads)
            .flat_map(|h| row(q, g.q_offset(b, 0, h)))
            .collect::<Vec<u8>>()
    };
    let key = |t: &Tensor, b: usize| {
        (0..g.kv_heads)
            .flat_map(|kvh| row(t, (keys.offset)(b, keys.first_free, kvh)))
            .collect::<Vec<u8>>()
    };
    for b in 0..g.batch {
        for c in 0..b {
            for (what, same) in [
                ("query rows", query(b) == query(c)),
                ("key rows", key(k, b) == key(k, c)),
                ("value rows", key(v, b) == key(v, c)),
            ] {
                if same {
                    return Err(regime_err(
                        op,
                        Regime::BatchDistinct,
                        format!("batch entries {c} and {b} were drawn with the same {what}"),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn norm(v: &[f64]) -> f64 {
    sqrt_f64(v.iter().map(|x| x * x).sum())
}

/// `v` rounded once (RNE) to `et`.
fn round_row(et: ElemType, v: &[f64]) -> Vec<f64> {
    Tensor::round_values(et, vec![v.len()], v, Rounding::RNE).to_f64_vec()
}

/// Writes `row` (already representable in the tensor's dtype) at element `offset`.
fn patch(t: &mut Tensor, offset: usize, row: &[f64]) {
    let es = t.dtype.size_bytes();
    let enc = Tensor::round_values(t.dtype, vec![row.len()], row, Rounding::RNE);
    t.data[offset * es..(offset + row.len()) * es].copy_from_slice(&enc.data);
}

fn tensor<'a>(op: &str, inputs: &'a TensorMap, name: &str) -> Result<&'a Tensor, OpError> {
    inputs.get(name).ok_or_else(|| OpError::MissingInput {
        op: op.to_string(),
        input: name.to_string(),
    })
}

fn pick(ctx: &mut GenContext, lo: usize, hi: usize) -> usize {
    lo + ctx.below((hi - lo) as u64) as usize
}

/// Makes every regime of `regimes` true of `inputs` (drawn as usual before), choosing rows,
/// keys and signs from `ctx`.
pub(crate) fn impose(
    op: &str,
    g: &Geometry,
    regimes: &[Regime],
    keys: &KeyRows,
    late_from: usize,
    inputs: &mut TensorMap,
    ctx: &mut GenContext,
) -> Result<(), OpError> {
    check(op, g, regimes, late_from, keys.first_free, keys.block)?;
    // Ties are planted afterwards (attention_ties); the structural regimes move no value.
    let regimes: Vec<Regime> = regimes
        .iter()
        .copied()
        .filter(|&r| {
            !matches!(r, Regime::RoundingTies | Regime::SubnormalOutputs)
                && !r.is_structural()
                && !r.by_runner()
        })
        .collect();
    let regimes = regimes.as_slice();
    if regimes.is_empty() {
        return Ok(());
    }
    let large = regimes.contains(&Regime::LargeLogits);
    let late = regimes.contains(&Regime::LateMax);
    let empty = regimes.contains(&Regime::MaskedRowsLse);
    let moderate = regimes.iter().copied().find(|r| r.is_moderate_max());
    let ff = keys.first_free;
    let mut mask: Option<Vec<u8>> = if g.atten_mask {
        Some(tensor(op, inputs, "atten_mask")?.data.clone())
    } else {
        None
    };
    let sees_any = |mask: &Option<Vec<u8>>, b: usize, i: usize| {
        let m = BatchMask::new(g, b, mask.as_deref());
        let (lo, hi) = interval(g, b, i);
        (lo..hi).any(|j| m.allowed(i, j))
    };
    let fits = |b: usize, i: usize| {
        let iv = interval(g, b, i);
        if moderate.is_some() {
            moderate_ok(iv, late_from, ff)
        } else if late {
            late_ok(iv, late_from, ff)
        } else {
            large_ok(iv, ff)
        }
    };
    let wants_targets = large || late || moderate.is_some();
    let mut candidates: Vec<Vec<usize>> = (0..g.batch)
        .map(|b| {
            (0..g.lq[b])
                .filter(|&i| wants_targets && fits(b, i) && sees_any(&mask, b, i))
                .collect()
        })
        .collect();
    // Enough fully masked rows that their LSE elements (rows x heads) reach the adequacy
    // margin floor where the shape has the rows: one row is the guarantee, the rest widen it.
    let wanted = EMPTY_ROW_ELEMENTS.div_ceil(g.heads.max(1));
    let masked_rows = |mask: &Option<Vec<u8>>| {
        valid_rows(g)
            .filter(|&(b, i)| !sees_any(mask, b, i))
            .count()
    };
    while empty && masked_rows(&mask) < wanted {
        let have = masked_rows(&mask);
        let total: usize = candidates.iter().map(Vec::len).sum();
        let pool: Vec<(usize, usize)> = valid_rows(g)
            .filter(|&(b, i)| sees_any(&mask, b, i))
            .filter(|&(b, i)| !wants_targets || total > candidates[b].contains(&i) as usize)
            .collect();
        let Some(m) = mask.as_mut().filter(|_| !pool.is_empty()) else {
            if have > 0 {
                break;
            }
            return Err(regime_err(
                op,
                Regime::MaskedRowsLse,
                "needs a valid query row to mask besides the rows the other regimes use",
            ));
        };
        let (b, i) = pool[ctx.below(pool.len() as u64) as usize];
        let start = g.mask_offset(b, i, 0);
        m[start..start + g.kv_seq].fill(1);
        candidates[b].retain(|&x| x != i);
    }
    if wants_targets {
        make_targets(
            op,
            g,
            large,
            late,
            moderate,
            keys,
            late_from,
            &candidates,
            &mut mask,
            inputs,
            ctx,
        )?;
    }
    if let Some(m) = mask {
        let t = inputs
            .get_mut("atten_mask")
            .ok_or_else(|| OpError::MissingInput {
                op: op.to_string(),
                input: "atten_mask".to_string(),
            })?;
        t.data = m;
    }
    Ok(())
}

/// The large-logit / late-maximum rows (see the module documentation).
#[allow(clippy::too_many_arguments)]
fn make_targets(
    op: &str,
    g: &Geometry,
    large: bool,
    late: bool,
    moderate: Option<Regime>,
    keys: &KeyRows,
    late_from: usize,
    candidates: &[Vec<usize>],
    mask: &mut Option<Vec<u8>>,
    inputs: &mut TensorMap,
    ctx: &mut GenContext,
) -> Result<(), OpError> {
    let main = if large {
        Regime::LargeLogits
    } else if let Some(m) = moderate {
        m
    } else {
        Regime::LateMax
    };
    let et = ElemType::from(g.dtype);
    let d = g.head_dim;
    let scale = g.scale as f64;
    if scale.is_nan() || scale <= 0.0 {
        return Err(regime_err(op, main, "needs a positive softmax scale"));
    }
    let mut q = tensor(op, inputs, "query")?.to_f64_vec();
    let mut k = tensor(op, inputs, keys.tensor)?.to_f64_vec();
    let mut q_rows: Vec<usize> = Vec::new();
    let mut k_rows: Vec<usize> = Vec::new();
    let mut targets = Vec::new();
    // Per target row, the moderate runner-up key and the rows rebuilt for it.
    let mut runner_ups: Vec<Option<usize>> = Vec::new();
    let target = if large {
        LARGE_LOGIT_TARGET
    } else {
        LATE_MAX_TARGET
    };
    let ff = keys.first_free;
    for (b, rows) in candidates.iter().enumerate() {
        if rows.is_empty() {
            continue;
        }
        let i = rows[ctx.below(rows.len() as u64) as usize];
        let (lo, hi) = interval(g, b, i);
        // The moderate regimes' runner-up key `e`: in an earlier tile than the maximum `j`
        // (late), or in a later one (early); both beyond the shared prefix, as they are
        // rebuilt.
        let (j, e) = match moderate {
            Some(Regime::ModerateLateMax) => (
                pick(ctx, late_from.max(ff), hi),
                Some(pick(ctx, lo.max(ff), late_from)),
            ),
            Some(_) => (
                pick(ctx, lo.max(ff), late_from),
                Some(pick(ctx, late_from.max(ff), hi)),
            ),
            None if late => (pick(ctx, late_from.max(ff), hi), None),
            None => (pick(ctx, lo.max(ff), hi), None),
        };
        // The runner-up's score: the maximum's less a gap drawn in the regime's range (kept
        // clear of its ends so that the inputs' rounding stays inside).
        let lead = match moderate {
            Some(Regime::ModerateLateMax) => 6.0 + 2.0 * ctx.unit(),
            Some(_) => 1.0 + ctx.unit(),
            None => 0.0,
        };
        let mut open = vec![j];
        if let Some(e) = e {
            open.push(e);
        } else if late {
            open.push(pick(ctx, lo, late_from.min(hi)));
        }
        if let Some(m) = mask.as_mut() {
            for &x in &open {
                m[g.mask_offset(b, i, x)] = 0;
            }
        }
        let bm = BatchMask::new(g, b, mask.as_deref());
        let others: Vec<usize> = (lo..hi)
            .filter(|&x| x != j && Some(x) != e && bm.allowed(i, x))
            .collect();
        for kvh in 0..g.kv_heads {
            let off = (keys.offset)(b, j, kvh);
            let mut row = k[off..off + d].to_vec();
            let mut widest = 0f64;
            for &x in &others {
                let o = (keys.offset)(b, x, kvh);
                widest = widest.max(norm(&k[o..o + d]));
            }
            let mut n = norm(&row);
            if !widest.is_finite() || !n.is_finite() {
                return Err(regime_err(
                    op,
                    main,
                    "the drawn keys hold non-finite values (use finite inputs with this regime)",
                ));
            }
            let need = (DOMINANCE * widest).max(1.0 / sqrt_f64(scale));
            if n == 0.0 {
                row = (0..d)
                    .map(|_| if ctx.next_u64() & 1 == 0 { 1.0 } else { -1.0 })
                    .collect();
                n = norm(&row);
            }
            if n < need {
                let f = need / n;
                row = round_row(et, &row.iter().map(|x| x * f).collect::<Vec<_>>());
                n = norm(&row);
            }
            if !n.is_finite() {
                return Err(regime_err(
                    op,
                    main,
                    format!("the key it needs overflows {}", g.dtype.name()),
                ));
            }
            k[off..off + d].copy_from_slice(&row);
            k_rows.push(off);
            let c = target / (scale * n * n);
            let qrow = round_row(et, &row.iter().map(|x| x * c).collect::<Vec<_>>());
            if qrow.iter().any(|x| !x.is_finite()) {
                return Err(regime_err(
                    op,
                    main,
                    format!(
                        "the query it needs overflows {} (the softmax scale is too small)",
                        g.dtype.name()
                    ),
                ));
            }
            for h in (0..g.heads).filter(|&h| g.kv_head(h) == kvh) {
                let qo = g.q_offset(b, i, h);
                q[qo..qo + d].copy_from_slice(&qrow);
                q_rows.push(qo);
            }
            if let Some(e) = e {
                // k_e = a k_j scores a T: parallel to k_j, so its score is the maximum's
                // scaled by a (to the dtype's rounding), and the Cauchy-Schwarz bound on the
                // other keys is untouched.
                let a = (target - lead) / target;
                let eo = (keys.offset)(b, e, kvh);
                let erow = round_row(et, &row.iter().map(|x| x * a).collect::<Vec<_>>());
                k[eo..eo + d].copy_from_slice(&erow);
                k_rows.push(eo);
            }
        }
        targets.push((b, i, j));
        runner_ups.push(e);
    }
    if targets.is_empty() {
        return Err(regime_err(
            op,
            main,
            "no valid query row that sees a key is left for it",
        ));
    }
    // The construction's promise, checked on the rounded values.
    for (&(b, i, j), &e) in targets.iter().zip(&runner_ups) {
        let bm = BatchMask::new(g, b, mask.as_deref());
        let (lo, hi) = interval(g, b, i);
        for h in 0..g.heads {
            let qo = g.q_offset(b, i, h);
            let kvh = g.kv_head(h);
            let score = |x: usize| {
                let ko = (keys.offset)(b, x, kvh);
                scale
                    * q[qo..qo + d]
                        .iter()
                        .zip(&k[ko..ko + d])
                        .map(|(a, c)| a * c)
                        .sum::<f64>()
            };
            let sj = score(j);
            let rest = (lo..hi)
                .filter(|&x| x != j && bm.allowed(i, x))
                .map(score)
                .fold(f64::NEG_INFINITY, f64::max);
            // NaN scores count as broken: the comparisons are written so that NaN fails them.
            let large_holds = sj > LARGE_LOGIT_FLOOR;
            let late_holds = sj - rest >= LATE_MAX_GAP;
            let moderate_holds = match (moderate, e) {
                (Some(Regime::ModerateLateMax), Some(_)) => {
                    // The running max before j's tile: every allowed key of the earlier tiles.
                    let start = (j / late_from) * late_from;
                    let before = (lo..start.min(hi))
                        .filter(|&x| bm.allowed(i, x))
                        .map(score)
                        .fold(f64::NEG_INFINITY, f64::max);
                    let gap = sj - before;
                    gap >= MODERATE_LATE_GAP.0 && gap <= MODERATE_LATE_GAP.1 && sj - rest >= 5.0
                }
                (Some(_), Some(_)) => {
                    let after = (late_from..hi)
                        .filter(|&x| bm.allowed(i, x))
                        .map(score)
                        .fold(f64::NEG_INFINITY, f64::max);
                    let margin = sj - after;
                    sj - rest >= MODERATE_EARLY_MARGIN.0
                        && margin >= MODERATE_EARLY_MARGIN.0
                        && margin <= MODERATE_EARLY_MARGIN.1
                }
                _ => true,
            };
            let broken = if large && !large_holds {
                Some(Regime::LargeLogits)
            } else if late && !late_holds {
                Some(Regime::LateMax)
            } else if !moderate_holds {
                moderate
            } else {
                None
            };
            if let Some(r) = broken {
                return Err(OpError::Failed {
                    op: op.to_string(),
                    message: format!(
                        "regime `{}`: the construction gave batch {b} head {h} row {i} a score of {sj} at key {j} (other keys up to {rest})",
                        r.name()
                    ),
                });
            }
        }
    }
    let qt = inputs.get_mut("query").expect("read above");
    for o in q_rows {
        patch(qt, o, &q[o..o + d]);
    }
    let kt = inputs.get_mut(keys.tensor).expect("read above");
    for o in k_rows {
        patch(kt, o, &k[o..o + d]);
    }
    Ok(())
}

/// The bit patterns of the dtype's subnormals a `subnormal_outputs` value column draws from:
/// from an eighth of the smallest normal up to the largest subnormal (well clear of zero, so
/// that a weighted mean of them stays a nonzero subnormal).
pub(crate) fn subnormal_codes(et: ElemType) -> Option<(u32, u32)> {
    match et {
        ElemType::F16 => Some((0x0080, 0x03FF)),
        ElemType::Bf16 => Some((0x0010, 0x007F)),
        ElemType::F32 => Some((0x0010_0000, 0x007F_FFFF)),
        _ => None,
    }
}

/// `subnormal_outputs` in attention: two value columns of every KV head, at every key a row
/// may see (below each entry's KV length), hold subnormals of the dtype, positive in one and
/// negative in the other. Every output of such a column is a weighted mean of values of one
/// sign within the subnormal band, so it is a nonzero subnormal of that sign in every recipe
/// (fully masked rows excepted: their output is the recipe's empty-row value), and a kernel
/// that flushes subnormal inputs to zero writes zeros there.
pub(crate) fn impose_subnormal_values(
    op: &str,
    g: &Geometry,
    keys: &KeyRows,
    value_tensor: &str,
    inputs: &mut TensorMap,
    ctx: &mut GenContext,
) -> Result<(), OpError> {
    let d = g.head_dim;
    let c0 = ctx.below(d as u64) as usize;
    let mut c1 = ctx.below(d as u64 - 1) as usize;
    if c1 >= c0 {
        c1 += 1;
    }
    let v = inputs
        .get_mut(value_tensor)
        .ok_or_else(|| OpError::MissingInput {
            op: op.to_string(),
            input: value_tensor.to_string(),
        })?;
    let Some((lo, hi)) = subnormal_codes(v.dtype) else {
        return Err(regime_err(
            op,
            Regime::SubnormalOutputs,
            "needs a float value dtype with subnormals (f16, bf16, f32)",
        ));
    };
    let es = v.dtype.size_bytes();
    let sign = if es == 2 { 0x8000u32 } else { 0x8000_0000 };
    for b in 0..g.batch {
        for j in 0..g.lk[b] {
            for kvh in 0..g.kv_heads {
                let row = (keys.offset)(b, j, kvh);
                for (c, s) in [(c0, 0), (c1, sign)] {
                    let bits = (lo + ctx.below((hi - lo + 1) as u64) as u32) | s;
                    let at = (row + c) * es;
                    v.data[at..at + es].copy_from_slice(&bits.to_le_bytes()[..es]);
                }
            }
        }
    }
    Ok(())
}

/// A case's query, keys (contiguous, in the geometry's K layout) and mask, read from its
/// inputs: what its scores are made of.
pub struct ScoreView {
    pub g: Geometry,
    pub query: Vec<f32>,
    pub key: Vec<f32>,
    pub mask: Option<Vec<u8>>,
}

impl ScoreView {
    /// Whether valid row `i` of batch `b` may attend to key `j`.
    pub fn allowed(&self, b: usize, i: usize, j: usize) -> bool {
        BatchMask::new(&self.g, b, self.mask.as_deref()).allowed(i, j)
    }

    /// The scaled score of (b, i, head h) at key j, in f64 from the inputs' values.
    pub fn score(&self, b: usize, i: usize, h: usize, j: usize) -> f64 {
        let d = self.g.head_dim;
        let qo = self.g.q_offset(b, i, h);
        let ko = self.g.kv_offset(b, j, self.g.kv_head(h));
        self.g.scale as f64
            * self.query[qo..qo + d]
                .iter()
                .zip(&self.key[ko..ko + d])
                .map(|(a, c)| *a as f64 * *c as f64)
                .sum::<f64>()
    }

    /// The largest scaled score of (b, i, h) over the keys it sees (`None`: it sees none).
    pub fn max_score(&self, b: usize, i: usize, h: usize) -> Option<f64> {
        (0..self.g.lk[b])
            .filter(|&j| self.allowed(b, i, j))
            .map(|j| self.score(b, i, h, j))
            .reduce(f64::max)
    }

    /// Whether valid row `i` of batch `b` sees no key at all.
    pub fn row_empty(&self, b: usize, i: usize) -> bool {
        !(0..self.g.lk[b]).any(|j| self.allowed(b, i, j))
    }
}

/// The [`ScoreView`] of an `fa_prefill` or `pa_decode` case.
pub fn score_view(
    op: &str,
    params: &serde_json::Value,
    inputs: &TensorMap,
) -> Result<ScoreView, OpError> {
    match op {
        "pa_decode" => super::pa_decode::score_view(params, inputs),
        "fa_prefill" => super::fa_prefill::score_view(params, inputs),
        _ => Err(OpError::UnknownOp(op.to_string())),
    }
}
