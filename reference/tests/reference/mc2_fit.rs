//! Least-squares fitting of cost models on synthetic data with known coefficients and
//! deterministic noise.

use crate::mc2_common;

use conform_reference::mc2::{
    fit_piecewise, fit_polynomial, fit_single, Mc2Error, PiecewiseCost, Polynomial, SegmentKind,
};
use mc2_common::{seed_comm, SplitMix};

#[test]
fn noiseless_linear_and_quadratic_are_recovered_exactly() {
    let pts: Vec<(f64, f64)> = (1..=20)
        .map(|i| (i as f64, 13.5 * i as f64 + 61.5))
        .collect();
    let Polynomial::Linear { slope, intercept } =
        fit_polynomial(&pts, SegmentKind::Linear).unwrap()
    else {
        panic!("linear fit returned another kind")
    };
    approx::assert_abs_diff_eq!(slope, 13.5, epsilon = 1e-10);
    approx::assert_abs_diff_eq!(intercept, 61.5, epsilon = 1e-9);
    let pts: Vec<(f64, f64)> = (0..16)
        .map(|i| {
            let x = 0.5 * i as f64;
            (x, -0.97 * x * x + 27.06 * x + 14.77)
        })
        .collect();
    let r = fit_single(&pts, SegmentKind::Quadratic).unwrap();
    let Polynomial::Quadratic { a, b, c } = r.segments[0] else {
        panic!("quadratic fit returned another kind")
    };
    approx::assert_abs_diff_eq!(a, -0.97, epsilon = 1e-10);
    approx::assert_abs_diff_eq!(b, 27.06, epsilon = 1e-9);
    approx::assert_abs_diff_eq!(c, 14.77, epsilon = 1e-9);
    assert!(r.sse < 1e-15 && r.rmse < 1e-8);
    approx::assert_abs_diff_eq!(r.r_squared, 1.0, epsilon = 1e-12);
}

#[test]
fn piecewise_fit_finds_a_known_breakpoint_and_coefficients_under_noise() {
    // Ground truth: the seed's quadratic below 8 MiB, then a clearly different slope (the
    // seed's own two segments nearly join at 8 MiB, so their breakpoint is not identifiable
    // under noise). Noise uniform in [-0.5, 0.5] us.
    let truth = PiecewiseCost::new(
        "truth",
        vec![
            Polynomial::Quadratic {
                a: -0.9698202,
                b: 27.0622573,
                c: 14.769,
            },
            Polynomial::Linear {
                slope: 5.0,
                intercept: 130.0,
            },
        ],
        vec![8.0],
    )
    .unwrap();
    let mut rng = SplitMix::new(0x6d63_3200);
    let pts: Vec<(f64, f64)> = (1..=128)
        .map(|i| {
            let x = 0.25 * i as f64;
            (x, truth.eval(x) + rng.uniform(-0.5, 0.5))
        })
        .collect();
    let r = fit_piecewise(&pts, SegmentKind::Quadratic, SegmentKind::Linear).unwrap();
    assert_eq!(r.breakpoints, vec![8.0]);
    let Polynomial::Quadratic { a, b, c } = r.segments[0] else {
        panic!("left segment is not quadratic")
    };
    let Polynomial::Linear { slope, intercept } = r.segments[1] else {
        panic!("right segment is not linear")
    };
    approx::assert_abs_diff_eq!(a, -0.9698202, epsilon = 0.05);
    approx::assert_abs_diff_eq!(b, 27.0622573, epsilon = 0.4);
    approx::assert_abs_diff_eq!(c, 14.769, epsilon = 0.6);
    approx::assert_abs_diff_eq!(slope, 5.0, epsilon = 0.02);
    approx::assert_abs_diff_eq!(intercept, 130.0, epsilon = 0.5);
    // Uniform noise of half-width 0.5 has sigma 0.289: the RMSE must be about that.
    assert!(r.rmse > 0.2 && r.rmse < 0.38, "rmse = {}", r.rmse);
    assert!(r.r_squared > 0.9999, "R^2 = {}", r.r_squared);
    assert_eq!(r.points, 128);
    // The fitted model is monotone and usable by the planner.
    let model = r.cost_model("fitted communication").unwrap();
    approx::assert_abs_diff_eq!(model.eval(6.0), truth.eval(6.0), epsilon = 0.5);
}

#[test]
fn a_wrong_model_kind_fits_worse() {
    let truth = seed_comm().model;
    let mut rng = SplitMix::new(7);
    let pts: Vec<(f64, f64)> = (1..=64)
        .map(|i| {
            let x = 0.5 * i as f64;
            (x, truth.eval(x) + rng.uniform(-0.5, 0.5))
        })
        .collect();
    let good = fit_piecewise(&pts, SegmentKind::Quadratic, SegmentKind::Linear).unwrap();
    let single = fit_single(&pts, SegmentKind::Linear).unwrap();
    assert!(single.sse > 10.0 * good.sse);
    assert!(single.r_squared < good.r_squared);
}

#[test]
fn too_few_or_bad_points_are_typed_errors() {
    assert_eq!(
        fit_polynomial(&[(1.0, 2.0), (1.0, 3.0)], SegmentKind::Linear),
        Err(Mc2Error::NotEnoughPoints { needed: 2, got: 1 })
    );
    assert_eq!(
        fit_piecewise(
            &[(1.0, 1.0), (2.0, 2.0), (3.0, 3.0), (4.0, 4.0)],
            SegmentKind::Quadratic,
            SegmentKind::Linear
        ),
        Err(Mc2Error::NotEnoughPoints { needed: 5, got: 4 })
    );
    assert!(matches!(
        fit_polynomial(&[(1.0, 2.0), (f64::NAN, 3.0)], SegmentKind::Linear),
        Err(Mc2Error::NonFiniteMeasurement { index: 1, .. })
    ));
}
