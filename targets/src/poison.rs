//! The poison pattern: what an output buffer holds before the implementation under test runs.
//!
//! Output tensors are pre-filled with a recognisable NaN payload per dtype (a signalling NaN,
//! so no arithmetic result ever produces it: IEEE operations return quiet NaNs). An element
//! that still holds the exact pattern afterwards was never written. The verdicts use
//! [`count_unwritten`] to fail outputs that a kernel did not (fully) write.
//!
//! | dtype | pattern (bits)          | meaning                                   |
//! |-------|-------------------------|-------------------------------------------|
//! | BF16  | `0x7FA5`                | signalling NaN, payload 0x25              |
//! | F16   | `0x7DA5`                | signalling NaN, payload 0x1A5             |
//! | F32   | `0x7FA5_A5A5`           | signalling NaN, payload 0x25A5A5          |
//! | F64   | `0x7FF4_A5A5_A5A5_A5A5` | signalling NaN, payload 0x4_A5A5_A5A5_A5A5 |
//! | U8    | `0xA5`                  | a valid value: evidence only              |
//! | I32   | `0xA5A5_A5A5`           | a valid value: evidence only              |
//! | I64   | `0xA5A5_A5A5_A5A5_A5A5` | a valid value: evidence only              |
//!
//! For float dtypes the pattern is definitive ([`is_definitive`]). Integer dtypes have no
//! spare encodings, so an element equal to the pattern there is only evidence (int8 `0xA5` is
//! -91, a value a kernel may write). The harness therefore has a second, [`Fill::Alternate`]
//! pattern for them (`0x5A` per byte: U8/I8 `0x5A`, I32 `0x5A5A_5A5A`, I64 `0x5A..5A`; float
//! dtypes keep their one definitive pattern): an integer element is *unwritten* only when it
//! held the primary pattern in one execution and the alternate one in an execution of the
//! same request whose outputs were filled with it (the runner's `poison_probe` and its
//! determinism repeat).
//!
//! This module is the one home of the patterns. The Python worker helper needs them too and
//! keeps a copy (`targets/python/conform_worker.py`, `POISON`, keyed by safetensors dtype
//! name); the test `python_helper_poison_table_matches` reads that table and fails when it
//! differs from [`pattern_bits`] for any dtype, or names a dtype this module does not.

use conform_reference::ops::{ElemType, Tensor, TensorError};

pub const BF16: u16 = 0x7FA5;
pub const F16: u16 = 0x7DA5;
pub const F32: u32 = 0x7FA5_A5A5;
pub const F64: u64 = 0x7FF4_A5A5_A5A5_A5A5;
pub const U8: u8 = 0xA5;
pub const I8: u8 = 0xA5;
pub const I32: u32 = 0xA5A5_A5A5;
pub const I64: u64 = 0xA5A5_A5A5_A5A5_A5A5;

/// The pattern of `dtype` as an integer (in the low `dtype.size_bytes()` bytes): the one
/// per-dtype mapping, used by the output fill here and by the verdicts' unwritten check.
pub fn pattern_bits(dtype: ElemType) -> u64 {
    match dtype {
        ElemType::Bf16 => u64::from(BF16),
        ElemType::F16 => u64::from(F16),
        ElemType::F32 => u64::from(F32),
        ElemType::F64 => F64,
        ElemType::U8 => u64::from(U8),
        ElemType::I8 => u64::from(I8),
        ElemType::I32 => u64::from(I32),
        ElemType::I64 => I64,
    }
}

/// The little-endian bytes of one poisoned element of `dtype`.
pub fn pattern_bytes(dtype: ElemType) -> Vec<u8> {
    Fill::Primary.bytes(dtype)
}

/// Which of the two poison patterns an execution's output buffers are filled with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fill {
    /// [`pattern_bits`]: what every execution gets unless the runner asks for the other.
    #[default]
    Primary,
    /// The second pattern ([`alternate_bits`]), for telling an integer element left unwritten
    /// from one written with the primary pattern's value.
    Alternate,
}

