//! `format_extremes` for `w4a16_matmul`: every extreme scale code of the format, and the
//! format's NaN scale code, in whole output columns of their own, on every seed.
//!
//! A matmul's f32 sum absorbs one weight's difference among K drawn products (and a NaN or
//! Inf weight mixes with the others), so extreme scale codes spread by a `special` draw are
//! killed only on some seeds, and by one output each. Here:
//!
//! - each extreme scale code `s` takes its own output column `j` and K position `col`: the
//!   group of `(j, col)` gets scale `s`, every other code of weight row `j` is zero and `col`'s
//!   is the element code `q` (the largest, or for the top E8M0 code the largest whose weight
//!   stays finite) with a drawn sign; column `col` of every other weight row is zero, and
//!   `x[i, col] = +-2^a_i` in every row `i`. So every output of column `j` is the one product
//!   `x[i, col] * w[j, col]`, exact in any summation order (the other terms are exact zeros),
//!   and a misread scale code shows in all `m` of them. `a_i` puts the product at about
//!   2^-3..2^0 (a power-of-two multiple of the dequantised weight, so the final cast is
//!   exact), or for the top E8M0 code 2^1..2^4 above the weight (the f32 product overflows
//!   to Inf: the output cast's overflow is judged);
//! - the NaN scale code (E8M0 0xFF, E4M3FN 0x7F) takes one more output column `j` and a group
//!   `g` that holds none of those K positions: every code of that group is nonzero and of one
//!   sign, and in every row of `x` the group's K range is nonzero and of one sign. The
//!   reference's output column is NaN; a kernel that reads the code as +Inf gets +-Inf in every
//!   row (same-signed infinite products, no `0 * Inf`), one that reads it as a finite value
//!   finite numbers or same-signed infinities: `m` outputs differ either way.
//!
//! Scale codes a `special` draw made extreme (or NaN) elsewhere become ordinary first, so
//! nothing but the planted groups holds them.

use super::fp4_ties::TieShape as Shape;
use super::range_regimes::{self as rr, pow2};
use super::regime::Regime;
use super::{GenContext, OpError};

/// The top E8M0 code (2^127), whose witness overflows.
const E8M0_TOP: u8 = 254;

/// The NaN scale code of the format: E8M0 0xFF, E4M3FN 0x7F.
pub(crate) fn nan_scale(mx: bool) -> u8 {
    if mx {
        0xFF
    } else {
        0x7F
    }
}

/// Whether a W4A16 case can hold `format_extremes` with `extremes` extreme scale codes: on
/// its own (no other regime sets the rows of `x` it takes), an output column per extreme code
/// and one for the NaN code, two scale groups per row (the NaN group holds no extreme code's
/// K position), and for MXFP4 a bf16 output (an f16 weight cannot hold 2^-127 or 2^127 times
/// an FP4 code).
pub(crate) fn check_w4a16(
    op: &str,
    regimes: &[Regime],
    s: &Shape,
    extremes: usize,
    mx_not_bf16: bool,
) -> Result<(), OpError> {
    let r = Regime::FormatExtremes;
    if regimes.len() > 1 {
        return Err(rr::regime_err(
            op,
            r,
            "cannot share a w4a16_matmul case with another regime (each sets rows of x; declare them in two cases)",
        ));
    }
    if mx_not_bf16 {
        return Err(rr::regime_err(
            op,
            r,
            "needs dtype = \"bf16\" with mxfp4: an f16 weight cannot hold 2^-127 or 2^127 times an FP4 code",
        ));
    }
    if s.m < 1 || s.n < extremes + 1 || s.k / s.group < 2 {
        return Err(rr::regime_err(
            op,
            r,
            format!(
                "needs m >= 1, n >= {} (an output column per extreme scale code and one for the NaN code) and k >= {} (two scale groups per row), this case has m = {}, n = {}, k = {}",
                extremes + 1,
                2 * s.group,
                s.m,
                s.n,
                s.k
            ),
        ));
    }
    Ok(())
}

