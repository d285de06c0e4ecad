//! Every check policy against hand-computed examples, and the rules that hold for all of them:
//! NaN/Inf never pass by accident, unwritten (poisoned) elements fail, wrong shape/dtype fail.

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

#[test]
fn bitwise_passes_identical_bits_and_fails_one_flipped_bit() {
    let s = spec(ElemType::Bf16, &[4], &["d"]);
    let e = bf16(&[4], &[1.0, -2.0, 0.5, 3.0]);
    let m = run(&bitwise(), &Comparison::new(&s, &e, &e));
    assert!(m.passed, "{}", m.reason);
    assert_eq!((m.mismatches, m.max_ulp, m.max_abs_err), (0, Some(0), 0.0));
    assert_eq!(m.policy, "bitwise");

    let a = bf16_bits(&[4], &[0x3F80, 0xC000, 0x3F01, 0x4040]);
    let m = run(&bitwise(), &Comparison::new(&s, &a, &e));
    assert!(!m.passed);
    assert_eq!(m.mismatches, 1);
    assert_eq!(m.mismatch_ratio, 0.25);
    assert_eq!(m.max_ulp, Some(1));
    assert!(m.reason.contains("differ bitwise"), "{}", m.reason);
    assert_eq!(m.worst[0].index, "d=2");
}

#[test]
fn a_bitwise_mismatch_of_nan_against_inf_is_named_not_reported_as_max_ulp_0() {
    let s = spec(ElemType::Bf16, &[3], &["d"]);
    let e = bf16_bits(&[3], &[0x3F80, 0x7F80, 0x7FC0]); // 1, +Inf, NaN
    let a = bf16_bits(&[3], &[0x3F80, 0x7FC0, 0x7FC0]); // the Inf came back as NaN
    let m = run(&bitwise(), &Comparison::new(&s, &a, &e));
    assert!(!m.passed);
    assert!(m.reason.contains("1 NaN against a number"), "{}", m.reason);
    assert!(!m.reason.contains("max ULP 0"), "{}", m.reason);
    // Two NaNs with different payloads, where the policy pins NaN bits: named as such.
    let a = bf16_bits(&[3], &[0x3F80, 0x7F80, 0x7FC1]);
    let pinned = CheckPolicy::from(policies::Bitwise { nan_bits: true });
    let m = run(&pinned, &Comparison::new(&s, &a, &e));
    assert!(!m.passed);
    assert!(m.reason.contains("NaN encodings"), "{}", m.reason);
}

#[test]
fn bitwise_matches_nan_by_class_unless_nan_bits_pins_the_encoding() {
    let s = spec(ElemType::Bf16, &[2], &["d"]);
    let e = bf16_bits(&[2], &[0x7FC0, 0x3F80]);
    let a = bf16_bits(&[2], &[0x7FFF, 0x3F80]);
    let m = run(&bitwise(), &Comparison::new(&s, &a, &e));
    assert!(m.passed, "{}", m.reason);
    let m = run(
        &CheckPolicy::from(policies::Bitwise { nan_bits: true }),
        &Comparison::new(&s, &a, &e),
    );
    assert!(!m.passed);
    assert_eq!(m.mismatches, 1);
    assert_eq!(m.policy, "bitwise(nan_bits)");
}

#[test]
fn bitwise_tells_negative_zero_from_zero_but_ulp_does_not() {
    let s = spec(ElemType::Bf16, &[1], &["d"]);
    let e = bf16_bits(&[1], &[0x0000]);
    let a = bf16_bits(&[1], &[0x8000]);
    assert!(!run(&bitwise(), &Comparison::new(&s, &a, &e)).passed);
    let m = run(
        &CheckPolicy::from(policies::Ulp { max: 0 }),
        &Comparison::new(&s, &a, &e),
    );
    assert!(m.passed, "{}", m.reason);
}

