//! Output elements as bits: reading one, the NaN rule ([`conform_metadata::fingerprint::NAN_RULE`]:
//! any NaN equals any NaN, everything else compares bit for bit), the distance in units in the
//! last place, and the hexadecimal spelling of the evidence.

use conform_reference::ops::{ElemType, Tensor};

/// The bits of element `i` of `t` (little-endian storage), zero-extended.
pub fn element(t: &Tensor, i: usize) -> u64 {
    let w = t.dtype.size_bytes();
    let mut b = [0u8; 8];
    b[..w].copy_from_slice(&t.data[i * w..(i + 1) * w]);
    u64::from_le_bytes(b)
}

/// The exponent and mantissa widths of a floating-point type.
fn float_layout(dtype: ElemType) -> Option<(u32, u32)> {
    match dtype {
        ElemType::F64 => Some((11, 52)),
        ElemType::F32 => Some((8, 23)),
        ElemType::F16 => Some((5, 10)),
        ElemType::Bf16 => Some((8, 7)),
        _ => None,
    }
}

/// Whether `bits` is a NaN of `dtype` (never, for an integer type).
pub fn is_nan(dtype: ElemType, bits: u64) -> bool {
    let Some((e, m)) = float_layout(dtype) else {
        return false;
    };
    let exp = (bits >> m) & ((1 << e) - 1);
    exp == (1 << e) - 1 && bits & ((1 << m) - 1) != 0
}

/// Whether two elements agree under the NaN rule.
pub fn same(dtype: ElemType, a: u64, b: u64) -> bool {
    a == b || (is_nan(dtype, a) && is_nan(dtype, b))
}

/// The element as a position on the number line: floats by sign and magnitude (so +0 and -0
/// are one place), integers by value.
fn ordinal(dtype: ElemType, bits: u64) -> i128 {
    match float_layout(dtype) {
        Some((e, m)) => {
            let sign = bits >> (e + m) & 1;
            let mag = (bits & ((1u64 << (e + m)) - 1)) as i128;
            if sign == 1 {
                -mag
            } else {
                mag
            }
        }
        None => match dtype {
            ElemType::I8 => bits as u8 as i8 as i128,
            ElemType::I32 => bits as u32 as i32 as i128,
            ElemType::I64 => bits as i64 as i128,
            _ => bits as i128,
        },
    }
}

/// The distance between two elements in units in the last place (integers: the difference);
/// 0 for two NaNs, `None` when exactly one is a NaN.
pub fn ulp_distance(dtype: ElemType, a: u64, b: u64) -> Option<u64> {
    match (is_nan(dtype, a), is_nan(dtype, b)) {
        (true, true) => Some(0),
        (false, false) => {
            let d = (ordinal(dtype, a) - ordinal(dtype, b)).unsigned_abs();
            Some(u64::try_from(d).unwrap_or(u64::MAX))
        }
        _ => None,
    }
}

/// `0x` and the element's bits in as many hex digits as its type has.
pub fn hex(dtype: ElemType, bits: u64) -> String {
    format!("0x{bits:0w$x}", w = dtype.size_bytes() * 2)
}

/// The larger of two distances, where `None` (a NaN on one side) dominates.
pub fn worse(a: Option<Option<u64>>, b: Option<u64>) -> Option<Option<u64>> {
    Some(match (a, b) {
        (None, d) => d,
        (Some(None), _) | (_, None) => None,
        (Some(Some(x)), Some(y)) => Some(x.max(y)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nans_are_one_class_and_distances_cross_zero() {
        // f16 NaNs with different payloads agree; a NaN and a number do not.
        assert!(same(ElemType::F16, 0x7e00, 0x7c01));
        assert!(same(ElemType::F16, 0xfe00, 0x7e00));
        assert!(!same(ElemType::F16, 0x7e00, 0x7c00));
        assert_eq!(ulp_distance(ElemType::F16, 0x7e00, 0x3c00), None);
        // +0 and -0 are one place; the smallest subnormals either side are 2 apart.
        assert_eq!(ulp_distance(ElemType::Bf16, 0x0000, 0x8000), Some(0));
        assert_eq!(ulp_distance(ElemType::Bf16, 0x0001, 0x8001), Some(2));
        assert_eq!(
            ulp_distance(ElemType::F32, 0x3f80_0000, 0x3f80_0003),
            Some(3)
        );
        // Integers by value, signed where the type is.
        assert_eq!(ulp_distance(ElemType::I8, 0xff, 0x01), Some(2));
        assert_eq!(ulp_distance(ElemType::U8, 0xff, 0x01), Some(254));
        assert_eq!(hex(ElemType::Bf16, 0x3f80), "0x3f80");
        assert_eq!(worse(None, Some(3)), Some(Some(3)));
        assert_eq!(worse(Some(Some(5)), Some(3)), Some(Some(5)));
        assert_eq!(worse(Some(Some(5)), None), Some(None));
    }

    #[test]
    fn elements_read_little_endian() {
        let t = Tensor::from_f32(vec![2], &[1.0, -2.0]);
        assert_eq!(element(&t, 0), 0x3f80_0000);
        assert_eq!(element(&t, 1), 0xc000_0000);
    }
}
