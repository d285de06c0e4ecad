//! The `rounding_ties` regime of the FP4 weight path: exact ties of `nvfp4_dequant`'s final
//! rounding and of `w4a16_matmul`'s output cast, planted so that a kernel that breaks ties the
//! other way (ties away where the recipe rounds to even, or the reverse) differs on 8 or more
//! elements on every seed instead of on the few a random draw happens to hold.
//!
//! `nvfp4_dequant`: the global scale becomes a rounding midpoint of the output type whose
//! kept bits end in 0 (its p significant bits with the last cleared, then the next bit set),
//! and one or two scale groups the stream chooses get a power-of-two block scale and, at 8
//! positions each, element codes of power-of-two normal magnitude (1, 2, 4 for E2M1; 1 for
//! E1M2; both signs). Every such `q * s * g` is the midpoint times a power of two: exact in f32
//! under every scale order whose combined scale stays in f32 (A, B, C), a normal value of the
//! output type, and a tie whose lower neighbour is even, so ties-to-even and ties-away give
//! different bits. Order D (the combined scale handed over as bf16) rounds the midpoint away
//! before the final cast; the caller verifies the ties under the case's own recipe.
//!
//! `w4a16_matmul`: up to two rows `i` of `x` (the stream chooses them, two K positions `p1`,
//! `p2` per row and up to 16 output columns `j`) are zero except `x[i, p1] = ±M 2^a` (M an
//! 8-bit significand) and `x[i, p2] = ±2^(a-d)` of the same sign, with `d = 1` for a bf16
//! output and `d = 4` for f16; the weights at `(j, p1)` and `(j, p2)` are both `±1` in scale
//! groups given one power-of-two scale code, and the NVFP4 global scale is a power of two.
//! Every weight of the case is then exact in the output type under every scale order, each
//! product `x w` exact in f32, so the f32 accumulator of `y[i, j]` is exactly
//! `±2^e (M 2^a + 2^(a-d))` whatever the summation order: 9 significant bits ending in 1 (bf16,
//! M even) or 12 (f16), a tie of the output cast whose lower neighbour is even.

use super::range_regimes::{exponent, pow2};
use super::regime::Regime;
use super::{GenContext, OpError};
use crate::dequant::{Fp4Element, HalfType};
use crate::formats::{e8m0, fp4_e1m2, fp4_e2m1, fp8_e4m3fn};

/// The fewest tie elements the regime promises per input set.
pub const FLOOR: usize = 8;
/// Tie elements planted per scale group (`nvfp4_dequant`).
const PER_GROUP: usize = 8;
/// Scale groups carrying ties (`nvfp4_dequant`, at most).
pub const GROUPS: usize = 2;
/// Rows of `x` carrying ties (`w4a16_matmul`, at most).
const ROWS: usize = 2;
/// Tie columns per row (`w4a16_matmul`, at most `n`).
const COLUMNS: usize = 16;

/// What the constructions (ties here, `format_extremes` in `fp4_extremes`) need of a case.
pub(crate) struct TieShape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Elements per scale group.
    pub group: usize,
    /// MXFP4 (E8M0 scales, no global scale) rather than NVFP4.
    pub mx: bool,
    pub element: Fp4Element,
    pub half: HalfType,
}

impl TieShape {
    /// The output type's significant bits.
    fn precision(&self) -> u32 {
        match self.half {
            HalfType::Bf16 => 8,
            HalfType::F16 => 11,
        }
    }

    /// The exponent of the output type's smallest normal and of its overflow threshold.
    fn normal_range(&self) -> (i32, i32) {
        match self.half {
            HalfType::Bf16 => (-126, 127),
            HalfType::F16 => (-14, 15),
        }
    }

    fn value(&self, code: u8) -> f64 {
        match self.element {
            Fp4Element::E2m1 => fp4_e2m1::e2m1_to_f64(code),
            Fp4Element::E1m2 => fp4_e1m2::e1m2_to_f64(code),
        }
    }

    /// The positive element codes of power-of-two normal magnitude (1.0 and up).
    fn pow2_codes(&self) -> Vec<u8> {
        (1u8..8)
            .filter(|&q| {
                let v = self.value(q);
                v >= 1.0 && pow2(exponent(v)) == v
            })
            .collect()
    }

    /// The positive element code of 1.0.
    fn one(&self) -> u8 {
        (1u8..8).find(|&q| self.value(q) == 1.0).unwrap_or(2)
    }
}

pub(crate) fn err(op: &str, message: impl Into<String>) -> OpError {
    OpError::Regime {
        op: op.to_string(),
        regime: Regime::RoundingTies.name().to_string(),
        message: message.into(),
    }
}

/// A rounding midpoint of the output type next to `g` (positive, normal): its significant
/// bits kept, the next one set. With `even`, the last kept bit is cleared first, so that the
/// midpoint's lower neighbour is even and the two tie rules round it apart.
pub(crate) fn midpoint(g: f32, half: HalfType, even: bool) -> f32 {
    let bits = match half {
        HalfType::Bf16 => 8,
        HalfType::F16 => 11,
    };
    let drop = 24 - bits;
    let mut b = g.to_bits() >> drop << drop;
    if even {
        b &= !(1 << drop);
    }
    f32::from_bits(b | (1 << (drop - 1)))
}

/// Checks that a `w4a16_matmul` case can hold the regime.
pub(crate) fn check_w4a16(op: &str, s: &TieShape) -> Result<(), OpError> {
    let rows = s.m.min(ROWS);
    let cols = s.n.min(COLUMNS);
    if rows * cols < FLOOR {
        return Err(err(
            op,
            format!(
                "needs at least {FLOOR} output elements to tie: {rows} row(s) of {cols} column(s) fit (m {}, n {})",
                s.m, s.n
            ),
        ));
    }
    Ok(())
}