#[test]
fn ulp_distance_is_measured_in_the_output_dtype_with_a_histogram() {
    let s = spec(ElemType::Bf16, &[4], &["d"]);
    let e = bf16_bits(&[4], &[0x3F80; 4]);
    // 0, 1, 3 ULP above and 4 ULP below 1.0 (crossing the binade boundary at 1.0).
    let a = bf16_bits(&[4], &[0x3F80, 0x3F81, 0x3F83, 0x3F7C]);
    let m = run(
        &CheckPolicy::from(policies::Ulp { max: 3 }),
        &Comparison::new(&s, &a, &e),
    );
    assert!(!m.passed);
    assert_eq!(m.max_ulp, Some(4));
    assert_eq!(m.mismatches, 1);
    let hist: Vec<(&str, u64)> = m
        .ulp_histogram
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(hist, vec![("0", 1), ("1", 1), ("2-3", 1), ("4-7", 1)]);
    // Worst by absolute error: 3 ULP above 1.0 (3 x 2^-7) outweighs 4 ULP below (4 x 2^-8).
    assert_eq!(m.worst[0].index, "d=2");
    assert_eq!(m.worst[0].ulp, Some(3));
    assert_eq!(m.worst[1].index, "d=3");
    assert_eq!(m.worst[1].ulp, Some(4));
    let m = run(
        &CheckPolicy::from(policies::Ulp { max: 4 }),
        &Comparison::new(&s, &a, &e),
    );
    assert!(m.passed, "{}", m.reason);
    assert_eq!(m.policy, "ulp(max=4)");
}

#[test]
fn ulp_passes_nan_against_nan_by_class_and_fails_nan_against_a_number() {
    let s = spec(ElemType::F32, &[2], &["d"]);
    let e = Tensor::from_f32(vec![2], &[f32::NAN, f32::NAN]);
    let a = Tensor::from_f32(vec![2], &[f32::from_bits(0xFFC0_0001), 1.0]);
    let m = run(
        &CheckPolicy::from(policies::Ulp { max: 1000 }),
        &Comparison::new(&s, &a, &e),
    );
    assert!(!m.passed);
    assert_eq!(m.mismatches, 1);
    assert!(m.ulp_histogram.contains(&("nan_vs_number".to_string(), 1)));
}

#[test]
fn allclose_fails_an_element_only_when_abs_and_rel_both_exceed() {
    let s = spec(ElemType::F32, &[4], &["d"]);
    let e = Tensor::from_f32(vec![4], &[100.0, 0.001, 1.0, 1.0]);
    // 0: |d| = 0.5 > atol but rel 0.005 <= rtol -> passes
    // 1: rel 0.5 > rtol but |d| = 0.0005 <= atol -> passes
    // 2: exact
    // 3: |d| = 0.5 > atol and rel 0.5 > rtol -> fails
    let a = Tensor::from_f32(vec![4], &[100.5, 0.0015, 1.0, 1.5]);
    let strict = CheckPolicy::from(policies::Allclose {
        atol: 0.1,
        rtol: 0.01,
        min_matched_ratio: 1.0,
    });
    let m = run(&strict, &Comparison::new(&s, &a, &e));
    assert!(!m.passed);
    assert_eq!(m.mismatches, 1);
    assert_eq!(m.extra["matched_ratio"], 0.75);
    assert_eq!(m.worst[0].index, "d=0"); // largest abs error first (0.5 at index 0 and 3: tie -> lower index)
    assert_eq!(m.worst[1].index, "d=3");
    let lenient = CheckPolicy::from(policies::Allclose {
        atol: 0.1,
        rtol: 0.01,
        min_matched_ratio: 0.75,
    });
    assert!(run(&lenient, &Comparison::new(&s, &a, &e)).passed);
}

/// One policy of each kind, with extreme tolerances where the policy has any.
fn every_policy_lenient() -> Vec<CheckPolicy> {
    vec![
        bitwise(),
        CheckPolicy::from(policies::Ulp { max: u64::MAX }),
        CheckPolicy::from(policies::Allclose {
            atol: 1e30,
            rtol: 1e30,
            min_matched_ratio: 0.0,
        }),
        CheckPolicy::from(policies::CannSingle {}),
        CheckPolicy::from(policies::CannMixed {}),
        CheckPolicy::from(policies::CannDouble {
            level: CannLevel::L0,
        }),
        CheckPolicy::from(policies::ErrorRatio {
            max_ratio: 1e30,
            mean_ratio: 1e30,
            atol: 1e30,
        }),
    ]
}

