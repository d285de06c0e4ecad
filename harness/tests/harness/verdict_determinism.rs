//! The figures of a verdict do not depend on the thread count, and survive a JSON round trip
//! (including NaN/Inf worst elements).

use conform_harness::results::OutputMetrics;
use conform_harness::verdict::{evaluate, policies, CannLevel, CheckPolicy, Comparison, CHUNK};
use conform_reference::ops::{ElemType, Tensor, TensorSpec};
use conform_reference::parallel::Threads;

/// A fixed-sequence generator so the data are the same everywhere.
use conform_reference::splitmix::SplitMix64 as SplitMix;

fn json(m: &OutputMetrics) -> String {
    serde_json::to_string(m).unwrap()
}

#[test]
fn figures_are_identical_for_1_2_3_and_7_threads() {
    // 3 chunks and a ragged tail; axes with s and n so the heatmap is built too.
    let shape = [1usize, 131, 48, 128 + 1];
    let n: usize = shape.iter().product();
    assert!(n > 3 * CHUNK);
    let mut rng = SplitMix::new(7);
    let mut oracle = Vec::with_capacity(n);
    let mut exp = Vec::with_capacity(n);
    let mut act = Vec::with_capacity(n);
    let mut base = Vec::with_capacity(n);
    for i in 0..n {
        let r = rng.next_u64();
        // Values spread over many binades, some small.
        let mag = ((r >> 11) as f64 / (1u64 << 53) as f64) * 2f64.powi((r % 24) as i32 - 16);
        let v = if r & 1 == 1 { -mag } else { mag };
        oracle.push(v);
        let e = ((v as f32).to_bits() >> 16) as u16; // truncation: a biased but fixed expectation
        exp.push(e);
        base.push(e ^ ((r >> 7) & 1) as u16);
        let mut a = e ^ ((r >> 3) & 3) as u16;
        if i % 100_003 == 5 {
            a = 0x7FC0;
        }
        if i % 250_007 == 9 {
            a = 0x7FA5;
        }
        act.push(a);
    }
    let spec = TensorSpec::new("out", ElemType::Bf16, shape.to_vec(), &["b", "s", "n", "d"]);
    let a = Tensor::from_bits16(ElemType::Bf16, shape.to_vec(), &act);
    let e = Tensor::from_bits16(ElemType::Bf16, shape.to_vec(), &exp);
    let b = Tensor::from_bits16(ElemType::Bf16, shape.to_vec(), &base);
    let o = Tensor::of_f64(shape.to_vec(), &oracle);
    let poison = [0x7FA5u64];
    let cmp = Comparison::new(&spec, &a, &e)
        .with_oracle(&o)
        .with_baseline(&b)
        .with_poison(&poison);
    for policy in [
        CheckPolicy::from(policies::Ulp { max: 1 }),
        CheckPolicy::from(policies::Allclose {
            atol: 1e-3,
            rtol: 1e-3,
            min_matched_ratio: 0.9,
        }),
        CheckPolicy::from(policies::CannSingle {}),
        CheckPolicy::from(policies::CannMixed {}),
        CheckPolicy::from(policies::CannDouble {
            level: CannLevel::L1,
        }),
        CheckPolicy::from(policies::ErrorRatio {
            max_ratio: 2.0,
            mean_ratio: 1.5,
            atol: 0.0,
        }),
    ] {
        let one = evaluate(&policy, &cmp, Threads(1)).unwrap();
        assert!(one.unwritten > 0 && one.non_finite > 0);
        assert!(one.heatmap.is_some());
        assert_eq!(one.worst.len(), 10);
        for t in [2, 3, 7] {
            let many = evaluate(&policy, &cmp, Threads(t)).unwrap();
            assert_eq!(json(&one), json(&many), "{} with {t} threads", one.policy);
        }
        // The figures read back (serde_json without `float_roundtrip` may move a float by an
        // ULP when parsing, so counts and non-finite markers are compared exactly, floats
        // closely).
        let back: OutputMetrics = serde_json::from_str(&json(&one)).unwrap();
        assert_eq!(
            (
                back.mismatches,
                back.unwritten,
                back.non_finite,
                back.max_ulp
            ),
            (one.mismatches, one.unwritten, one.non_finite, one.max_ulp)
        );
        approx::assert_abs_diff_eq!(
            back.max_rel_err,
            one.max_rel_err,
            epsilon = 1e-15 * one.max_rel_err
        );
        for (w, v) in back.worst.iter().zip(&one.worst) {
            assert_eq!(w.index, v.index);
            assert_eq!(w.actual.is_nan(), v.actual.is_nan());
        }
    }
}
