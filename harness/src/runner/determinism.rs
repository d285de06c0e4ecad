//! The determinism check: a trial gives the target input set 0 once more, and every output
//! of the repeat must have the same bits as the first call's (NaN payloads included). A
//! target that declares itself nondeterministic in its `target.toml` is not held to it (the
//! result records its reason). Nondeterminism that is one ULP off now and then (atomics,
//! split-K races, a reduction order that depends on scheduling) slips through any tolerance;
//! identical inputs are the one place it shows for certain.
//!
//! The repeat's outputs are filled with the alternate poison pattern (`Fill::Alternate`): an
//! integer element that held the primary pattern on the first call and the alternate one on
//! the repeat was never written. The first call's verdict cannot see it where the expected
//! value is the primary pattern's own (int8 -91), so the repeat reports it as unwritten, not
//! as nondeterminism. Float outputs keep their one (signalling NaN) pattern.

use conform_reference::ops::TensorMap;
use conform_targets::poison::{self, Fill};

/// What the repeat found: integer elements unwritten on both calls (one message per output),
/// then how the outputs differ otherwise; empty when every output has the same dtype, shape
/// and bytes apart from the poison fill.
pub(crate) fn repeat_findings(first: &TensorMap, again: &TensorMap) -> Vec<String> {
    let mut unwritten = Vec::new();
    let mut found = Vec::new();
    for (name, a) in first {
        let Some(b) = again.get(name) else {
            found.push(format!("`{name}` missing from the repeat"));
            continue;
        };
        if a.dtype != b.dtype || a.shape != b.shape {
            found.push(format!(
                "`{name}` came back as {:?} {:?}, first as {:?} {:?}",
                b.dtype, b.shape, a.dtype, a.shape
            ));
            continue;
        }
        let w = a.dtype.size_bytes().max(1);
        let (p, q) = (Fill::Primary.bytes(a.dtype), Fill::Alternate.bytes(a.dtype));
        let two_fills = !poison::is_definitive(a.dtype);
        let mut differ = 0usize;
        let mut first_at = None;
        let mut held_both = 0usize;
        for (i, (x, y)) in a.data.chunks(w).zip(b.data.chunks(w)).enumerate() {
            if two_fills && x == p.as_slice() && y == q.as_slice() {
                held_both += 1;
            } else if x != y {
                differ += 1;
                first_at.get_or_insert((i, x, y));
            }
        }
        if held_both > 0 {
            unwritten.push(format!(
                "unwritten: `{name}`: {held_both} of {} elements held the poison pattern on \
                 both calls (0x{} on the first, the alternate 0x{} on the repeat of input set 0)",
                a.data.len() / w,
                hex_le(&p),
                hex_le(&q)
            ));
        }
        if let Some((i, x, y)) = first_at {
            found.push(format!(
                "`{name}`: {differ} of {} elements differ, first at flat index {i} \
                 (0x{} then 0x{})",
                a.data.len() / w,
                hex_le(x),
                hex_le(y)
            ));
        }
    }
    if !found.is_empty() {
        unwritten.push(format!(
            "not deterministic: input set 0 given again gave other bits: {}; a target whose \
             kernel is meant to be nondeterministic says why in its target.toml \
             (`nondeterministic = \"...\"`)",
            found.join("; ")
        ));
    }
    unwritten
}

/// The nondeterminism message alone (tests).
#[cfg(test)]
fn repeat_differs(first: &TensorMap, again: &TensorMap) -> Option<String> {
    repeat_findings(first, again)
        .into_iter()
        .find(|m| m.starts_with("not deterministic"))
}

/// An element's little-endian bytes as one hexadecimal number.
fn hex_le(bytes: &[u8]) -> String {
    bytes.iter().rev().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use conform_reference::ops::{ElemType, Tensor};

    fn map(data: Vec<u8>) -> TensorMap {
        [(
            "out".to_string(),
            Tensor {
                dtype: ElemType::Bf16,
                shape: vec![3],
                data,
            },
        )]
        .into_iter()
        .collect()
    }

    #[test]
    fn identical_bits_pass_and_one_flipped_bit_is_named() {
        let a = map(vec![0x80, 0x3f, 0xc0, 0x7f, 0, 0]);
        assert_eq!(repeat_differs(&a, &a.clone()), None);
        let b = map(vec![0x80, 0x3f, 0xc0, 0x7f, 1, 0]);
        let m = repeat_differs(&a, &b).unwrap();
        assert!(
            m.contains("`out`: 1 of 3 elements differ, first at flat index 2 (0x0000 then 0x0001)"),
            "{m}"
        );
        // Another NaN payload is other bits too.
        let c = map(vec![0x80, 0x3f, 0xc1, 0x7f, 0, 0]);
        assert!(repeat_differs(&a, &c).unwrap().contains("flat index 1"));
        assert!(repeat_differs(&a, &TensorMap::new())
            .unwrap()
            .contains("`out` missing"));
    }

    #[test]
    fn an_integer_element_holding_both_fills_is_unwritten_not_nondeterministic() {
        let int8 = |v: &[i8]| -> TensorMap {
            [("y".to_string(), Tensor::from_i8(vec![v.len()], v))]
                .into_iter()
                .collect()
        };
        // -91 (0xA5) is the primary pattern, 90 (0x5A) the alternate one.
        let first = int8(&[-91, -91, 4]);
        let found = repeat_findings(&first, &int8(&[90, -91, 4]));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("unwritten: `y`: 1 of 3 elements held the poison pattern"),
            "{}",
            found[0]
        );
        // A written -91 repeated is deterministic; another value on the repeat is not.
        assert!(repeat_findings(&first, &first.clone()).is_empty());
        let found = repeat_findings(&first, &int8(&[90, -91, 5]));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[1].contains("1 of 3 elements differ, first at flat index 2"));
    }
}
