//! How far two versions of a tensor are apart, for drift messages and bless reviews.

use conform_reference::ops::Tensor;

pub use crate::verdict::lane::max_ulp_between as max_ulp_change;

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
    use conform_reference::ops::ElemType;

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
