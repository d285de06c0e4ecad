//! The CANN accuracy policies (cann_single, cann_mixed, cann_double) and error_ratio.

use super::*;

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
    approx::assert_abs_diff_eq!(r, 6.8125, epsilon = 1e-9);
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