impl Fill {
    /// The pattern of `dtype` under this fill, as an integer in the low bytes.
    pub fn bits(self, dtype: ElemType) -> u64 {
        match self {
            Fill::Primary => pattern_bits(dtype),
            Fill::Alternate => alternate_bits(dtype),
        }
    }

    /// The little-endian bytes of one element of `dtype` under this fill.
    pub fn bytes(self, dtype: ElemType) -> Vec<u8> {
        self.bits(dtype).to_le_bytes()[..dtype.size_bytes()].to_vec()
    }

    /// The name the worker protocol gives this fill (the output file's `poison` metadata).
    pub fn name(self) -> &'static str {
        match self {
            Fill::Primary => "primary",
            Fill::Alternate => "alternate",
        }
    }
}

/// The alternate pattern of `dtype`: `0x5A` in every byte of an integer element (no byte equal
/// to the primary pattern's), the primary pattern itself for a float dtype, whose signalling
/// NaN is already definitive.
pub fn alternate_bits(dtype: ElemType) -> u64 {
    if is_definitive(dtype) {
        return pattern_bits(dtype);
    }
    let all = 0x5A5A_5A5A_5A5A_5A5Au64;
    match dtype.size_bytes() {
        8 => all,
        n => all & ((1u64 << (8 * n)) - 1),
    }
}

/// Whether an element equal to the pattern proves it was not written (true for float dtypes,
/// whose pattern is a signalling NaN no computation produces).
pub fn is_definitive(dtype: ElemType) -> bool {
    dtype.is_float()
}

/// A tensor of `dtype` and `shape` with every element poisoned.
pub fn poisoned(dtype: ElemType, shape: Vec<usize>) -> Result<Tensor, TensorError> {
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| TensorError::ShapeOverflow(shape.clone()))?;
    let pat = pattern_bytes(dtype);
    n.checked_mul(pat.len())
        .ok_or_else(|| TensorError::ShapeOverflow(shape.clone()))?;
    let data = pat.repeat(n);
    Tensor::new(dtype, shape, data)
}

/// Overwrites every element of `tensor` with the pattern.
pub fn poison_in_place(tensor: &mut Tensor) {
    let pat = pattern_bytes(tensor.dtype);
    for chunk in tensor.data.chunks_exact_mut(pat.len()) {
        chunk.copy_from_slice(&pat);
    }
}

/// For each element, whether it still holds the pattern.
pub fn unwritten_mask(tensor: &Tensor) -> Vec<bool> {
    let pat = pattern_bytes(tensor.dtype);
    tensor
        .data
        .chunks_exact(pat.len())
        .map(|c| c == pat.as_slice())
        .collect()
}

