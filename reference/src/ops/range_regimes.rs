//! The range regimes of the families without attention ([`super::regime`]):
//! `overflow_to_inf`, `subnormal_outputs` and `format_extremes`, made true after the ordinary
//! draw of a case's inputs, and the checks that say whether a set of exact outputs holds them.
//!
//! Each family places the regime on elements the seed chooses, with magnitudes the seed
//! chooses inside a target band of the output dtype ([`band`]):
//!
//! - `overflow_to_inf`: exact outputs of magnitude 2^17..2^20 (f16, whose largest finite value
//!   is 65504 < 2^16) or 2^129..2^132 (bf16, largest finite < 2^128): at least twice the
//!   largest finite value, so round-to-nearest (ties either way) gives the infinity whatever
//!   the operation order, and a kernel that saturates to the largest finite value is caught.
//! - `subnormal_outputs`: exact outputs of magnitude 2^-22..2^-14 (f16) or 2^-131..2^-126
//!   (bf16), below the smallest normal and far above half the smallest subnormal, so the
//!   rounded value is a nonzero subnormal and a kernel that flushes it to zero is caught.
//!
//! Every regime is placed with both signs. Where the family computes a sum (W4A16, MC2) the
//! chosen output row is made a single product: the row's activations are zero except one
//! element (on one rank for MC2), so the sign and magnitude do not depend on the order of the
//! sum and no +Inf meets a -Inf.

use super::regime::Regime;
use super::{ElemType, GenContext, OpError};

/// The band `[2^lo, 2^hi)` of exact magnitudes a family aims at for `regime` in output
/// dtype `et` (`None`: the regime has no band, or the dtype is not f16/bf16).
pub fn band(regime: Regime, et: ElemType) -> Option<(i32, i32)> {
    match (regime, et) {
        (Regime::OverflowToInf, ElemType::F16) => Some((17, 20)),
        (Regime::OverflowToInf, ElemType::Bf16) => Some((129, 132)),
        (Regime::SubnormalOutputs, ElemType::F16) => Some((-22, -14)),
        (Regime::SubnormalOutputs, ElemType::Bf16) => Some((-131, -126)),
        _ => None,
    }
}

/// The largest finite value and the smallest normal of f16/bf16.
fn limits(et: ElemType) -> Option<(f64, f64)> {
    match et {
        ElemType::F16 => Some((65504.0, pow2(-14))),
        ElemType::Bf16 => Some(((2.0 - pow2(-7)) * pow2(127), pow2(-126))),
        _ => None,
    }
}

/// 2^e, exactly (e within f64's normal range).
pub(crate) fn pow2(e: i32) -> f64 {
    f64::from_bits(((1023 + e as i64) as u64) << 52)
}

/// floor(log2(|x|)) of a finite nonzero `x`.
pub(crate) fn exponent(x: f64) -> i32 {
    let bits = x.abs().to_bits();
    let e = (bits >> 52) as i32;
    if e == 0 {
        // f64 subnormal: never reached by the values here, but keep it exact.
        -1074 + (63 - bits.leading_zeros() as i32)
    } else {
        e - 1023
    }
}

/// Whether the exact values `exact` (outputs before their rounding to `et`) hold `regime`
/// with both signs: for `overflow_to_inf` a value at least twice the dtype's largest finite
/// value and one at most minus that; for `subnormal_outputs` a positive and a negative value
/// whose magnitude is at least the lower end of the band and below the smallest normal.
pub fn holds(regime: Regime, et: ElemType, exact: &[f64]) -> bool {
    let Some((max, min_normal)) = limits(et) else {
        return false;
    };
    // The magnitudes that count: [lo, hi) (hi infinite for overflow).
    let (lo, hi) = match regime {
        Regime::OverflowToInf => (2.0 * max, f64::INFINITY),
        Regime::SubnormalOutputs => (pow2(band(regime, et).map_or(0, |b| b.0)), min_normal),
        _ => return false,
    };
    let inside = |m: f64| m >= lo && m < hi;
    exact.iter().any(|&v| v > 0.0 && inside(v)) && exact.iter().any(|&v| v < 0.0 && inside(-v))
}

/// The error for a regime a case cannot hold.
pub(crate) fn regime_err(op: &str, r: Regime, message: impl Into<String>) -> OpError {
    OpError::Regime {
        op: op.to_string(),
        regime: r.name().to_string(),
        message: message.into(),
    }
}

/// The construction broke its own promise (a bug of conform, never of the case).
pub(crate) fn broken(op: &str, r: Regime, what: &str) -> OpError {
    OpError::Failed {
        op: op.to_string(),
        message: format!(
            "regime `{}`: the construction does not hold: {what}",
            r.name()
        ),
    }
}

/// The range regimes of `regimes` that need outputs in a band, in order.
pub fn banded(regimes: &[Regime]) -> Vec<Regime> {
    regimes
        .iter()
        .copied()
        .filter(|r| matches!(r, Regime::OverflowToInf | Regime::SubnormalOutputs))
        .collect()
}

/// How many output columns of a banded row carry the regime (when the row has that many):
/// enough that a fault confined to the regime's elements (a saturating or flushing cast) is
/// wrong on at least the adequacy margin floor of 8 elements.
pub const BANDED_COLUMNS: usize = 8;

/// The columns of a banded output row, with their signs: `min(n, BANDED_COLUMNS)` distinct
/// columns drawn from `ctx`, alternately + and -, so both signs are present (n >= 2).
pub(crate) fn signed_columns(n: usize, ctx: &mut GenContext) -> Vec<(usize, f64)> {
    let mut cols: Vec<usize> = (0..n).collect();
    ctx.shuffle(&mut cols);
    cols.truncate(n.min(BANDED_COLUMNS));
    cols.into_iter()
        .enumerate()
        .map(|(t, j)| (j, if t % 2 == 0 { 1.0 } else { -1.0 }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_lie_beyond_the_dtype_limits() {
        for et in [ElemType::F16, ElemType::Bf16] {
            let (max, min_normal) = limits(et).unwrap();
            let (lo, _) = band(Regime::OverflowToInf, et).unwrap();
            assert!(pow2(lo) >= 2.0 * max);
            let (lo, hi) = band(Regime::SubnormalOutputs, et).unwrap();
            assert!(pow2(hi) <= min_normal && pow2(lo) > 0.0);
            assert!(holds(Regime::OverflowToInf, et, &[4.0 * max, -4.0 * max]));
            assert!(!holds(Regime::OverflowToInf, et, &[4.0 * max, -max]));
            assert!(holds(
                Regime::SubnormalOutputs,
                et,
                &[pow2(lo), -min_normal / 2.0]
            ));
            assert!(!holds(Regime::SubnormalOutputs, et, &[pow2(lo), 0.0]));
            assert!(!holds(
                Regime::SubnormalOutputs,
                et,
                &[pow2(lo), -min_normal]
            ));
        }
        assert_eq!(exponent(6.0), 2);
        assert_eq!(exponent(-0.75), -1);
        // 2^-130 by halving (exact), not through platform math.
        assert_eq!(pow2(-130), (0..130).fold(1.0f64, |x, _| x / 2.0));
    }
}