/// `nvfp4_dequant`: sets `global` to an even-below midpoint and plants power-of-two
/// `q * s` pairs in the scale groups `groups` (the caller's choice, one or more), marking
/// their positions `protected`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn impose_dequant(
    op: &str,
    s: &TieShape,
    groups: &[usize],
    codes: &mut [u8],
    scales: &mut [u8],
    global: &mut f32,
    protected: &mut [bool],
    ctx: &mut GenContext,
) -> Result<(), OpError> {
    if !global.is_normal() || *global < 0.0 {
        return Err(err(
            op,
            format!("the drawn global scale {global} is not a positive normal f32"),
        ));
    }
    *global = midpoint(*global, s.half, true);
    let g = f64::from(*global);
    let signed: Vec<u8> = s
        .pow2_codes()
        .into_iter()
        .flat_map(|q| [q, q | 8])
        .collect();
    let (lo, hi) = s.normal_range();
    let (q_min, q_max) = signed
        .iter()
        .map(|&q| s.value(q & 7))
        .fold((f64::MAX, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    // Power-of-two E4M3 block scales whose products with every planted code stay normal and
    // below the overflow threshold (the midpoint's upper neighbour included).
    let feasible: Vec<u8> = (1u8..=0x7E)
        .filter(|&c| {
            let v = fp8_e4m3fn::e4m3fn_to_f64(c);
            pow2(exponent(v)) == v && q_min * v * g >= pow2(lo) && q_max * v * g * 2.0 < pow2(hi)
        })
        .collect();
    if feasible.is_empty() {
        return Err(err(
            op,
            format!("no power-of-two block scale puts q * s * {g:e} in the normal range of the output type"),
        ));
    }
    if groups.is_empty() {
        return Err(err(op, "no scale group is left for it"));
    }
    let per_row = s.k / s.group;
    for &gi in groups {
        scales[gi] = feasible[ctx.below(feasible.len() as u64) as usize];
        let start = (gi / per_row) * s.k + (gi % per_row) * s.group;
        let mut offsets: Vec<usize> = (0..s.group).collect();
        ctx.shuffle(&mut offsets);
        let mut planted = signed.clone();
        ctx.shuffle(&mut planted);
        for (t, &o) in offsets.iter().take(PER_GROUP).enumerate() {
            codes[start + o] = planted[t % planted.len()];
            protected[start + o] = true;
        }
    }
    Ok(())
}

/// `w4a16_matmul`: see the module documentation. `global` is `None` for MXFP4; `x` is the
/// `[m, k]` activation in f64 (bf16 values), rewritten on the tie rows.
#[allow(clippy::too_many_arguments)]
pub(crate) fn impose_w4a16(
    op: &str,
    s: &TieShape,
    codes: &mut [u8],
    scales: &mut [u8],
    global: Option<&mut f32>,
    x: &mut [f64],
    protected: &mut [bool],
    ctx: &mut GenContext,
) -> Result<(), OpError> {
    check_w4a16(op, s)?;
    let eg = match global {
        Some(g) => {
            if !g.is_normal() {
                return Err(err(
                    op,
                    format!("the drawn global scale {g} is not a normal f32"),
                ));
            }
            let e = exponent(f64::from(g.abs()));
            *g = pow2(e) as f32;
            e
        }
        None => 0,
    };
    // One power-of-two scale code, 2^-2..2^2, for every group the ties touch.
    let es = ctx.below(5) as i32 - 2;
    let code = if s.mx {
        (127 + es) as u8
    } else {
        ((7 + es) << 3) as u8
    };
    let sv = if s.mx {
        e8m0::e8m0_to_f64(code)
    } else {
        fp8_e4m3fn::e4m3fn_to_f64(code)
    };
    debug_assert_eq!(sv, pow2(es));
    let one = s.one();
    let d = s.precision() as i32 - 7;
    let gpr = s.k / s.group;
    let mut rows: Vec<usize> = (0..s.m).collect();
    ctx.shuffle(&mut rows);
    let mut ks: Vec<usize> = (0..s.k).collect();
    ctx.shuffle(&mut ks);
    let mut cols: Vec<usize> = (0..s.n).collect();
    for (t, &i) in rows.iter().take(ROWS).enumerate() {
        let (p1, p2) = (ks[2 * t], ks[2 * t + 1]);
        ctx.shuffle(&mut cols);
        for &j in cols.iter().take(COLUMNS) {
            let q = if ctx.below(2) == 0 { one } else { one | 8 };
            for p in [p1, p2] {
                codes[j * s.k + p] = q;
                protected[j * s.k + p] = true;
                scales[j * gpr + p / s.group] = code;
            }
        }
        // M 2^a + 2^(a-d), times the weight scale 2^(es+eg), of magnitude 2^0..2^4.
        let m = match s.half {
            HalfType::Bf16 => 128 + 2 * ctx.below(64) as i32,
            HalfType::F16 => 128 + ctx.below(128) as i32,
        };
        let a = ctx.below(4) as i32 - 7 - es - eg;
        if a - d < -126 || a + 8 > 127 {
            return Err(err(
                op,
                format!("the activations 2^{a} (global scale 2^{eg}) leave bf16's normal range"),
            ));
        }
        let sign = if ctx.below(2) == 0 { 1.0 } else { -1.0 };
        x[i * s.k..(i + 1) * s.k].fill(0.0);
        x[i * s.k + p1] = sign * f64::from(m) * pow2(a);
        x[i * s.k + p2] = sign * pow2(a - d);
    }
    Ok(())
}
