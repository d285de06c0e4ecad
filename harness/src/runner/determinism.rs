//! The determinism check: a trial gives the target input set 0 once more, and every output
//! of the repeat must have the same bits as the first call's (NaN payloads included). A
//! target that declares itself nondeterministic in its `target.toml` is not held to it (the
//! result records its reason). Nondeterminism that is one ULP off now and then (atomics,
//! split-K races, a reduction order that depends on scheduling) slips through any tolerance;
//! identical inputs are the one place it shows for certain.

use conform_reference::ops::TensorMap;

/// How the repeat's outputs differ from the first call's, or `None` when every output has the
/// same dtype, shape and bytes.
pub(crate) fn repeat_differs(first: &TensorMap, again: &TensorMap) -> Option<String> {
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
        let mut differ = 0usize;
        let mut first_at = None;
        for (i, (x, y)) in a.data.chunks(w).zip(b.data.chunks(w)).enumerate() {
            if x != y {
                differ += 1;
                first_at.get_or_insert((i, x, y));
            }
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
    (!found.is_empty()).then(|| {
        format!(
            "not deterministic: input set 0 given again gave other bits: {}; a target whose \
             kernel is meant to be nondeterministic says why in its target.toml \
             (`nondeterministic = \"...\"`)",
            found.join("; ")
        )
    })
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
}
