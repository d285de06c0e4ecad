//! How far two versions of a tensor are apart, for drift messages and bless reviews.

use conform_reference::ops::{ElemType, Tensor};

/// The ordered-integer image of a float's bits: adjacent floats differ by 1, -0 == +0.
fn ordered(bits: u64, width: u32) -> i128 {
    let sign = 1u64 << (width - 1);
    let mag = (bits & (sign - 1)) as i128;
    if bits & sign != 0 {
        -mag
    } else {
        mag
    }
}

/// The largest ULP distance between corresponding elements (NaN vs NaN counts 0, NaN vs
/// number counts as `u64::MAX`); `None` when the tensors differ in dtype or shape or are not
/// floats.
pub fn max_ulp_change(a: &Tensor, b: &Tensor) -> Option<u64> {
    if a.dtype != b.dtype || a.shape != b.shape || !a.dtype.is_float() {
        return None;
    }
    let w = a.dtype.size_bytes();
    let width = (w * 8) as u32;
    let mut worst = 0u64;
    for (x, y) in a.data.chunks_exact(w).zip(b.data.chunks_exact(w)) {
        let mut xb = [0u8; 8];
        let mut yb = [0u8; 8];
        xb[..w].copy_from_slice(x);
        yb[..w].copy_from_slice(y);
        let (xu, yu) = (u64::from_le_bytes(xb), u64::from_le_bytes(yb));
        let (xn, yn) = (is_nan(a.dtype, xu), is_nan(a.dtype, yu));
        let d = match (xn, yn) {
            (true, true) => 0,
            (false, false) => ordered(xu, width)
                .abs_diff(ordered(yu, width))
                .min(u64::MAX as u128) as u64,
            _ => u64::MAX,
        };
        worst = worst.max(d);
    }
    Some(worst)
}

fn is_nan(dtype: ElemType, bits: u64) -> bool {
    match dtype {
        ElemType::F64 => f64::from_bits(bits).is_nan(),
        ElemType::F32 => f32::from_bits(bits as u32).is_nan(),
        ElemType::F16 => (bits & 0x7C00) == 0x7C00 && (bits & 0x03FF) != 0,
        ElemType::Bf16 => (bits & 0x7F80) == 0x7F80 && (bits & 0x007F) != 0,
        _ => false,
    }
}

/// A short description of a change (`max 3 ulp`, `dtype/shape changed`, `bytes differ`).
pub fn describe_change(old: &Tensor, new: &Tensor) -> String {
    match max_ulp_change(old, new) {
        Some(u64::MAX) => "NaN where a number was (or the reverse)".to_string(),
        Some(u) => format!("max {u} ulp"),
        None if old.dtype != new.dtype || old.shape != new.shape => format!(
            "{} {:?} -> {} {:?}",
            old.dtype.name(),
            old.shape,
            new.dtype.name(),
            new.shape
        ),
        None => {
            let n = old
                .data
                .iter()
                .zip(&new.data)
                .filter(|(a, b)| a != b)
                .count();
            format!("{n} bytes differ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulp_change_crosses_zero_and_treats_nan_by_class() {
        let a = Tensor::from_bits16(ElemType::Bf16, vec![3], &[0x0001, 0x3F80, 0x7FC0]);
        let b = Tensor::from_bits16(ElemType::Bf16, vec![3], &[0x8001, 0x3F82, 0x7FFF]);
        assert_eq!(max_ulp_change(&a, &b), Some(2));
        let c = Tensor::from_bits16(ElemType::Bf16, vec![3], &[0x0001, 0x3F80, 0x3F80]);
        assert_eq!(max_ulp_change(&a, &c), Some(u64::MAX));
        assert_eq!(describe_change(&a, &b), "max 2 ulp");
    }
}
