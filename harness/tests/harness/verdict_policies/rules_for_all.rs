//! The rules every policy keeps: NaN/Inf never pass by accident, unwritten (poisoned) elements
//! fail, wrong shape/dtype fail, harness-side problems are typed errors, an empty output passes.

use super::*;

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

/// An F32 output of 64 values whose f32 rounding differs from their exact value, except
/// element 9: `(actual, expected, oracle)` with element 9 given as `(exact, expected,
/// actual)` values and every other actual value the expected one.
fn with_element_9(exact9: f64, expected9: f32, actual9: f32) -> (Tensor, Tensor, Tensor) {
    let n = 64;
    let mut exact: Vec<f64> = (0..n).map(|i| 0.1 * (i as f64 - 32.0)).collect();
    let mut expected: Vec<f32> = exact.iter().map(|&v| v as f32).collect();
    exact[9] = exact9;
    expected[9] = expected9;
    let mut actual = expected.clone();
    actual[9] = actual9;
    (
        Tensor::from_f32(vec![n], &actual),
        Tensor::from_f32(vec![n], &expected),
        Tensor::of_f64(vec![n], &exact),
    )
}

/// `actual` against `expected` under `p`, with the oracle, and `expected` as the baseline.
fn judge_f32(p: &CheckPolicy, a: &Tensor, e: &Tensor, oracle: &Tensor) -> OutputMetrics {
    let s = spec(ElemType::F32, &a.shape, &["s"]);
    let cmp = Comparison::new(&s, a, e)
        .with_oracle(oracle)
        .with_baseline(e);
    run(p, &cmp)
}

/// The suites' error ratio for a contributed kernel's LSE.
fn lse_ratio() -> CheckPolicy {
    CheckPolicy::from(policies::ErrorRatio {
        max_ratio: 2.0,
        mean_ratio: 1.5,
        atol: 1e-4,
    })
}

/// The policies of [`every_policy_lenient`] and [`lse_ratio`].
fn every_policy_and_the_lse_check() -> Vec<CheckPolicy> {
    let mut p = every_policy_lenient();
    p.push(lse_ratio());
    p
}

#[test]
fn an_infinity_only_the_oracle_holds_passes_the_rules_that_judge_against_the_oracle() {
    // pa_decode's fully masked decode row: the recipe (the decode kernel) writes a finite LSE
    // near -1e12 + ln n, the exact result is +inf by definition. A target with its own
    // arithmetic returns +inf like the oracle: the rules that judge against the oracle pass
    // it; those that judge against `expected` (bits, ULPs, allclose) fail it.
    let recipe = (-1e12f64 + 8f64.ln()) as f32;
    let (own, e, oracle) = with_element_9(f64::INFINITY, recipe, f32::INFINITY);
    for p in every_policy_and_the_lse_check() {
        let m = judge_f32(&p, &own, &e, &oracle);
        if m.policy.ends_with(" vs oracle") {
            assert!(m.passed, "{}: {}", m.policy, m.reason);
            assert_eq!((m.non_finite, m.mismatches), (0, 0), "{}", m.policy);
        } else {
            assert!(
                !m.passed,
                "{} passed +inf against a finite expected",
                m.policy
            );
            assert_eq!(m.non_finite, 1, "{}", m.policy);
        }
        // The recipe's own finite value there fails against the oracle, as the kernel's
        // result (not as a harness fault), and passes against itself.
        let m = judge_f32(&p, &e, &e, &oracle);
        if m.policy.ends_with(" vs oracle") {
            assert!(!m.passed, "{} passed a finite value against +inf", m.policy);
            assert!(m.reason.contains("expected +Inf, got"), "{}", m.reason);
        } else {
            assert!(m.passed, "{}: {}", m.policy, m.reason);
        }
    }
}

