//! Element access for the comparison kernels: raw bits, exact value, NaN class and the ordered
//! integer representation (for ULP distances), one implementation per element type.

use conform_reference::formats::f16::f16_to_f32;

/// One element type as the kernels read it (little-endian bytes).
pub(crate) trait Lane {
    /// Bytes per element.
    const BYTES: usize;
    /// The magnitude from which a value rounds to infinity in this type under ties-to-even
    /// (the largest finite value plus half its ULP); +Inf for a type with no infinity or no
    /// finite bound below f64's.
    const OVERFLOW: f64;
    /// The element's bits from exactly `BYTES` bytes.
    fn load(bytes: &[u8]) -> u64;
    /// The exact value.
    fn value(bits: u64) -> f64;
    /// Whether the bits encode a NaN.
    fn is_nan(bits: u64) -> bool;
    /// Monotone integer image: `a < b` as numbers iff `ord(a) < ord(b)`; +0 and -0 both map to
    /// 0; adjacent representable values differ by 1.
    fn ord(bits: u64) -> i64;
}

/// Sign-magnitude float bits of width `W` to the ordered integer line.
#[inline(always)]
fn float_ord<const W: u32>(bits: u64) -> i64 {
    // Branch-free: negate the magnitude when the sign bit is set ((m ^ s) - s with s = 0 or -1).
    let mag = (bits & ((1u64 << (W - 1)) - 1)) as i64;
    let s = -(((bits >> (W - 1)) & 1) as i64);
    (mag ^ s) - s
}

/// 2^127, the scale of the largest binade of f32 and bf16.
const TWO_127: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;

/// `x` as an element of type `L` holds it: a finite value beyond `L`'s range (an unrounded
/// oracle whose exact result overflows the output dtype) is the infinity of its sign; every
/// other value, NaN included, is itself.
#[inline(always)]
pub(crate) fn in_range_of<L: Lane>(x: f64) -> f64 {
    if x.abs() >= L::OVERFLOW {
        f64::INFINITY.copysign(x)
    } else {
        x
    }
}

pub(crate) struct Bf16Lane;
pub(crate) struct F16Lane;
pub(crate) struct F32Lane;
pub(crate) struct F64Lane;
pub(crate) struct U8Lane;
pub(crate) struct I8Lane;
pub(crate) struct I32Lane;
pub(crate) struct I64Lane;

impl Lane for Bf16Lane {
    const BYTES: usize = 2;
    const OVERFLOW: f64 = (2.0 - 1.0 / 256.0) * TWO_127;
    #[inline(always)]
    fn load(b: &[u8]) -> u64 {
        u16::from_le_bytes([b[0], b[1]]) as u64
    }
    #[inline(always)]
    fn value(bits: u64) -> f64 {
        f32::from_bits((bits as u32) << 16) as f64
    }
    #[inline(always)]
    fn is_nan(bits: u64) -> bool {
        bits & 0x7FFF > 0x7F80
    }
    #[inline(always)]
    fn ord(bits: u64) -> i64 {
        float_ord::<16>(bits)
    }
}

impl Lane for F16Lane {
    const BYTES: usize = 2;
    const OVERFLOW: f64 = 65520.0;
    #[inline(always)]
    fn load(b: &[u8]) -> u64 {
        u16::from_le_bytes([b[0], b[1]]) as u64
    }
    #[inline(always)]
    fn value(bits: u64) -> f64 {
        f16_to_f32(bits as u16) as f64
    }
    #[inline(always)]
    fn is_nan(bits: u64) -> bool {
        bits & 0x7FFF > 0x7C00
    }
    #[inline(always)]
    fn ord(bits: u64) -> i64 {
        float_ord::<16>(bits)
    }
}

impl Lane for F32Lane {
    const BYTES: usize = 4;
    const OVERFLOW: f64 = (2.0 - 1.0 / 16_777_216.0) * TWO_127;
    #[inline(always)]
    fn load(b: &[u8]) -> u64 {
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64
    }
    #[inline(always)]
    fn value(bits: u64) -> f64 {
        f32::from_bits(bits as u32) as f64
    }
    #[inline(always)]
    fn is_nan(bits: u64) -> bool {
        bits & 0x7FFF_FFFF > 0x7F80_0000
    }
    #[inline(always)]
    fn ord(bits: u64) -> i64 {
        float_ord::<32>(bits)
    }
}

