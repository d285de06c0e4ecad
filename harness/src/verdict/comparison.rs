//! What a verdict compares: the target's output and the harness's expectations for it.

use conform_reference::ops::{ElemType, Tensor, TensorSpec};

/// One output tensor to judge.
///
/// - `actual`: what the target wrote.
/// - `expected`: the reference's output in the output dtype (e.g. from golden data); always
///   required (ULP distances, bitwise equality and the unwritten check read it).
/// - `oracle`: the exact, unrounded result as F64 (or already in the output dtype); the
///   high-precision golden of `cann_*` and `error_ratio`.
/// - `baseline`: a same-precision reference recipe's output (the "third-party chip" of CANN's
///   double benchmark, the same-precision PyTorch run of FlashAttention's tests).
/// - `spec`: name, dtype, shape and axis names the output must have.
/// - `poison`: the bit patterns (for `spec.dtype`, in the low bits) the harness pre-filled the
///   output with; an element still holding one is "unwritten".
/// - `unwritten`: when given, which elements are unwritten, decided outside the comparison (an
///   integer output whose element held the poison pattern under two different fills); it
///   replaces the `poison` test for this output.
#[derive(Clone, Copy, Debug)]
pub struct Comparison<'a> {
    pub spec: &'a TensorSpec,
    pub actual: &'a Tensor,
    pub expected: &'a Tensor,
    pub oracle: Option<&'a Tensor>,
    pub baseline: Option<&'a Tensor>,
    pub poison: &'a [u64],
    pub unwritten: Option<&'a [bool]>,
}

impl<'a> Comparison<'a> {
    /// A comparison with no oracle, no baseline and no poison.
    pub fn new(spec: &'a TensorSpec, actual: &'a Tensor, expected: &'a Tensor) -> Comparison<'a> {
        Comparison {
            spec,
            actual,
            expected,
            oracle: None,
            baseline: None,
            poison: &[],
            unwritten: None,
        }
    }

    pub fn with_oracle(mut self, oracle: &'a Tensor) -> Comparison<'a> {
        self.oracle = Some(oracle);
        self
    }

    pub fn with_baseline(mut self, baseline: &'a Tensor) -> Comparison<'a> {
        self.baseline = Some(baseline);
        self
    }

    pub fn with_poison(mut self, poison: &'a [u64]) -> Comparison<'a> {
        self.poison = poison;
        self
    }

    /// The elements known unwritten (one flag per element, in flat order), in place of the
    /// poison test.
    pub fn with_unwritten(mut self, unwritten: &'a [bool]) -> Comparison<'a> {
        self.unwritten = Some(unwritten);
        self
    }
}

/// Whether `t` holds exactly `dtype` x `shape` worth of bytes.
pub(crate) fn byte_length_ok(t: &Tensor) -> bool {
    t.shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .and_then(|n| n.checked_mul(t.dtype.size_bytes()))
        == Some(t.data.len())
}

/// Bits a poison pattern may occupy for `dtype`.
pub(crate) fn fits(dtype: ElemType, pattern: u64) -> bool {
    let bits = dtype.size_bytes() * 8;
    bits >= 64 || pattern >> bits == 0
}