#[test]
fn an_infinity_where_the_judged_value_is_finite_fails_and_bitwise_judges_against_expected() {
    // The recipe overflowed to +inf where the exact result is 2.5, in range: +inf from the
    // target fails every rule that judges against the oracle; the bitwise and ULP rules (and
    // allclose, which reads no oracle) judge against `expected`, whose +inf it matches.
    let (a, e, oracle) = with_element_9(2.5, f32::INFINITY, f32::INFINITY);
    for p in every_policy_and_the_lse_check() {
        let m = judge_f32(&p, &a, &e, &oracle);
        if m.policy.ends_with(" vs oracle") {
            assert!(
                !m.passed,
                "{} passed +inf against a finite oracle",
                m.policy
            );
            assert_eq!(m.non_finite, 1, "{}", m.policy);
            assert!(m.reason.contains("non-finite"), "{}", m.reason);
        } else {
            assert!(m.passed, "{}: {}", m.policy, m.reason);
            assert_eq!(m.non_finite, 0, "{}", m.policy);
        }
    }
    // The exact value returned: bitwise compares it with `expected` (+inf) and fails; for
    // the rules that judge against the oracle the baseline's +inf where the oracle is finite
    // is the harness's fault, not the target's.
    let (a, e, oracle) = with_element_9(2.5, f32::INFINITY, 2.5);
    let m = judge_f32(&bitwise(), &a, &e, &oracle);
    assert!(!m.passed && m.mismatches == 1, "{}", m.reason);
    let s = spec(ElemType::F32, &a.shape, &["s"]);
    let cmp = Comparison::new(&s, &a, &e)
        .with_oracle(&oracle)
        .with_baseline(&e);
    assert!(matches!(
        evaluate(&lse_ratio(), &cmp, Threads::ONE),
        Err(VerdictError::BaselineNotFinite { count: 1, .. })
    ));
}

#[test]
fn nan_never_passes_a_rule_that_judges_against_the_oracle_whatever_the_oracle_holds() {
    for exact9 in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e300, 0.5] {
        let (a, e, oracle) = with_element_9(exact9, 0.5, f32::NAN);
        for p in every_policy_and_the_lse_check() {
            let m = judge_f32(&p, &a, &e, &oracle);
            assert!(!m.passed, "{} passed NaN against {exact9}", m.policy);
        }
    }
    // NaN expected, +inf in the oracle, NaN returned: only the rules that judge against
    // `expected` match NaN by class.
    let (a, e, oracle) = with_element_9(f64::INFINITY, f32::NAN, f32::NAN);
    for p in every_policy_and_the_lse_check() {
        let m = judge_f32(&p, &a, &e, &oracle);
        assert_eq!(m.passed, p.is_exact(), "{}: {}", m.policy, m.reason);
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
fn the_other_infinity_where_infinity_is_expected_is_named_as_the_kernels_result() {
    // The LSE of a fully masked row is +inf by definition; a kernel that returns -inf there
    // is wrong, and the message says what it returned and where, not that the suite chose
    // the wrong policy.
    let s = spec(ElemType::F32, &[2, 3], &["n", "s"]);
    let e = Tensor::from_f32(vec![2, 3], &[1.0, 2.0, 3.0, f32::INFINITY, 5.0, 6.0]);
    let a = Tensor::from_f32(vec![2, 3], &[1.0, 2.0, 3.0, f32::NEG_INFINITY, 5.0, 6.0]);
    let oracle = Tensor::of_f64(vec![2, 3], &[1.0, 2.0, 3.0, f64::INFINITY, 5.0, 6.0]);
    let p = CheckPolicy::from(policies::ErrorRatio {
        max_ratio: 2.0,
        mean_ratio: 1.5,
        atol: 1e-4,
    });
    let cmp = Comparison::new(&s, &a, &e)
        .with_oracle(&oracle)
        .with_baseline(&e);
    let m = run(&p, &cmp);
    assert!(!m.passed);
    assert!(
        m.reason.contains("expected +Inf, got -Inf at n=1 s=0"),
        "{}",
        m.reason
    );
    assert!(!m.reason.contains("use bitwise or ulp"), "{}", m.reason);
    // NaN expected and NaN returned is still the suite's choice of policy.
    let e = Tensor::from_f32(vec![2, 3], &[1.0, 2.0, 3.0, f32::NAN, 5.0, 6.0]);
    let oracle = Tensor::of_f64(vec![2, 3], &[1.0, 2.0, 3.0, f64::NAN, 5.0, 6.0]);
    let cmp = Comparison::new(&s, &e, &e)
        .with_oracle(&oracle)
        .with_baseline(&e);
    let m = run(&p, &cmp);
    assert!(m.reason.contains("use bitwise or ulp"), "{}", m.reason);
}
