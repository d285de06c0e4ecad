//! The typed error of FP4 dequantisation and W4A16: every variant names the offending
//! parameter, so a harness can report exactly which input is malformed.

/// A malformed input to packing, dequantisation or W4A16. Never a panic.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DequantError {
    /// A buffer has the wrong number of elements for the stated shape.
    #[error("`{param}` has length {actual}, expected {expected}")]
    WrongLength {
        param: &'static str,
        expected: usize,
        actual: usize,
    },
    /// A dimension is not a multiple of the group size (or of a layout's tile).
    #[error("`{param}` = {value} is not a multiple of the {what} {multiple_of}")]
    NotMultiple {
        param: &'static str,
        value: usize,
        multiple_of: usize,
        what: &'static str,
    },
    /// A product of dimensions does not fit in `usize`.
    #[error("`{param}`: the shape's element count overflows usize")]
    SizeOverflow { param: &'static str },
    /// A recipe field has a value that cannot be used.
    #[error("recipe field `{field}`: {reason}")]
    InvalidRecipe {
        field: &'static str,
        reason: &'static str,
    },
    /// A packing layout's permutation is not a permutation of its tile.
    #[error("layout `{param}`: {reason}")]
    InvalidLayout { param: &'static str, reason: String },
    /// A code does not fit in four bits where one nibble per byte is expected.
    #[error("`{param}`[{index}] = {value:#04x} is not a 4-bit code")]
    CodeOutOfRange {
        param: &'static str,
        index: usize,
        value: u8,
    },
}

/// `a * b` or a `SizeOverflow` naming `param`.
pub(crate) fn checked_mul(a: usize, b: usize, param: &'static str) -> Result<usize, DequantError> {
    a.checked_mul(b).ok_or(DequantError::SizeOverflow { param })
}

/// Checks `actual == expected` for the buffer `param`.
pub(crate) fn expect_len(
    param: &'static str,
    expected: usize,
    actual: usize,
) -> Result<(), DequantError> {
    if expected == actual {
        Ok(())
    } else {
        Err(DequantError::WrongLength {
            param,
            expected,
            actual,
        })
    }
}
