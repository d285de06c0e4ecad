//! Every check policy against hand-computed examples, and the rules that hold for all of them:
//! NaN/Inf never pass by accident, unwritten (poisoned) elements fail, wrong shape/dtype fail.

mod cann;
mod diagnostics;
mod elementwise;
mod rules_for_all;
mod subnormal;

use conform_harness::results::OutputMetrics;
use conform_harness::verdict::{
    evaluate, policies, CannLevel, CheckPolicy, Comparison, PolicyError, VerdictError,
};
use conform_reference::formats::Rounding;
use conform_reference::ops::{ElemType, Tensor, TensorSpec};
use conform_reference::parallel::Threads;

const BF16_POISON: u64 = 0x7FA5;
const F32_POISON: u64 = 0x7FA5_A5A5;

fn spec(dtype: ElemType, shape: &[usize], axes: &[&str]) -> TensorSpec {
    TensorSpec::new("out", dtype, shape.to_vec(), axes)
}

/// bf16 bits of a value that must be exactly representable.
fn bf16_exact(x: f32) -> u16 {
    let b = x.to_bits();
    assert_eq!(b & 0xFFFF, 0, "{x} is not a bf16 value");
    (b >> 16) as u16
}

fn bf16(shape: &[usize], values: &[f32]) -> Tensor {
    let bits: Vec<u16> = values.iter().map(|&v| bf16_exact(v)).collect();
    Tensor::from_bits16(ElemType::Bf16, shape.to_vec(), &bits)
}

fn bf16_bits(shape: &[usize], bits: &[u16]) -> Tensor {
    Tensor::from_bits16(ElemType::Bf16, shape.to_vec(), bits)
}

fn run(policy: &CheckPolicy, cmp: &Comparison<'_>) -> OutputMetrics {
    evaluate(policy, cmp, Threads::ONE).expect("the harness side is well formed")
}

fn bitwise() -> CheckPolicy {
    CheckPolicy::from(policies::Bitwise { nan_bits: false })
}