#[test]
fn nan_or_inf_where_finite_is_expected_fails_every_policy_whatever_the_tolerance() {
    let n = 400;
    let s = spec(ElemType::Bf16, &[n], &["d"]);
    let values: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
    let e = bf16(&[n], &values);
    let oracle = Tensor::of_f64(
        vec![n],
        &values.iter().map(|&v| v as f64).collect::<Vec<_>>(),
    );
    for bad in [0x7FC0u16, 0xFFFF, 0x7F80, 0xFF80] {
        let mut bits = e.bits16().unwrap();
        bits[17] = bad;
        let a = bf16_bits(&[n], &bits);
        for p in every_policy_lenient() {
            let cmp = Comparison::new(&s, &a, &e)
                .with_oracle(&oracle)
                .with_baseline(&e);
            let m = run(&p, &cmp);
            assert!(!m.passed, "{} passed with {bad:#x}", m.policy);
            assert_eq!(m.non_finite, 1, "{}", m.policy);
            assert!(
                m.reason.contains("non-finite"),
                "{}: {}",
                m.policy,
                m.reason
            );
            assert_eq!(m.worst[0].index, "d=17", "{}", m.policy);
            assert!(!m.worst[0].actual.is_finite());
        }
    }
}

#[test]
fn numeric_policies_never_pass_nan_even_where_nan_is_expected() {
    let s = spec(ElemType::Bf16, &[2], &["d"]);
    let e = bf16_bits(&[2], &[0x7FC0, 0x3F80]);
    let a = bf16_bits(&[2], &[0x7FC0, 0x3F80]);
    let oracle = Tensor::of_f64(vec![2], &[f64::NAN, 1.0]);
    for p in every_policy_lenient() {
        let cmp = Comparison::new(&s, &a, &e)
            .with_oracle(&oracle)
            .with_baseline(&e);
        let m = run(&p, &cmp);
        let by_class = p.is_exact();
        assert_eq!(m.passed, by_class, "{}: {}", m.policy, m.reason);
        assert_eq!(m.non_finite, 0);
    }
}

#[test]
fn the_references_own_infinity_matched_by_the_same_infinity_passes_every_policy() {
    // The exact sum overflowed the dtype: the reference gives -inf, the oracle a finite value
    // beyond the range. A correct kernel returns -inf too and must pass whatever the policy;
    // a finite value or the other infinity there fails.
    let n = 64;
    let s = spec(ElemType::Bf16, &[n], &["d"]);
    let values: Vec<f32> = (0..n).map(|i| (i % 5) as f32 - 2.0).collect();
    let mut bits: Vec<u16> = values.iter().map(|&v| bf16_exact(v)).collect();
    bits[9] = 0xFF80; // -inf
    let e = bf16_bits(&[n], &bits);
    let mut exact: Vec<f64> = values.iter().map(|&v| v as f64).collect();
    exact[9] = -4.0e38;
    let oracle = Tensor::of_f64(vec![n], &exact);
    let mut policies = every_policy_lenient();
    policies.extend([
        CheckPolicy::from(policies::Ulp { max: 0 }),
        CheckPolicy::from(policies::Allclose {
            atol: 1e-3,
            rtol: 1e-3,
            min_matched_ratio: 1.0,
        }),
        CheckPolicy::from(policies::ErrorRatio {
            max_ratio: 1.0,
            mean_ratio: 1.0,
            atol: 0.0,
        }),
    ]);
    for p in &policies {
        let cmp = Comparison::new(&s, &e, &e)
            .with_oracle(&oracle)
            .with_baseline(&e);
        let m = run(p, &cmp);
        assert!(m.passed, "{}: {}", m.policy, m.reason);
        if *p == CheckPolicy::from(policies::Ulp { max: u64::MAX }) {
            continue; // accepts any number by construction (the largest finite is 1 ULP away)
        }
        for wrong in [0xFF7Fu16, 0x7F80] {
            let mut b = bits.clone();
            b[9] = wrong; // the largest finite negative, or +inf
            let a = bf16_bits(&[n], &b);
            let cmp = Comparison::new(&s, &a, &e)
                .with_oracle(&oracle)
                .with_baseline(&e);
            let m = run(p, &cmp);
            assert!(!m.passed, "{} passed {wrong:#x} against -inf", m.policy);
        }
    }
}

