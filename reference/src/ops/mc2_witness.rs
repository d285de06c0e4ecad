//! The `mc2_add_ties` and `order_witnesses` regimes of `mc2_matmul_allreduce`: output elements
//! on which a rounding of an add in the dtype meets an exact tie, and elements on which the
//! kernel's stated operation order gives other bits than each alternative.
//!
//! Every construction owns one output row `i`: row `i` of `x1` is zero on every rank except
//! at chosen K positions, where it is 1, so each rank's f32 product at `(i, j)` is the sum of
//! the `x2` values the construction puts at those positions (exact), and `bias[j]` and
//! `x3[i, j]` are 0 on the row's columns unless the construction sets `x3`. `t` below is a
//! value in [1, 2) of the dtype with an even last bit, either sign, and `u` its ulp.
//!
//! - `mc2_add_ties`, x3 row: rank 0's product is `t` (exact in the dtype) and
//!   `x3[i, j] = u / 2` with `t`'s sign: the x3 add's rounding is an exact tie (to even: `t`;
//!   away: `t + u`), every other step exact.
//! - `mc2_add_ties`, reduction row: one rank's product is `t`, another's `u / 2` with its
//!   sign, the rest 0: every rank's cast is exact and exactly one add of the all-reduce is a
//!   tie, whatever its order.
//! - `order_witnesses`, x3 row: rank 0's product is `t + u / 2` (a tie of the rank's cast,
//!   rounded to `t` by nearest even) and `x3[i, j] = u / 4` with its sign: added to the rounded
//!   result it rounds back to `t`; added before the rounding (`t + 3u / 4`) it gives `t + u`.
//! - `order_witnesses`, reduction row (4 or more ranks): every rank's product is a dtype value
//!   in [1/8, 2) of either sign, searched from the stream until the rank order, the ring (for
//!   the element's chunk of its tile) and the binary tree give three different sums; the row's
//!   columns avoid the tile's last ring chunk, where the ring is the rank order.
//!
//! The seed picks rows, ranks, positions, columns and values, never whether they are there.

use super::mc2_ties::{get, mantissa_bits as bits, set};
use super::regime::Regime;
use super::{GenContext, OpError, TensorMap};
use crate::formats::DType;
use crate::mc2::reduction::{reduce_in_dtype, ring_chunk_of};
use crate::mc2::ReductionOrder;

/// Columns per construction row (at most `n`).
const COLUMNS: usize = 16;
/// The fewest columns a row must offer.
const FLOOR: usize = 8;
/// Draws per column the reduction-order search tries.
const DRAWS: usize = 512;

/// What the constructions need of a case: the tie shape (dtype, ranks, m, k, n) and more.
pub(crate) struct Shape {
    pub base: super::mc2_ties::Shape,
    pub x3: bool,
    /// The M tiles (heights), each one all-reduce buffer.
    pub tiles: Vec<usize>,
}

fn err(op: &str, r: Regime, message: impl Into<String>) -> OpError {
    OpError::Regime {
        op: op.to_string(),
        regime: r.name().to_string(),
        message: message.into(),
    }
}

