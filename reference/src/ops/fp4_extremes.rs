//! `format_extremes` for `w4a16_matmul`: every extreme scale code of the format as the one
//! product of an output, on every seed.
//!
//! A matmul's f32 sum absorbs one weight's difference among K drawn products (and a NaN or
//! Inf weight mixes with the others), so extreme scale codes spread by a `special` draw are
//! killed only on some seeds. Here each extreme scale code `s` takes its own row `i` of `x`,
//! its own output column `j` and one K position `col`: the group of `(j, col)` gets scale `s`,
//! every code of that group but `col`'s is zero, `col`'s is the element code `q` (the largest,
//! or for the top E8M0 code the largest whose weight stays finite) with a drawn sign, row `i`
//! of `x` is zero except `x[i, col] = +-2^a`, column `col` of every other row of `x` is zero
//! and column `col` of every other weight row is zero. So `y[i, j] = x[i, col] * w[j, col]`
//! exactly, in any summation order, and every other output is what it was without the
//! witness's column. `a` puts the product at about 2^-3..2^0 (an exact power-of-two multiple
//! of the dequantised weight, so the final cast is exact), or for the top E8M0 code 2^1..2^4
//! above the weight (the f32 product overflows to Inf: the output cast's overflow is judged).
//! Other groups of row `j` that hold an extreme code of a `special` draw get an ordinary
//! code, so no Inf or NaN weight meets a zero of row `i`.

use super::range_regimes::{self as rr, pow2};
use super::regime::Regime;
use super::{GenContext, OpError};

/// The case as the construction sees it.
pub(crate) struct Shape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub group: usize,
    /// MXFP4 (E8M0 scales); NVFP4 otherwise.
    pub mx: bool,
}

/// The top E8M0 code (2^127), whose witness overflows.
const E8M0_TOP: u8 = 254;

/// Whether a W4A16 case can hold `format_extremes`: on its own (no other regime sets the rows
/// of `x` it takes), a row of `x` and an output column per extreme code, and for MXFP4 a bf16
/// output (an f16 weight cannot hold 2^-127 or 2^127 times an FP4 code).
pub(crate) fn check_w4a16(
    op: &str,
    regimes: &[Regime],
    m: usize,
    n: usize,
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
    if m < 3 || n < 3 {
        return Err(rr::regime_err(
            op,
            r,
            format!("needs m >= 3 and n >= 3 (a row of x and an output column per extreme scale code), this case has m = {m}, n = {n}"),
        ));
    }
    Ok(())
}

/// Plants the witnesses (see the module documentation). `value(q, s)` is the exact weight of
/// code `q` under scale code `s` (times the global scale); `q` the largest element code,
/// `q_top` the one for the top E8M0 code. `codes` are logical `[n, k]`, `scales` `[n, k /
/// group]`, `x` `[m, k]`.
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
    let mut rows: Vec<usize> = (0..s.m).collect();
    ctx.shuffle(&mut rows);
    let mut outs: Vec<usize> = (0..s.n).collect();
    ctx.shuffle(&mut outs);
    let mut cols: Vec<usize> = (0..s.k).collect();
    ctx.shuffle(&mut cols);
    for (idx, &sc) in extremes.iter().enumerate() {
        let (i, j, col) = (rows[idx], outs[idx], cols[idx]);
        let g = col / s.group;
        for gi in 0..gpr {
            if is_extreme(scales[j * gpr + gi]) {
                scales[j * gpr + gi] = ordinary;
            }
        }
        scales[j * gpr + g] = sc;
        let top = s.mx && sc == E8M0_TOP;
        let code = if top { q_top } else { q };
        let start = j * s.k + g * s.group;
        codes[start..start + s.group].fill(0);
        let negative = ctx.next_u64() & 1 == 1;
        codes[j * s.k + col] = if negative { code | 8 } else { code };
        for jj in (0..s.n).filter(|&jj| jj != j) {
            codes[jj * s.k + col] = 0;
        }
        for ii in 0..s.m {
            x[ii * s.k + col] = 0.0;
        }
        let a = if top {
            1 + ctx.below(4) as i32
        } else {
            (-rr::exponent(value(code, sc)) - 3 + ctx.below(4) as i32).clamp(-126, 127)
        };
        let sign = if ctx.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
        x[i * s.k..(i + 1) * s.k].fill(0.0);
        x[i * s.k + col] = sign * pow2(a);
    }
}
