//! The two-fill test of integer outputs: which elements a target never wrote.
//!
//! A float output's poison pattern is a signalling NaN no computation produces, so an element
//! holding it was never written. An integer dtype has no such value: int8's pattern `0xA5` is
//! -91, which a kernel may write. So an integer element holding the primary pattern where the
//! expected value differs is only a suspect; the runner then executes the same request once
//! more with the outputs filled with the alternate pattern (`conform_targets::poison::Fill`),
//! and the element is unwritten only when it held the primary pattern in the first execution
//! and the alternate one in the second. A suspect that kept its value was written: it is
//! judged as the value it holds, and the verdict says what was expected there.

use super::index::format_index;
use conform_reference::ops::{ElemType, Tensor, TensorMap, TensorSpec};
use conform_targets::poison::{self, Fill};

/// Whether `actual`, an output of `spec`, holds the primary pattern somewhere the expected
/// value differs, in an integer dtype: only a second execution under the alternate fill tells
/// whether it was written there.
pub fn has_suspects(spec: &TensorSpec, actual: &Tensor, expected: &Tensor) -> bool {
    let Some(w) = comparable_width(spec, actual, expected) else {
        return false;
    };
    let p = Fill::Primary.bytes(spec.dtype);
    actual
        .data
        .chunks_exact(w)
        .zip(expected.data.chunks_exact(w))
        .any(|(a, e)| a == p.as_slice() && e != p.as_slice())
}

/// Whether any output of `outputs` has suspects ([`has_suspects`]).
pub fn any_suspects(specs: &[TensorSpec], expected: &TensorMap, outputs: &TensorMap) -> bool {
    specs
        .iter()
        .any(|s| match (outputs.get(&s.name), expected.get(&s.name)) {
            (Some(a), Some(e)) => has_suspects(s, a, e),
            _ => false,
        })
}

/// The unwritten elements of an integer output: those holding the primary pattern in `first`
/// and the alternate one in `second` (the same request under [`Fill::Alternate`]). `None` for a
/// float output, or when the tensors are not both `spec`'s dtype and size (the verdict then
/// reports the form fault).
pub fn unwritten_mask(spec: &TensorSpec, first: &Tensor, second: &Tensor) -> Option<Vec<bool>> {
    let w = comparable_width(spec, first, second)?;
    let (p, q) = (
        Fill::Primary.bytes(spec.dtype),
        Fill::Alternate.bytes(spec.dtype),
    );
    Some(
        first
            .data
            .chunks_exact(w)
            .zip(second.data.chunks_exact(w))
            .map(|(a, b)| a == p.as_slice() && b == q.as_slice())
            .collect(),
    )
}

/// The reason to add to a failed integer output whose elements hold the primary pattern's
/// value but were written (not in `unwritten`), where another value is expected: how many, and
/// the first one's expected and actual values and position. `None` when there is none.
pub fn written_poison_reason(
    spec: &TensorSpec,
    actual: &Tensor,
    expected: &Tensor,
    unwritten: &[bool],
) -> Option<String> {
    let w = comparable_width(spec, actual, expected)?;
    let p = Fill::Primary.bytes(spec.dtype);
    let mut wrong = actual
        .data
        .chunks_exact(w)
        .zip(expected.data.chunks_exact(w))
        .enumerate()
        .filter(|&(i, (a, e))| a == p.as_slice() && e != p.as_slice() && !unwritten[i]);
    let (first, (a, e)) = wrong.next()?;
    let n = 1 + wrong.count();
    Some(format!(
        "{n} element(s) written with {} (the value of the poison pattern, kept under the alternate fill) where another value is expected: expected {}, got {} at {}",
        int_text(spec.dtype, a),
        int_text(spec.dtype, e),
        int_text(spec.dtype, a),
        format_index(first, &spec.shape, &spec.axes)
    ))
}

/// The element width when `a` and `b` are both `spec`'s integer dtype and hold exactly its
/// elements.
fn comparable_width(spec: &TensorSpec, a: &Tensor, b: &Tensor) -> Option<usize> {
    let w = spec.dtype.size_bytes();
    let bytes = spec.shape.iter().try_fold(w, |n, &d| n.checked_mul(d))?;
    (!poison::is_definitive(spec.dtype)
        && a.dtype == spec.dtype
        && b.dtype == spec.dtype
        && a.data.len() == bytes
        && b.data.len() == bytes)
        .then_some(w)
}

/// An integer element's value, from its little-endian bytes.
fn int_text(dtype: ElemType, b: &[u8]) -> String {
    match dtype {
        ElemType::I8 => (b[0] as i8).to_string(),
        ElemType::U8 => b[0].to_string(),
        ElemType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]).to_string(),
        ElemType::I64 => i64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])).to_string(),
        _ => b.iter().rev().map(|x| format!("{x:02x}")).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(n: usize) -> TensorSpec {
        TensorSpec::new("y", ElemType::I8, vec![n], &["i"])
    }

    #[test]
    fn an_element_is_unwritten_only_under_both_fills() {
        // -91 is the primary pattern, 90 the alternate one.
        let first = Tensor::from_i8(vec![4], &[-91, -91, 3, 90]);
        let second = Tensor::from_i8(vec![4], &[90, -91, 3, 90]);
        let mask = unwritten_mask(&spec(4), &first, &second).unwrap();
        assert_eq!(mask, vec![true, false, false, false]);
        let expected = Tensor::from_i8(vec![4], &[5, 7, 3, 90]);
        assert!(has_suspects(&spec(4), &first, &expected));
        assert!(!has_suspects(&spec(4), &first, &first));
        let why = written_poison_reason(&spec(4), &first, &expected, &mask).unwrap();
        assert!(why.starts_with("1 element(s) written with -91"), "{why}");
        assert!(why.ends_with("expected 7, got -91 at i=1"), "{why}");
    }

    #[test]
    fn float_outputs_and_malformed_tensors_are_left_to_the_poison_test() {
        let f = TensorSpec::new("y", ElemType::F32, vec![1], &["i"]);
        let t = Tensor::from_f32(vec![1], &[1.0]);
        assert_eq!(unwritten_mask(&f, &t, &t), None);
        assert!(!has_suspects(&f, &t, &t));
        let short = Tensor::from_i8(vec![2], &[-91, -91]);
        assert_eq!(unwritten_mask(&spec(4), &short, &short), None);
    }
}