/// Makes output column `j` the one product `x[i, col] * w[j, col]` in every row `i`: every
/// code of weight row `j` but `col`'s becomes zero and `x[i, col] = +-2^a(i)`. With
/// `clear_column`, column `col` of every other weight row is zero too (for an `x` column too
/// large to meet drawn weights). The codes it sets are marked in `protected`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn isolate(
    s: &Shape,
    j: usize,
    col: usize,
    clear_column: bool,
    a: &mut dyn FnMut(&mut GenContext) -> i32,
    codes: &mut [u8],
    x: &mut [f64],
    protected: &mut [bool],
    ctx: &mut GenContext,
) {
    let kept = codes[j * s.k + col];
    codes[j * s.k..(j + 1) * s.k].fill(0);
    codes[j * s.k + col] = kept;
    protected[j * s.k..(j + 1) * s.k].fill(true);
    if clear_column {
        for jj in (0..s.n).filter(|&jj| jj != j) {
            codes[jj * s.k + col] = 0;
            protected[jj * s.k + col] = true;
        }
    }
    for i in 0..s.m {
        let sign = if ctx.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
        x[i * s.k + col] = sign * pow2(a(ctx));
    }
}

/// Plants the witnesses (see the module documentation). `value(q, s)` is the exact weight of
/// code `q` under scale code `s` (times the global scale); `q` the largest element code,
/// `q_top` the one for the top E8M0 code. `codes` are logical `[n, k]`, `scales` `[n, k /
/// group]`, `x` `[m, k]`; `protected` marks the codes the construction set.
#[allow(clippy::too_many_arguments)]
pub(crate) fn impose_w4a16(
    s: &Shape,
    extremes: &[u8],
    q: u8,
    q_top: u8,
    value: &dyn Fn(u8, u8) -> f64,
    codes: &mut [u8],
    scales: &mut [u8],
    x: &mut [f64],
    protected: &mut [bool],
    ctx: &mut GenContext,
) {
    let gpr = s.k / s.group;
    let ordinary = if s.mx { 127 } else { 0x38 };
    let is_extreme = |v: u8| {
        if s.mx {
            matches!(v, 0 | 1 | 253 | 254 | 255)
        } else {
            v & 0x7F < 8 || v & 0x7F >= 0x7E
        }
    };
    for sc in scales.iter_mut().filter(|v| is_extreme(**v)) {
        *sc = ordinary;
    }
    let mut outs: Vec<usize> = (0..s.n).collect();
    ctx.shuffle(&mut outs);
    let nan_group = ctx.below(gpr as u64) as usize;
    let mut cols: Vec<usize> = (0..s.k).filter(|&c| c / s.group != nan_group).collect();
    ctx.shuffle(&mut cols);
    for (idx, &sc) in extremes.iter().enumerate() {
        let (j, col) = (outs[idx], cols[idx]);
        scales[j * gpr + col / s.group] = sc;
        let top = s.mx && sc == E8M0_TOP;
        let code = if top { q_top } else { q };
        let negative = ctx.next_u64() & 1 == 1;
        codes[j * s.k + col] = if negative { code | 8 } else { code };
        let base = if top {
            1
        } else {
            (-rr::exponent(value(code, sc)) - 3).clamp(-126, 124)
        };
        let mut a = |ctx: &mut GenContext| base + ctx.below(4) as i32;
        isolate(s, j, col, true, &mut a, codes, x, protected, ctx);
    }
    // The NaN group: nonzero codes of one sign against x of one sign per row.
    let j = outs[extremes.len()];
    scales[j * gpr + nan_group] = nan_scale(s.mx);
    let sign_bit = if ctx.next_u64() & 1 == 1 { 8 } else { 0 };
    let start = j * s.k + nan_group * s.group;
    for p in start..start + s.group {
        codes[p] = (1 + ctx.below(7) as u8) | sign_bit;
        protected[p] = true;
    }
    for i in 0..s.m {
        let sign = if ctx.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
        let row = &mut x[i * s.k + nan_group * s.group..i * s.k + (nan_group + 1) * s.group];
        for v in row {
            let mag = if v.is_finite() && *v != 0.0 {
                v.abs()
            } else {
                1.0
            };
            *v = sign * mag;
        }
    }
}
