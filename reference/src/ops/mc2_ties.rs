//! The `rounding_ties` regime of `mc2_matmul_allreduce`: output elements whose every rounding
//! point but one is exact and whose one rounding is an exact tie, so a kernel that breaks ties
//! the other way (ties away where the recipe rounds to even) differs on 8 or more elements on
//! every seed instead of on the one a random draw happens to hold.
//!
//! Construction, per chosen output row `i` (the row, the rank, the two K positions, the
//! columns and the values come from the stream): on one rank `r` (not rank 0, which adds the
//! epilogue, when there are two or more ranks) the row of `x1` is 1 at two K positions `k0`,
//! `k1` and 0 elsewhere, and on every other rank it is 0. On chosen columns `j`, `x2_r[k0, j]`
//! is `t` (a value with an even last bit) and `x2_r[k1, j]` half an ulp of `t` with its sign,
//! so rank `r`'s f32 product is exactly the midpoint of `t` and its neighbour away from zero:
//! the cast of that product to the dtype is the tie, the other ranks contribute exact zeros, and
//! `bias[j]` and `x3[i, j]` are 0 on those columns, so no later step rounds the tie away.

use super::regime::Regime;
use super::{GenContext, OpError, Tensor, TensorMap};
use crate::formats::{DType, Rounding};

/// Rows carrying ties (at most; each carries up to [`COLUMNS`]).
const ROWS: usize = 2;
/// Tie columns per row (at most `n`).
const COLUMNS: usize = 16;
/// The fewest tie elements the regime promises.
pub const FLOOR: usize = 8;

/// The shape of a case (what the construction needs of its parameters).
pub(crate) struct Shape {
    pub dtype: DType,
    pub ranks: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
}

fn err(op: &str, message: impl Into<String>) -> OpError {
    OpError::Regime {
        op: op.to_string(),
        regime: Regime::RoundingTies.name().to_string(),
        message: message.into(),
    }
}

/// Checks that the shape can hold the regime.
pub(crate) fn check(op: &str, s: &Shape) -> Result<(), OpError> {
    if s.k < 2 {
        return Err(err(
            op,
            "needs k of 2 or more (two K positions per tie row)",
        ));
    }
    let rows = s.m.min(ROWS).min(eligible(s).len() * (s.k / 2));
    if rows * s.n.min(COLUMNS) < FLOOR {
        return Err(err(
            op,
            format!(
                "needs at least {FLOOR} output elements to tie: {rows} row(s) of {} column(s) fit (m {}, n {}, two K positions of a rank per row)",
                s.n.min(COLUMNS),
                s.m,
                s.n
            ),
        ));
    }
    Ok(())
}

/// The ranks a tie row may use: every rank but rank 0 (which adds the epilogue), or rank 0
/// alone.
fn eligible(s: &Shape) -> Vec<usize> {
    if s.ranks > 1 {
        (1..s.ranks).collect()
    } else {
        vec![0]
    }
}

/// Fraction bits of a dtype's significand.
pub(super) fn mantissa_bits(d: DType) -> i32 {
    match d {
        DType::F16 => 10,
        DType::Bf16 => 7,
        DType::F32 => 23,
    }
}

pub(super) fn set(t: &mut Tensor, at: usize, x: f64) {
    let es = t.dtype.size_bytes();
    let enc = Tensor::round_values(t.dtype, vec![1], &[x], Rounding::RNE);
    t.data[at * es..(at + 1) * es].copy_from_slice(&enc.data);
}

pub(super) fn get<'a>(
    op: &str,
    inputs: &'a mut TensorMap,
    name: &str,
) -> Result<&'a mut Tensor, OpError> {
    inputs.get_mut(name).ok_or_else(|| OpError::MissingInput {
        op: op.to_string(),
        input: name.to_string(),
    })
}

/// Makes the regime true of `inputs` (drawn as usual before). Returns the tie elements planted.
pub(crate) fn impose(
    op: &str,
    s: &Shape,
    inputs: &mut TensorMap,
    ctx: &mut GenContext,
) -> Result<usize, OpError> {
    check(op, s)?;
    let bits = mantissa_bits(s.dtype);
    let ulp = 1.0 / (1u64 << bits) as f64;
    let mut rows: Vec<usize> = (0..s.m).collect();
    let mut cols: Vec<usize> = (0..s.n).collect();
    ctx.shuffle(&mut rows);
    ctx.shuffle(&mut cols);
    rows.truncate(ROWS);
    cols.truncate(COLUMNS);
    // K positions of x2 already taken, per rank (a pair per row).
    let mut taken: Vec<Vec<usize>> = vec![Vec::new(); s.ranks];
    let mut planted = 0;
    for &i in &rows {
        let open: Vec<usize> = eligible(s)
            .into_iter()
            .filter(|&r| s.k - taken[r].len() >= 2)
            .collect();
        if open.is_empty() {
            break;
        }
        let r = open[ctx.below(open.len() as u64) as usize];
        let free: Vec<usize> = (0..s.k).filter(|q| !taken[r].contains(q)).collect();
        let a = free[ctx.below(free.len() as u64) as usize];
        let rest: Vec<usize> = free.iter().copied().filter(|&q| q != a).collect();
        let b = rest[ctx.below(rest.len() as u64) as usize];
        taken[r].extend([a, b]);
        let x1 = get(op, inputs, "x1")?;
        for q in 0..s.ranks {
            for kk in 0..s.k {
                let one = q == r && (kk == a || kk == b);
                set(x1, (q * s.m + i) * s.k + kk, if one { 1.0 } else { 0.0 });
            }
        }
        let x2 = get(op, inputs, "x2")?;
        for &j in &cols {
            let even = 2 * ctx.below(1u64 << (bits - 1));
            let sign = if ctx.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
            let t = sign * (1.0 + even as f64 * ulp);
            set(x2, (r * s.k + a) * s.n + j, t);
            set(x2, (r * s.k + b) * s.n + j, sign * ulp / 2.0);
        }
        if let Some(bias) = inputs.get_mut("bias") {
            for &j in &cols {
                set(bias, j, 0.0);
            }
        }
        if let Some(x3) = inputs.get_mut("x3") {
            for &j in &cols {
                set(x3, i * s.n + j, 0.0);
            }
        }
        planted += cols.len();
    }
    if planted < FLOOR {
        return Err(err(
            op,
            format!("only {planted} tie elements fit (at least {FLOOR} needed)"),
        ));
    }
    Ok(planted)
}
