//! The elementwise policies: bitwise, ulp and allclose.

use super::*;

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