/// How many elements still hold the pattern (bit-exact comparison).
pub fn count_unwritten(tensor: &Tensor) -> usize {
    let pat = pattern_bytes(tensor.dtype);
    tensor
        .data
        .chunks_exact(pat.len())
        .filter(|c| *c == pat.as_slice())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use conform_reference::formats::{bf16, f16};

    const ALL: [ElemType; 8] = ElemType::ALL;

    #[test]
    fn float_patterns_are_signalling_nans() {
        assert!(f32::from_bits(F32).is_nan());
        assert_eq!(F32 & 0x0040_0000, 0, "f32 quiet bit must be clear");
        assert!(f64::from_bits(F64).is_nan());
        assert_eq!(F64 & 0x0008_0000_0000_0000, 0);
        assert!(bf16::bf16_to_f32(BF16).is_nan());
        assert_eq!(BF16 & 0x0040, 0);
        assert!(f16::f16_to_f32(F16).is_nan());
        assert_eq!(F16 & 0x0200, 0);
    }

    #[test]
    fn arithmetic_nans_are_not_the_pattern() {
        // A NaN produced by arithmetic is quiet, so it never equals the pattern.
        let zero = std::hint::black_box(0.0f32);
        let q = zero / zero;
        assert!(q.is_nan());
        let t = Tensor::from_f32(vec![2], &[q, f32::from_bits(F32) + 1.0]);
        assert_eq!(count_unwritten(&t), 0);
    }

    #[test]
    fn poisoned_tensors_count_fully_and_partially() {
        for dt in ALL {
            let mut t = poisoned(dt, vec![3, 5]).unwrap();
            assert_eq!(t.data.len(), 15 * dt.size_bytes());
            assert_eq!(count_unwritten(&t), 15, "{dt:?}");
            let w = dt.size_bytes();
            // Write elements 0 and 7 with zeros.
            t.data[..w].fill(0);
            t.data[7 * w..8 * w].fill(0);
            assert_eq!(count_unwritten(&t), 13, "{dt:?}");
            let mask = unwritten_mask(&t);
            assert!(!mask[0] && !mask[7] && mask[1] && mask[14]);
            poison_in_place(&mut t);
            assert_eq!(count_unwritten(&t), 15);
            assert_eq!(is_definitive(dt), dt.is_float());
        }
    }

    #[test]
    fn the_alternate_pattern_differs_for_integers_and_keeps_the_float_nans() {
        for dt in ALL {
            let (a, b) = (Fill::Primary.bits(dt), Fill::Alternate.bits(dt));
            if is_definitive(dt) {
                assert_eq!(a, b, "{dt:?}");
            } else {
                // Every byte differs, so no element of any width holds both patterns.
                let (ab, bb) = (Fill::Primary.bytes(dt), Fill::Alternate.bytes(dt));
                assert_eq!(bb.len(), dt.size_bytes(), "{dt:?}");
                assert!(ab.iter().zip(&bb).all(|(x, y)| x != y), "{dt:?}");
            }
        }
        assert_eq!(alternate_bits(ElemType::I8), 0x5A);
        assert_eq!(alternate_bits(ElemType::I32), 0x5A5A_5A5A);
        assert_eq!(Fill::default(), Fill::Primary);
    }

    #[test]
    fn overflowing_shape_is_an_error() {
        assert!(poisoned(ElemType::F32, vec![usize::MAX, 2]).is_err());
        assert!(poisoned(ElemType::F64, vec![usize::MAX / 4]).is_err());
    }

    /// The `POISON` table of the Python worker helper, as (safetensors dtype name, bits in hex).
    fn python_poison_table() -> Vec<(String, String)> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/python/conform_worker.py");
        let text = std::fs::read_to_string(path).unwrap();
        let body = text
            .split_once("\nPOISON = {\n")
            .and_then(|(_, rest)| rest.split_once("\n}"))
            .map(|(body, _)| body)
            .expect("conform_worker.py defines `POISON = {` ... `}` at top level");
        body.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| {
                let (key, value) = l
                    .trim_end_matches(',')
                    .split_once(':')
                    .unwrap_or_else(|| panic!("POISON entry `{l}` is not `\"NAME\": 0x...`"));
                let hex = value.trim().trim_start_matches("0x").replace('_', "");
                let bits = u64::from_str_radix(&hex, 16)
                    .unwrap_or_else(|e| panic!("POISON entry `{l}`: {e}"));
                (
                    key.trim().trim_matches('"').to_string(),
                    format!("{bits:#x}"),
                )
            })
            .collect()
    }

    #[test]
    fn python_helper_poison_table_matches() {
        let python = python_poison_table();
        let rust: Vec<(String, String)> = ALL
            .iter()
            .map(|&dt| (dt.name().to_string(), format!("{:#x}", pattern_bits(dt))))
            .collect();
        let mut sorted_python = python.clone();
        sorted_python.sort();
        let mut sorted_rust = rust;
        sorted_rust.sort();
        assert_eq!(
            sorted_python, sorted_rust,
            "targets/python/conform_worker.py POISON must equal targets/src/poison.rs"
        );
    }

    #[test]
    fn pattern_bytes_are_the_bits_little_endian() {
        for dt in ALL {
            let bytes = pattern_bytes(dt);
            assert_eq!(bytes.len(), dt.size_bytes(), "{dt:?}");
            let mut wide = [0u8; 8];
            wide[..bytes.len()].copy_from_slice(&bytes);
            assert_eq!(u64::from_le_bytes(wide), pattern_bits(dt), "{dt:?}");
        }
        assert_eq!(pattern_bytes(ElemType::Bf16), vec![0xA5, 0x7F]);
    }
}
