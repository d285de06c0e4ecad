//! Piecewise cost models: evaluation of the seed's fits, inversion, and validation of
//! non-monotone or malformed models.

use crate::mc2_common;

use conform_reference::mc2::{CostAxis, Mc2Error, PiecewiseCost, Polynomial};
use mc2_common::{seed_comm, seed_matmul};

#[test]
fn seed_communication_model_evaluates_both_segments() {
    let comm = seed_comm();
    let q = |x: f64| -0.9698202 * x * x + 27.0622573 * x + 14.769;
    let l = |x: f64| 13.58491263 * x + 61.508333;
    assert_eq!(comm.model.eval(6.0), q(6.0));
    approx::assert_abs_diff_eq!(comm.model.eval(6.0), 142.229, epsilon = 1e-3);
    assert_eq!(comm.model.eval(7.999), q(7.999));
    assert_eq!(comm.model.eval(8.0), l(8.0));
    assert_eq!(comm.model.eval(64.0), l(64.0));
    // 384 rows of N = 8192 f16 are 6 MiB.
    assert_eq!(comm.time_us(384.0, 3072, 8192, 2), q(6.0));
    assert_eq!(CostAxis::Mebibytes.x_for_rows(384.0, 3072, 8192, 2), 6.0);
}

#[test]
fn seed_models_reproduce_the_seed_table_roughly() {
    // Seed table: 1M 42, 2M 62.1, 4M 109.8, 8M 168.8, 16M 284.8 us (the fit's own data).
    let comm = seed_comm();
    for (x, t) in [
        (1.0, 42.0),
        (2.0, 62.1),
        (4.0, 109.8),
        (8.0, 168.8),
        (16.0, 284.8),
    ] {
        let e = comm.model.eval(x);
        assert!((e - t).abs() / t < 0.1, "x = {x}: model {e} vs table {t}");
    }
}

#[test]
fn inverse_is_the_smallest_x_reaching_the_time() {
    let comm = seed_comm();
    for t in [
        15.0, 20.0, 100.0, 142.229, 169.5, 170.2, 500.0, 930.0, 5000.0,
    ] {
        let x = comm.model.invert(t).unwrap();
        assert!(comm.model.eval(x) >= t, "t = {t}, x = {x}");
        let below = f64::from_bits(x.to_bits() - 1);
        assert!(
            x == 0.0 || comm.model.eval(below) < t || x == 8.0,
            "t = {t}, x = {x}"
        );
    }
    // A time inside the jump at the breakpoint (169.20 -> 170.19) maps to the breakpoint.
    assert_eq!(comm.model.invert(169.8).unwrap(), 8.0);
    // Times at or below t(0) map to 0.
    assert_eq!(comm.model.invert(1.0).unwrap(), 0.0);
    // Linear matmul: rows for a time.
    let mm = seed_matmul();
    let rows = mm.rows_for_time(803.0, 3072, 8192, 2).unwrap();
    approx::assert_abs_diff_eq!(rows, 4096.0, epsilon = 1e-9);
}

#[test]
fn non_monotone_models_are_rejected() {
    // A quadratic with a < 0 cannot be the unbounded last segment.
    let err = PiecewiseCost::single(
        "comm",
        Polynomial::Quadratic {
            a: -1.0,
            b: 27.0,
            c: 14.0,
        },
    )
    .unwrap_err();
    assert!(matches!(err, Mc2Error::NonMonotone { .. }), "{err}");
    // Past its vertex inside a bounded segment (vertex of the seed quadratic at 13.95 MiB).
    let err = PiecewiseCost::new(
        "comm",
        vec![
            Polynomial::Quadratic {
                a: -0.9698202,
                b: 27.0622573,
                c: 14.769,
            },
            Polynomial::Linear {
                slope: 13.58,
                intercept: 61.5,
            },
        ],
        vec![20.0],
    )
    .unwrap_err();
    assert!(matches!(err, Mc2Error::NonMonotone { .. }), "{err}");
    // A drop at a breakpoint.
    let err = PiecewiseCost::new(
        "comm",
        vec![
            Polynomial::Linear {
                slope: 10.0,
                intercept: 0.0,
            },
            Polynomial::Linear {
                slope: 1.0,
                intercept: 0.0,
            },
        ],
        vec![8.0],
    )
    .unwrap_err();
    assert!(err.to_string().contains("breakpoint x = 8"), "{err}");
    // A negative slope.
    let err = PiecewiseCost::single(
        "matmul",
        Polynomial::Linear {
            slope: -1.0,
            intercept: 100.0,
        },
    )
    .unwrap_err();
    assert!(matches!(err, Mc2Error::NonMonotone { .. }));
    assert!(err.to_string().contains("`matmul`"));
}

#[test]
fn malformed_models_are_rejected() {
    let lin = Polynomial::Linear {
        slope: 1.0,
        intercept: 0.0,
    };
    assert!(matches!(
        PiecewiseCost::new("m", vec![lin, lin], vec![]),
        Err(Mc2Error::SegmentCount { .. })
    ));
    assert!(matches!(
        PiecewiseCost::new("m", vec![], vec![]),
        Err(Mc2Error::SegmentCount { .. })
    ));
    assert!(matches!(
        PiecewiseCost::new("m", vec![lin, lin, lin], vec![4.0, 4.0]),
        Err(Mc2Error::BreakpointOrder { index: 1, .. })
    ));
    assert!(matches!(
        PiecewiseCost::new("m", vec![lin, lin], vec![0.0]),
        Err(Mc2Error::BreakpointOrder { index: 0, .. })
    ));
    assert!(matches!(
        PiecewiseCost::new("m", vec![lin, lin], vec![f64::NAN]),
        Err(Mc2Error::NonFinite { .. })
    ));
    assert!(matches!(
        PiecewiseCost::single(
            "m",
            Polynomial::Linear {
                slope: f64::INFINITY,
                intercept: 0.0
            }
        ),
        Err(Mc2Error::NonFinite { .. })
    ));
    assert!(matches!(
        PiecewiseCost::single(
            "m",
            Polynomial::Linear {
                slope: 1.0,
                intercept: -5.0
            }
        ),
        Err(Mc2Error::NegativeCost { .. })
    ));
}

#[test]
fn a_flat_model_cannot_be_inverted_above_its_level() {
    let flat = PiecewiseCost::single(
        "flat",
        Polynomial::Linear {
            slope: 0.0,
            intercept: 10.0,
        },
    )
    .unwrap();
    assert_eq!(flat.invert(5.0).unwrap(), 0.0);
    assert!(matches!(
        flat.invert(11.0),
        Err(Mc2Error::NotInvertible { .. })
    ));
    assert!(matches!(
        flat.invert(f64::NAN),
        Err(Mc2Error::NotInvertible { .. })
    ));
}