#[test]
fn elements_still_holding_the_poison_pattern_fail_as_unwritten() {
    let s = spec(ElemType::Bf16, &[2, 3], &["s", "d"]);
    let e = bf16(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let a = bf16_bits(&[2, 3], &[0x3F80, 0x4000, 0x4040, 0x4080, 0x7FA5, 0x7FA5]);
    for p in every_policy_lenient() {
        let cmp = Comparison::new(&s, &a, &e)
            .with_oracle(&e)
            .with_baseline(&e)
            .with_poison(&[BF16_POISON]);
        let m = run(&p, &cmp);
        assert!(!m.passed, "{}", m.policy);
        assert_eq!(m.unwritten, 2);
        assert_eq!(m.non_finite, 0, "unwritten elements are not counted twice");
        assert!(m.reason.starts_with("unwritten: 2 of 6"), "{}", m.reason);
        assert_eq!(m.worst[0].index, "s=1 d=1");
        assert_eq!(m.worst[1].index, "s=1 d=2");
    }
    // Without the poison list the same bits are merely NaN where finite was expected.
    let m = run(&bitwise(), &Comparison::new(&s, &a, &e));
    assert_eq!((m.unwritten, m.non_finite), (0, 2));
}

#[test]
fn a_value_equal_to_the_poison_where_the_expected_value_is_the_same_is_not_unwritten() {
    let s = spec(ElemType::U8, &[3], &["d"]);
    let e = Tensor::from_u8(vec![3], vec![0xA5, 0x01, 0x02]);
    let a = Tensor::from_u8(vec![3], vec![0xA5, 0x01, 0xA5]);
    let m = run(
        &bitwise(),
        &Comparison::new(&s, &a, &e).with_poison(&[0xA5]),
    );
    assert!(!m.passed);
    assert_eq!(m.unwritten, 1);
    assert_eq!(m.mismatches, 1);
    assert_eq!(m.worst[0].index, "d=2");
}

#[test]
fn wrong_shape_or_dtype_fails_saying_expected_and_got() {
    let s = spec(ElemType::Bf16, &[3, 2], &["s", "d"]);
    let e = bf16(&[3, 2], &[1.0; 6]);
    let a = bf16(&[2, 3], &[1.0; 6]);
    let m = run(&bitwise(), &Comparison::new(&s, &a, &e));
    assert!(!m.passed);
    assert_eq!(m.reason, "wrong shape: expected [3, 2], got [2, 3]");
    let a = Tensor::from_f32(vec![3, 2], &[1.0; 6]);
    let m = run(
        &CheckPolicy::from(policies::Ulp { max: 0 }),
        &Comparison::new(&s, &a, &e),
    );
    assert!(!m.passed);
    assert_eq!(m.reason, "wrong dtype: expected BF16, got F32");
    // A tensor whose bytes do not match its shape is reported, never read out of bounds.
    let a = Tensor {
        dtype: ElemType::Bf16,
        shape: vec![3, 2],
        data: vec![0; 10],
    };
    let m = run(&bitwise(), &Comparison::new(&s, &a, &e));
    assert!(!m.passed);
    assert!(
        m.reason.starts_with("malformed output: 10 bytes"),
        "{}",
        m.reason
    );
}

#[test]
fn harness_side_problems_are_typed_errors() {
    let s = spec(ElemType::Bf16, &[2], &["d"]);
    let e = bf16(&[2], &[1.0, 2.0]);
    let err = evaluate(
        &CheckPolicy::from(policies::CannDouble {
            level: CannLevel::L1,
        }),
        &Comparison::new(&s, &e, &e),
        Threads::ONE,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            VerdictError::MissingTensor {
                tensor: "oracle",
                ..
            }
        ),
        "{err}"
    );
    let oracle = Tensor::of_f64(vec![2], &[1.0, 2.0]);
    let err = evaluate(
        &CheckPolicy::from(policies::ErrorRatio {
            max_ratio: 2.0,
            mean_ratio: 1.5,
            atol: 0.0,
        }),
        &Comparison::new(&s, &e, &e).with_oracle(&oracle),
        Threads::ONE,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            VerdictError::MissingTensor {
                tensor: "baseline",
                ..
            }
        ),
        "{err}"
    );
    let wrong = bf16(&[1, 2], &[1.0, 2.0]);
    let err = evaluate(&bitwise(), &Comparison::new(&s, &e, &wrong), Threads::ONE).unwrap_err();
    assert!(
        matches!(
            err,
            VerdictError::TensorMismatch {
                tensor: "expected",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("BF16 [1, 2]"), "{err}");
    let err = evaluate(
        &bitwise(),
        &Comparison::new(&s, &e, &e).with_poison(&[F32_POISON]),
        Threads::ONE,
    )
    .unwrap_err();
    assert!(matches!(err, VerdictError::PoisonWidth { .. }), "{err}");
    let su8 = spec(ElemType::U8, &[2], &["d"]);
    let u = Tensor::from_u8(vec![2], vec![1, 2]);
    let err = evaluate(
        &CheckPolicy::from(policies::CannSingle {}),
        &Comparison::new(&su8, &u, &u),
        Threads::ONE,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            VerdictError::Policy {
                source: PolicyError::UnsupportedDtype { .. },
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn worst_elements_are_located_by_logical_index() {
    let shape = [1, 2, 4, 3];
    let s = spec(ElemType::F32, &shape, &["b", "n", "s", "d"]);
    let e = Tensor::from_f32(shape.to_vec(), &[1.0; 24]);
    let mut v = vec![1.0f32; 24];
    v[(4 + 3) * 3 + 2] = 1.5; // b=0 n=1 s=3 d=2
    v[5] = 1.25; // b=0 n=0 s=1 d=2
    let a = Tensor::from_f32(shape.to_vec(), &v);
    let m = run(
        &CheckPolicy::from(policies::Ulp { max: 0 }),
        &Comparison::new(&s, &a, &e),
    );
    assert_eq!(m.worst.len(), 2, "exact elements are not listed");
    assert_eq!(m.worst[0].index, "b=0 n=1 s=3 d=2");
    assert_eq!((m.worst[0].actual, m.worst[0].expected), (1.5, 1.0));
    assert_eq!(m.worst[0].abs_err, 0.5);
    assert_eq!(m.worst[1].index, "b=0 n=0 s=1 d=2");
}

#[test]
fn heatmap_records_the_max_error_per_query_position_and_head_bucket() {
    let shape = [1, 130, 2, 4];
    let n: usize = shape.iter().product();
    let s = spec(ElemType::F32, &shape, &["b", "s", "n", "d"]);
    let e = Tensor::from_f32(shape.to_vec(), &vec![0.0; n]);
    let mut v = vec![0.0f32; n];
    let at = |s: usize, h: usize, d: usize| (s * 2 + h) * 4 + d;
    v[at(5, 1, 3)] = 0.5;
    v[at(4, 1, 0)] = 0.125; // same bucket (s 3..6), smaller
    v[at(129, 0, 2)] = -0.25;
    let a = Tensor::from_f32(shape.to_vec(), &v);
    let m = run(
        &CheckPolicy::from(policies::Ulp { max: 0 }),
        &Comparison::new(&s, &a, &e),
    );
    let h = m.heatmap.expect("axes s and n give a heatmap");
    assert_eq!((h.row_axis.as_str(), h.col_axis.as_str()), ("s", "n"));
    assert_eq!((h.row_bucket, h.rows, h.col_bucket, h.cols), (3, 44, 1, 2));
    let mut want = vec![0.0; 44 * 2];
    want[2 + 1] = 0.5; // row 1 (s 3..6), column 1
    want[43 * 2] = 0.25;
    assert_eq!(h.values, want);
    let no_axes = spec(ElemType::F32, &shape, &[]);
    let m = run(
        &CheckPolicy::from(policies::Ulp { max: 0 }),
        &Comparison::new(&no_axes, &a, &e),
    );
    assert!(m.heatmap.is_none());
}

#[test]
fn cann_single_checks_mere_below_t_and_mare_below_ten_t() {
    // f32: T = 2^-13.
    let t = 2f64.powi(-13);
    let s = spec(ElemType::F32, &[4], &["d"]);
    let e = Tensor::from_f32(vec![4], &[1.0; 4]);
    let one_off = Tensor::from_f32(vec![4], &[1.0 + 2f32.powi(-12), 1.0, 1.0, 1.0]);
    let m = run(
        &CheckPolicy::from(policies::CannSingle {}),
        &Comparison::new(&s, &one_off, &e),
    );
    let rel = 2f64.powi(-12) / (1.0 + 1e-7);
    assert_eq!(m.mare, rel);
    assert_eq!(m.mere, rel / 4.0);
    assert!(m.passed, "{}", m.reason);
    assert_eq!(m.extra["threshold"], t);
    assert_eq!(m.policy, "cann_single(f32)");

    // MERE = 2^-12 / (1 + 1e-7) > T; MARE still below 10T.
    let mere_high = Tensor::from_f32(
        vec![4],
        &[1.0 + 2f32.powi(-11), 1.0 + 2f32.powi(-11), 1.0, 1.0],
    );
    let m = run(
        &CheckPolicy::from(policies::CannSingle {}),
        &Comparison::new(&s, &mere_high, &e),
    );
    assert!(!m.passed);
    assert!(
        m.reason.contains("MERE") && !m.reason.contains("MARE"),
        "{}",
        m.reason
    );

    // One element at 2^-9 among 1000: MERE tiny, MARE = 2^-9 > 10T.
    let s = spec(ElemType::F32, &[1000], &["d"]);
    let e = Tensor::from_f32(vec![1000], &[1.0; 1000]);
    let mut v = vec![1.0f32; 1000];
    v[999] = 1.0 + 2f32.powi(-9);
    let a = Tensor::from_f32(vec![1000], &v);
    let m = run(
        &CheckPolicy::from(policies::CannSingle {}),
        &Comparison::new(&s, &a, &e),
    );
    assert!(!m.passed);
    assert!(
        m.reason.contains("MARE") && !m.reason.contains("MERE"),
        "{}",
        m.reason
    );
    assert_eq!(m.mismatches, 1, "the element above 10T is the mismatch");
}

#[test]
fn cann_single_measures_against_the_oracle_when_one_is_given() {
    let s = spec(ElemType::Bf16, &[1], &["d"]);
    let e = bf16(&[1], &[1.0]);
    let oracle = Tensor::of_f64(vec![1], &[1.001]);
    let m = run(
        &CheckPolicy::from(policies::CannSingle {}),
        &Comparison::new(&s, &e, &e).with_oracle(&oracle),
    );
    assert_eq!(m.policy, "cann_single(bf16) vs oracle");
    assert_eq!(m.max_abs_err, (1.0f64 - 1.001).abs());
    assert_eq!(m.max_ulp, Some(0), "ULP is always against expected");
}

#[test]
fn cann_mixed_needs_99_percent_within_t_plus_t_g_and_a_bounded_max_error() {
    // f32: T = 2^-13, element limit for g = 1 is 2^-12; cap 0.01.
    let n = 1000;
    let s = spec(ElemType::F32, &[n], &["d"]);
    let e = Tensor::from_f32(vec![n], &vec![1.0; n]);
    let with_bad = |k: usize| {
        let mut v = vec![1.0f32; n];
        for x in v.iter_mut().take(k) {
            *x = 1.0 + 2f32.powi(-11);
        }
        Tensor::from_f32(vec![n], &v)
    };
    let exactly_at_limit = {
        let mut v = vec![1.0f32; n];
        v[0] = 1.0 + 2f32.powi(-12);
        Tensor::from_f32(vec![n], &v)
    };
    let m = run(
        &CheckPolicy::from(policies::CannMixed {}),
        &Comparison::new(&s, &exactly_at_limit, &e),
    );
    assert_eq!(m.mismatches, 0, "|a-g| = T + T|g| passes");
    let m = run(
        &CheckPolicy::from(policies::CannMixed {}),
        &Comparison::new(&s, &with_bad(10), &e),
    );
    assert!(m.passed, "{}", m.reason);
    assert_eq!(m.extra["pass_ratio"], 0.99);
    let m = run(
        &CheckPolicy::from(policies::CannMixed {}),
        &Comparison::new(&s, &with_bad(11), &e),
    );
    assert!(!m.passed);
    assert!(m.reason.contains("0.989"), "{}", m.reason);

    let mut g = vec![1.0f32; n];
    g[0] = 100.0;
    let e = Tensor::from_f32(vec![n], &g);
    g[0] = 100.02;
    let a = Tensor::from_f32(vec![n], &g);
    let m = run(
        &CheckPolicy::from(policies::CannMixed {}),
        &Comparison::new(&s, &a, &e),
    );
    assert!(!m.passed);
    assert!(m.reason.contains("max abs error"), "{}", m.reason);
    assert!(!m.reason.contains("satisfy"), "{}", m.reason);
}

/// bf16 double-benchmark fixture: 4 normal and 4 small oracle values.
struct DoubleFixture {
    spec: TensorSpec,
    oracle: Tensor,
    baseline: Tensor,
}

fn double_fixture() -> DoubleFixture {
    let small = 2f64.powi(-10);
    let oracle = [
        1.001,
        2.0,
        4.0,
        8.0,
        small + 2f64.powi(-20),
        -small,
        small * 2.0,
        0.0,
    ];
    // The baseline errs by 0.001 on the first value and by 2^-20 (< 2^-16) on a small one.
    let baseline = [
        1.0f32,
        2.0,
        4.0,
        8.0,
        small as f32,
        -small as f32,
        (small * 2.0) as f32,
        0.0,
    ];
    DoubleFixture {
        spec: spec(ElemType::Bf16, &[8], &["d"]),
        oracle: Tensor::of_f64(vec![8], &oracle),
        baseline: bf16(&[8], &baseline),
    }
}

#[test]
fn cann_double_compares_error_ratios_against_the_baseline_by_level() {
    let f = double_fixture();
    let judge = |a: &Tensor, level| {
        run(
            &CheckPolicy::from(policies::CannDouble { level }),
            &Comparison::new(&f.spec, a, &f.baseline)
                .with_oracle(&f.oracle)
                .with_baseline(&f.baseline),
        )
    };
    let m = judge(&f.baseline, CannLevel::L2);
    assert!(m.passed, "{}", m.reason);
    assert_eq!(m.extra["ratio_mare"], 1.0);
    assert_eq!(m.extra["small_values"], 4.0);
    assert_eq!(m.extra["baseline_small_errors"], 0.0);

    // 1.0078125 instead of 1.0: error 0.0068125 vs the baseline's 0.001 -> ratios 6.8125 for
    // MARE and MERE (one non-zero error among the 4 normal values), sqrt(6.8125^2) for RMSE.
    let mut bits = f.baseline.bits16().unwrap();
    bits[0] = 0x3F81;
    let a = bf16_bits(&[8], &bits);
    let m = judge(&a, CannLevel::L0);
    let r = m.extra["ratio_mare"];
    assert!((r - 6.8125).abs() < 1e-9, "{r}");
    assert!(!m.passed);
    assert!(
        m.reason.contains("MERE ratio") && !m.reason.contains("MARE ratio"),
        "L0 allows MARE x10 but MERE x2: {}",
        m.reason
    );
    let m = judge(&a, CannLevel::L1);
    assert!(m.reason.contains("MARE ratio"), "{}", m.reason);
    assert_eq!(m.extra["limit_mare"], 5.0);
    assert_eq!(m.extra["limit_mere"], 1.5);
}

#[test]
fn cann_double_counts_small_value_errors_separately_against_twice_the_baseline_count() {
    let f = double_fixture();
    let small = 2f32.powi(-10);
    let judge = |a: &Tensor| {
        run(
            &CheckPolicy::from(policies::CannDouble {
                level: CannLevel::L2,
            }),
            &Comparison::new(&f.spec, a, &f.baseline)
                .with_oracle(&f.oracle)
                .with_baseline(&f.baseline),
        )
    };
    // Small values off by ~2^-14 (> 2^-16): two are allowed (2 x max(0, 1)), three are not.
    let off = small + 2f32.powi(-14);
    let two = bf16(
        &[8],
        &[1.0, 2.0, 4.0, 8.0, off, -small, small * 2.0, 2f32.powi(-14)],
    );
    let m = judge(&two);
    assert_eq!(m.extra["npu_small_errors"], 2.0);
    assert_eq!(m.extra["small_errors_limit"], 2.0);
    assert!(m.passed, "{}", m.reason);
    let three = bf16(
        &[8],
        &[1.0, 2.0, 4.0, 8.0, off, -off, small * 2.0, 2f32.powi(-14)],
    );
    let m = judge(&three);
    assert!(!m.passed);
    assert!(m.reason.contains("3 small values"), "{}", m.reason);
    assert!(
        !m.reason.contains("ratio"),
        "normal values are unchanged: {}",
        m.reason
    );
}

#[test]
fn error_ratio_applies_the_flash_attention_max_and_mean_rules() {
    let s = spec(ElemType::F32, &[4], &["d"]);
    let oracle = Tensor::of_f64(vec![4], &[1.0, 2.0, 3.0, 4.0]);
    let e = Tensor::from_f32(vec![4], &[1.0, 2.0, 3.0, 4.0]);
    let u = 2f32.powi(-7);
    // Baseline: max error 2^-7, mean 2^-8.
    let baseline = Tensor::from_f32(vec![4], &[1.0 + u, 2.0, 3.0 + 2.0 * u, 4.0]);
    let policy = CheckPolicy::from(policies::ErrorRatio {
        max_ratio: 2.0,
        mean_ratio: 1.5,
        atol: 0.0,
    });
    let judge = |a: &Tensor| {
        run(
            &policy,
            &Comparison::new(&s, a, &e)
                .with_oracle(&oracle)
                .with_baseline(&baseline),
        )
    };
    let _ = judge(&baseline);
    let b_max = 2.0 * u as f64;
    // Max error exactly 2 x baseline, mean equal: passes.
    let a = Tensor::from_f32(vec![4], &[1.0 + 4.0 * u, 2.0, 3.0, 4.0]);
    let m = judge(&a);
    assert!(m.passed, "{}", m.reason);
    assert_eq!(m.extra["baseline_max_abs"], b_max);
    assert_eq!(m.extra["ratio_max_abs"], 2.0);
    // Max error just above 2 x baseline: fails the max rule only.
    let a = Tensor::from_f32(vec![4], &[1.0 + 4.0 * u + 2f32.powi(-20), 2.0, 3.0, 4.0]);
    let m = judge(&a);
    assert!(!m.passed);
    assert!(
        m.reason.contains("max abs") && !m.reason.contains("mean"),
        "{}",
        m.reason
    );
    // Every element off by 2^-6: max 1x, mean 2^-6 > 1.5 x 2^-8... fails the mean rule only.
    let v = 2.0 * u;
    let a = Tensor::from_f32(vec![4], &[1.0 + v, 2.0 + v, 3.0 + v, 4.0 + v]);
    let m = judge(&a);
    assert!(!m.passed);
    assert!(
        m.reason.contains("mean abs") && !m.reason.contains("max abs"),
        "{}",
        m.reason
    );
    // atol lifts both bounds.
    let lenient = CheckPolicy::from(policies::ErrorRatio {
        max_ratio: 2.0,
        mean_ratio: 1.5,
        atol: 0.01,
    });
    let m = run(
        &lenient,
        &Comparison::new(&s, &a, &e)
            .with_oracle(&oracle)
            .with_baseline(&baseline),
    );
    assert!(m.passed, "{}", m.reason);
}

#[test]
fn an_empty_output_passes_with_zero_figures() {
    let s = spec(ElemType::Bf16, &[0, 4], &["s", "d"]);
    let e = bf16(&[0, 4], &[]);
    let m = run(
        &CheckPolicy::from(policies::CannSingle {}),
        &Comparison::new(&s, &e, &e),
    );
    assert!(m.passed, "{}", m.reason);
    assert_eq!(
        (m.numel, m.mismatches, m.mismatch_ratio, m.mere),
        (0, 0, 0.0, 0.0)
    );
}

#[test]
fn rounded_expectations_from_the_reference_compare_as_their_oracle_within_half_an_ulp() {
    // The oracle rounded once to bf16 is the expected tensor: its error vs the oracle is at
    // most half a bf16 ULP, 2^-8 relative in [1, 2), inside the cann_single thresholds.
    let n = 4096;
    let vals: Vec<f64> = (0..n).map(|i| 1.0 + i as f64 / 4097.0).collect();
    let oracle = Tensor::of_f64(vec![n], &vals);
    let e = Tensor::round_values(ElemType::Bf16, vec![n], &vals, Rounding::RNE);
    let s = spec(ElemType::Bf16, &[n], &["d"]);
    let m = run(
        &CheckPolicy::from(policies::CannSingle {}),
        &Comparison::new(&s, &e, &e).with_oracle(&oracle),
    );
    assert!(m.passed, "{}", m.reason);
    assert!(m.mare <= 2f64.powi(-8), "{}", m.mare);
    assert_eq!(m.max_ulp, Some(0));
}