impl Lane for F64Lane {
    const BYTES: usize = 8;
    const OVERFLOW: f64 = f64::INFINITY;
    #[inline(always)]
    fn load(b: &[u8]) -> u64 {
        u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
    #[inline(always)]
    fn value(bits: u64) -> f64 {
        f64::from_bits(bits)
    }
    #[inline(always)]
    fn is_nan(bits: u64) -> bool {
        bits & 0x7FFF_FFFF_FFFF_FFFF > 0x7FF0_0000_0000_0000
    }
    #[inline(always)]
    fn ord(bits: u64) -> i64 {
        float_ord::<64>(bits)
    }
}

impl Lane for U8Lane {
    const BYTES: usize = 1;
    const OVERFLOW: f64 = f64::INFINITY;
    #[inline(always)]
    fn load(b: &[u8]) -> u64 {
        b[0] as u64
    }
    #[inline(always)]
    fn value(bits: u64) -> f64 {
        bits as f64
    }
    #[inline(always)]
    fn is_nan(_: u64) -> bool {
        false
    }
    #[inline(always)]
    fn ord(bits: u64) -> i64 {
        bits as i64
    }
}

impl Lane for I8Lane {
    const BYTES: usize = 1;
    const OVERFLOW: f64 = f64::INFINITY;
    #[inline(always)]
    fn load(b: &[u8]) -> u64 {
        b[0] as u64
    }
    #[inline(always)]
    fn value(bits: u64) -> f64 {
        bits as u8 as i8 as f64
    }
    #[inline(always)]
    fn is_nan(_: u64) -> bool {
        false
    }
    #[inline(always)]
    fn ord(bits: u64) -> i64 {
        bits as u8 as i8 as i64
    }
}

impl Lane for I32Lane {
    const BYTES: usize = 4;
    const OVERFLOW: f64 = f64::INFINITY;
    #[inline(always)]
    fn load(b: &[u8]) -> u64 {
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64
    }
    #[inline(always)]
    fn value(bits: u64) -> f64 {
        bits as u32 as i32 as f64
    }
    #[inline(always)]
    fn is_nan(_: u64) -> bool {
        false
    }
    #[inline(always)]
    fn ord(bits: u64) -> i64 {
        bits as u32 as i32 as i64
    }
}

impl Lane for I64Lane {
    const BYTES: usize = 8;
    const OVERFLOW: f64 = f64::INFINITY;
    #[inline(always)]
    fn load(b: &[u8]) -> u64 {
        u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
    #[inline(always)]
    fn value(bits: u64) -> f64 {
        bits as i64 as f64
    }
    #[inline(always)]
    fn is_nan(_: u64) -> bool {
        false
    }
    #[inline(always)]
    fn ord(bits: u64) -> i64 {
        bits as i64
    }
}

/// ULP distance between two non-NaN elements: distance on the ordered integer line.
#[inline(always)]
pub(crate) fn ulp_distance<L: Lane>(a: u64, b: u64) -> u64 {
    L::ord(a).abs_diff(L::ord(b))
}

/// The largest ULP distance between corresponding elements of two float tensors of the same
/// dtype and shape (NaN vs NaN counts 0, NaN vs a number `u64::MAX`); `None` when the tensors
/// differ in dtype or shape or are not floats. Used to size golden-data changes.
pub fn max_ulp_between(
    a: &conform_reference::ops::Tensor,
    b: &conform_reference::ops::Tensor,
) -> Option<u64> {
    use conform_reference::ops::ElemType;
    fn run<L: Lane>(a: &[u8], b: &[u8]) -> u64 {
        a.chunks_exact(L::BYTES)
            .zip(b.chunks_exact(L::BYTES))
            .map(|(x, y)| {
                let (x, y) = (L::load(x), L::load(y));
                match (L::is_nan(x), L::is_nan(y)) {
                    (true, true) => 0,
                    (false, false) => ulp_distance::<L>(x, y),
                    _ => u64::MAX,
                }
            })
            .max()
            .unwrap_or(0)
    }
    if a.dtype != b.dtype || a.shape != b.shape || a.data.len() != b.data.len() {
        return None;
    }
    Some(match a.dtype {
        ElemType::Bf16 => run::<Bf16Lane>(&a.data, &b.data),
        ElemType::F16 => run::<F16Lane>(&a.data, &b.data),
        ElemType::F32 => run::<F32Lane>(&a.data, &b.data),
        ElemType::F64 => run::<F64Lane>(&a.data, &b.data),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_ordered_line_is_monotone_over_all_non_nan_codes() {
        let mut codes: Vec<u64> = (0u64..=0xFFFF).filter(|&b| !Bf16Lane::is_nan(b)).collect();
        codes.sort_by(|&a, &b| Bf16Lane::value(a).partial_cmp(&Bf16Lane::value(b)).unwrap());
        for w in codes.windows(2) {
            let (va, vb) = (Bf16Lane::value(w[0]), Bf16Lane::value(w[1]));
            let step = Bf16Lane::ord(w[1]) - Bf16Lane::ord(w[0]);
            if va == vb {
                assert_eq!(step, 0, "+0/-0 share a point");
            } else {
                assert_eq!(step, 1, "{:#x} -> {:#x}", w[0], w[1]);
            }
        }
    }

    #[test]
    fn f16_ordered_line_is_monotone_over_all_non_nan_codes() {
        let mut codes: Vec<u64> = (0u64..=0xFFFF).filter(|&b| !F16Lane::is_nan(b)).collect();
        codes.sort_by(|&a, &b| F16Lane::value(a).partial_cmp(&F16Lane::value(b)).unwrap());
        for w in codes.windows(2) {
            let step = F16Lane::ord(w[1]) - F16Lane::ord(w[0]);
            let expect = if F16Lane::value(w[0]) == F16Lane::value(w[1]) {
                0
            } else {
                1
            };
            assert_eq!(step, expect, "{:#x} -> {:#x}", w[0], w[1]);
        }
    }

    #[test]
    fn the_overflow_bound_is_where_ties_to_even_reaches_infinity() {
        use conform_reference::formats::{bf16::f64_to_bf16, f16::f64_to_f16, Rounding};
        let rne = Rounding::RNE;
        let below = |x: f64| f64::from_bits(x.to_bits() - 1);
        // The largest finite value plus half its ULP.
        let bound = |max: f64, prev: f64| max + (max - prev) / 2.0;
        assert_eq!(
            Bf16Lane::OVERFLOW,
            bound(Bf16Lane::value(0x7F7F), Bf16Lane::value(0x7F7E))
        );
        assert_eq!(
            F16Lane::OVERFLOW,
            bound(F16Lane::value(0x7BFF), F16Lane::value(0x7BFE))
        );
        assert_eq!(
            F32Lane::OVERFLOW,
            bound(f32::MAX as f64, f32::from_bits(0x7F7F_FFFE) as f64)
        );
        for sign in [1.0, -1.0] {
            let (o, b) = (sign * Bf16Lane::OVERFLOW, sign * below(Bf16Lane::OVERFLOW));
            assert!(Bf16Lane::value(f64_to_bf16(o, rne) as u64).is_infinite());
            assert!(Bf16Lane::value(f64_to_bf16(b, rne) as u64).is_finite());
            let (o, b) = (sign * F16Lane::OVERFLOW, sign * below(F16Lane::OVERFLOW));
            assert!(F16Lane::value(f64_to_f16(o, rne) as u64).is_infinite());
            assert!(F16Lane::value(f64_to_f16(b, rne) as u64).is_finite());
            let (o, b) = (sign * F32Lane::OVERFLOW, sign * below(F32Lane::OVERFLOW));
            assert!((o as f32).is_infinite() && (b as f32).is_finite());
            assert_eq!(in_range_of::<F32Lane>(o), f64::INFINITY * sign);
            assert_eq!(in_range_of::<F32Lane>(b), b);
        }
        assert!(in_range_of::<Bf16Lane>(f64::NAN).is_nan());
        assert_eq!(in_range_of::<F64Lane>(f64::MAX), f64::MAX);
        assert_eq!(in_range_of::<I32Lane>(f64::NEG_INFINITY), f64::NEG_INFINITY);
    }

    #[test]
    fn ulp_distances_across_zero_and_to_infinity() {
        // Smallest positive and smallest negative subnormal are 2 apart (through +-0).
        assert_eq!(ulp_distance::<Bf16Lane>(0x0001, 0x8001), 2);
        assert_eq!(ulp_distance::<Bf16Lane>(0x0000, 0x8000), 0);
        // Max finite to +Inf is one step.
        assert_eq!(ulp_distance::<Bf16Lane>(0x7F7F, 0x7F80), 1);
        assert_eq!(ulp_distance::<F32Lane>(0x3F80_0000, 0x3F80_0003), 3);
        assert_eq!(
            ulp_distance::<F64Lane>(0x7FEF_FFFF_FFFF_FFFF, 0xFFEF_FFFF_FFFF_FFFF),
            2 * 0x7FEF_FFFF_FFFF_FFFF
        );
        assert_eq!(ulp_distance::<I32Lane>((-3i32) as u32 as u64, 4), 7);
        assert!(F16Lane::is_nan(0x7DA5) && !F16Lane::is_nan(0x7C00));
        assert!(Bf16Lane::is_nan(0xFFC0) && !Bf16Lane::is_nan(0xFF80));
    }
}