/// The construction rows `regimes` asks for, in order.
fn rows_of(regimes: &[Regime]) -> Vec<(Regime, Row)> {
    let order = regimes.contains(&Regime::OrderWitnesses);
    let ties = regimes.contains(&Regime::Mc2AddTies);
    let mut v = Vec::new();
    // The reduction-order row first: it needs a row with columns outside the last chunk.
    if order {
        v.push((Regime::OrderWitnesses, Row::ReduceOrder));
    }
    if ties {
        v.push((Regime::Mc2AddTies, Row::X3Tie));
        v.push((Regime::Mc2AddTies, Row::ReduceTie));
    }
    if order {
        v.push((Regime::OrderWitnesses, Row::X3Order));
    }
    v
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Row {
    X3Tie,
    ReduceTie,
    X3Order,
    ReduceOrder,
}

/// Checks that the case can hold the regimes of this module it declares.
pub(crate) fn check(op: &str, s: &Shape, regimes: &[Regime]) -> Result<(), OpError> {
    let rows = rows_of(regimes);
    let Some(&(first, _)) = rows.first() else {
        return Ok(());
    };
    for &(r, _) in &rows {
        if !s.x3 {
            return Err(err(op, r, "needs x3 = true (its x3 row)"));
        }
        if s.base.ranks < 4 && r == Regime::OrderWitnesses {
            return Err(err(
                op,
                r,
                "needs 4 or more ranks (with 2 every reduction order is one add, with 1 there is none)",
            ));
        }
        if s.base.ranks < 2 {
            return Err(err(
                op,
                r,
                "needs 2 or more ranks (a tie of the all-reduce's add)",
            ));
        }
    }
    if s.base.m < rows.len() {
        return Err(err(
            op,
            first,
            format!(
                "needs m >= {} (one output row per construction), this case has m = {}",
                rows.len(),
                s.base.m
            ),
        ));
    }
    if s.base.n < FLOOR {
        return Err(err(
            op,
            first,
            format!("needs n >= {FLOOR} (the columns of a construction row)"),
        ));
    }
    if regimes.contains(&Regime::OrderWitnesses)
        && !(0..s.base.m).any(|i| order_columns(s, i).len() >= FLOOR)
    {
        return Err(err(
            op,
            Regime::OrderWitnesses,
            format!("needs a row with {FLOOR} or more elements outside the last ring chunk of its tile (there the ring is the rank order)"),
        ));
    }
    // Rank 0 takes at most 1 + 1 + 2 + 1 K positions.
    let need: usize = rows
        .iter()
        .map(|(_, row)| if *row == Row::X3Order { 2 } else { 1 })
        .sum();
    if s.base.k < need {
        return Err(err(
            op,
            first,
            format!("needs k >= {need} (distinct K positions of rank 0 for the construction rows)"),
        ));
    }
    Ok(())
}

/// `t`: a value in [1, 2) of the dtype with an even last bit, either sign.
fn even_one(d: DType, ctx: &mut GenContext) -> f64 {
    let b = bits(d);
    let even = 2 * ctx.below(1u64 << (b - 1));
    let sign = if ctx.below(2) == 0 { 1.0 } else { -1.0 };
    sign * (1.0 + even as f64 * ulp(d))
}

fn ulp(d: DType) -> f64 {
    1.0 / (1u64 << bits(d)) as f64
}

/// The ring chunk of element `(i, j)` within its tile's all-reduce buffer.
fn chunk_of(s: &Shape, i: usize, j: usize) -> usize {
    let mut start = 0;
    for &h in &s.tiles {
        if i < start + h {
            return ring_chunk_of((i - start) * s.base.n + j, h * s.base.n, s.base.ranks);
        }
        start += h;
    }
    0
}

/// The columns of row `i` whose ring chunk is not the last: there the ring starts at rank 0
/// and is the rank order, so no value can tell the two apart.
fn order_columns(s: &Shape, i: usize) -> Vec<usize> {
    (0..s.base.n)
        .filter(|&j| chunk_of(s, i, j) != s.base.ranks - 1)
        .collect()
}

/// Rank values of a reduction-order witness at `(i, j)`: three different sums.
fn reduce_witness(s: &Shape, i: usize, j: usize, ctx: &mut GenContext) -> Option<Vec<f64>> {
    let u = ulp(s.base.dtype);
    let chunk = chunk_of(s, i, j);
    for _ in 0..DRAWS {
        // Dtype values of one to four binades, [1/8, 2): their sums round at different
        // points in each order (about one draw in 18 over 4 ranks, 1 in 5 over 8).
        let v: Vec<f64> = (0..s.base.ranks)
            .map(|_| {
                let sign = if ctx.below(2) == 0 { 1.0 } else { -1.0 };
                let frac = ctx.below(1u64 << bits(s.base.dtype)) as f64 * u;
                sign * (1.0 + frac) / (1u64 << ctx.below(4)) as f64
            })
            .collect();
        let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
        let sums: Vec<u32> = ReductionOrder::ALL
            .iter()
            .map(|&o| reduce_in_dtype(&f, o, chunk, s.base.dtype).to_bits())
            .collect();
        if sums[0] != sums[1] && sums[1] != sums[2] && sums[0] != sums[2] {
            return Some(v);
        }
    }
    None
}

/// Makes the regimes of this module true of `inputs` (drawn as usual before).
pub(crate) fn impose(
    op: &str,
    s: &Shape,
    regimes: &[Regime],
    inputs: &mut TensorMap,
    ctx: &mut GenContext,
) -> Result<(), OpError> {
    check(op, s, regimes)?;
    let plan = rows_of(regimes);
    if plan.is_empty() {
        return Ok(());
    }
    let u = ulp(s.base.dtype);
    let mut rows: Vec<usize> = (0..s.base.m).collect();
    ctx.shuffle(&mut rows);
    let mut taken: Vec<Vec<usize>> = vec![Vec::new(); s.base.ranks];
    let mut position = |r: usize, ctx: &mut GenContext| -> usize {
        let free: Vec<usize> = (0..s.base.k).filter(|q| !taken[r].contains(q)).collect();
        let q = free[ctx.below(free.len() as u64) as usize];
        taken[r].push(q);
        q
    };
    for &(regime, row) in &plan {
        // The first unused row that can hold the construction.
        let at = rows
            .iter()
            .position(|&i| row != Row::ReduceOrder || order_columns(s, i).len() >= FLOOR)
            .ok_or_else(|| err(op, regime, "no row left for the reduction-order witness"))?;
        let i = rows.remove(at);
        let mut cols: Vec<usize> = if row == Row::ReduceOrder {
            order_columns(s, i)
        } else {
            (0..s.base.n).collect()
        };
        ctx.shuffle(&mut cols);
        cols.truncate(COLUMNS);
        // (rank, K position) pairs of the row's 1s in x1.
        let ones: Vec<(usize, usize)> = match row {
            Row::X3Tie => vec![(0, position(0, ctx))],
            Row::X3Order => vec![(0, position(0, ctx)), (0, position(0, ctx))],
            Row::ReduceTie => {
                let r1 = ctx.below(s.base.ranks as u64) as usize;
                let r2 = (r1 + 1 + ctx.below(s.base.ranks as u64 - 1) as usize) % s.base.ranks;
                vec![(r1, position(r1, ctx)), (r2, position(r2, ctx))]
            }
            Row::ReduceOrder => (0..s.base.ranks).map(|r| (r, position(r, ctx))).collect(),
        };
        let x1 = get(op, inputs, "x1")?;
        for q in 0..s.base.ranks {
            for kk in 0..s.base.k {
                let one = ones.contains(&(q, kk));
                set(
                    x1,
                    (q * s.base.m + i) * s.base.k + kk,
                    if one { 1.0 } else { 0.0 },
                );
            }
        }
        for &j in &cols {
            // x2 values at the row's 1s, in `ones` order, and x3[i, j].
            let (values, x3v): (Vec<f64>, f64) = match row {
                Row::X3Tie => {
                    let t = even_one(s.base.dtype, ctx);
                    (vec![t], t.signum() * u / 2.0)
                }
                Row::X3Order => {
                    let t = even_one(s.base.dtype, ctx);
                    (vec![t, t.signum() * u / 2.0], t.signum() * u / 4.0)
                }
                Row::ReduceTie => {
                    let t = even_one(s.base.dtype, ctx);
                    (vec![t, t.signum() * u / 2.0], 0.0)
                }
                Row::ReduceOrder => (
                    reduce_witness(s, i, j, ctx).ok_or_else(|| {
                        err(
                            op,
                            regime,
                            format!("no reduction-order witness in {DRAWS} draws at row {i}, column {j}"),
                        )
                    })?,
                    0.0,
                ),
            };
            let x2 = get(op, inputs, "x2")?;
            for (&(r, q), &v) in ones.iter().zip(&values) {
                set(x2, (r * s.base.k + q) * s.base.n + j, v);
            }
            if let Some(bias) = inputs.get_mut("bias") {
                set(bias, j, 0.0);
            }
            set(get(op, inputs, "x3")?, i * s.base.n + j, x3v);
        }
    }
    Ok(())
}
