//! `quant_matmul`'s exact oracle arithmetic: one element from its exact integer accumulator,
//! the scales and the float bias (module docs of `quant_matmul`, "`oracle`").

use super::recipe::round_to_integer;
use crate::formats::format::FLOAT64;
use crate::formats::{Exact, Rounding, RoundingMode};

/// A finite f32 as (negative, significand, exponent).
fn parts(x: f32) -> (bool, u128, i32) {
    match Exact::of_f32(x) {
        Exact::Finite { negative, sig, exp } => (negative, sig, exp),
        _ => (false, 0, 0),
    }
}

/// The exact int8 requantisation: `acc * s` exactly (at most 33 + 11 significant bits: the
/// packed scale keeps 11, so the f64 product is exact), rounded once to an integer (ties to
/// even), clamped to [-256, 255], plus the 9-bit offset, clamped to [-128, 127].
pub fn oracle_requant(acc: i64, s: f32, off: i32) -> f64 {
    let r = round_to_integer(acc as f64 * s as f64, RoundingMode::NearestTiesToEven);
    (r.clamp(-256, 255) + off as i64).clamp(-128, 127) as f64
}

/// `acc * s * t + fb` as the f64 rounded to odd from the exact value (the product is exact:
/// at most 32 + 24 + 24 bits; the sum is exact where both terms, aligned, fit 126 bits, an f64
/// addition of the two rounded-to-odd terms otherwise).
pub fn oracle_value(acc: i64, s: f32, t: Option<f32>, fb: Option<f32>) -> f64 {
    let (sn, ss, se) = parts(s);
    let (tn, ts, te) = t.map_or((false, 1, 0), parts);
    let pn = (acc < 0) ^ sn ^ tn;
    let ps = acc.unsigned_abs() as u128 * ss * ts;
    let pe = se + te;
    let odd = Rounding::ieee(RoundingMode::ToOdd);
    let to_f64 = |negative: bool, sig: u128, exp: i32| -> f64 {
        f64::from_bits(Exact::Finite { negative, sig, exp }.round_to(&FLOAT64, odd))
    };
    let Some(b) = fb else {
        return to_f64(pn, ps, pe);
    };
    let (bn, bs, be) = parts(b);
    if ps == 0 {
        return to_f64(bn, bs, be);
    }
    if bs == 0 {
        return to_f64(pn, ps, pe);
    }
    // Align both to the smaller exponent when the shifted values fit 127 bits.
    let e = pe.min(be);
    let (sp, sb) = ((pe - e) as u32, (be - e) as u32);
    let bits = |v: u128| 128 - v.leading_zeros();
    if bits(ps) + sp <= 126 && bits(bs) + sb <= 126 {
        let a = (ps << sp) as i128 * if pn { -1 } else { 1 };
        let c = (bs << sb) as i128 * if bn { -1 } else { 1 };
        let v = a + c;
        return to_f64(v < 0, v.unsigned_abs(), e);
    }
    to_f64(pn, ps, pe) + to_f64(bn, bs, be)
}
