use super::*;
use crate::formats::RoundingMode;

#[test]
fn rounding_is_exact_with_the_tie_rule_of_each_mode() {
    let even = RoundingMode::NearestTiesToEven;
    let away = RoundingMode::NearestTiesAway;
    for (v, e, a) in [
        (0.5f32, 0, 1),
        (1.5, 2, 2),
        (2.5, 2, 3),
        (-2.5, -2, -3),
        (-0.5, 0, -1),
        (2.4999998, 2, 2),
        (126.5, 126, 127),
    ] {
        assert_eq!(round_to_int(v, even), e, "{v}");
        assert_eq!(round_to_int(v, away), a, "{v}");
    }
    assert_eq!(round_to_int(-1.75, RoundingMode::TowardZero), -1);
    assert_eq!(round_to_int(-1.25, RoundingMode::TowardNegative), -2);
}

#[test]
fn the_kernel_scale_is_the_reciprocal_of_the_quotient() {
    let k = DqRecipe::preset("a2_plain").unwrap();
    let g = DqRecipe::preset("ops_nn_golden").unwrap();
    // 127 * 2^-7: the quotient is exactly 2^7 in both.
    assert_eq!(k.scale_and_factor(0.9921875), (0.0078125, 128.0));
    assert_eq!(g.scale_and_factor(0.9921875).0, 0.0078125);
    // A row max where the forms differ (found by the witness search's rule).
    let a = 0.6f32;
    let (sk, _) = k.scale_and_factor(a);
    assert_eq!(sk, 1.0 / (127.0f32 / a));
    assert_eq!(g.scale_and_factor(a).0, a * (1.0 / 127.0f32));
    // The multi-row and single-row kernels store the golden's form, and multiply by the
    // quotient as the others do.
    for v in ["a2_multi_row", "a2_single_row", "a2_db"] {
        let m = DqRecipe::preset(v).unwrap();
        assert_eq!(
            m.scale_and_factor(a),
            (a * (1.0 / 127.0f32), 127.0 / a),
            "{v}"
        );
    }
    // The constant the kernels multiply by: 1 / 127 rounded once to f32, whether the
    // source writes it as an f32 division (multi-row) or a double rounded to f32
    // (single-row's `1.0 / 127.0`).
    assert_eq!(1.0f32 / 127.0, (1.0f64 / 127.0) as f32);
    assert!(DqRecipe::preset(DISPATCHING).is_none());
}

#[test]
fn oracle_row_rounds_exact_ties_to_even_and_zero_rows_to_zero() {
    let (s, y) = oracle_row(&[127.0 / 128.0, 2.5 / 128.0, -3.5 / 128.0, 0.0]);
    assert_eq!(s, 127.0 / 128.0 / 127.0);
    assert_eq!(y, vec![127, 2, -4, 0]);
    assert_eq!(oracle_row(&[0.0, -0.0]), (0.0, vec![0, 0]));
}

#[test]
fn zero_rows_give_scale_zero_and_no_nan() {
    let k = DqRecipe::preset("a2_plain").unwrap();
    let (s, f) = k.scale_and_factor(0.0);
    assert_eq!(s.to_bits(), 0);
    assert_eq!(k.to_int8(k.scaled(0.0, f)), 0);
    let g = DqRecipe::preset("ops_nn_golden").unwrap();
    let (s, f) = g.scale_and_factor(0.0);
    assert_eq!(s.to_bits(), 0);
    assert_eq!(g.to_int8(g.scaled(-0.0, f)), 0);
}
