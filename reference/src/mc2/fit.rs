//! Fitting piecewise cost models to measurements (seed 000: tiles of 256..2048 rows timed with
//! msProf, then a linear fit, or a piecewise fit when the relation is not linear).
//!
//! - [`fit_polynomial`]: ordinary least squares of one linear or quadratic polynomial. `x` is
//!   centred and scaled before solving the normal equations (Gaussian elimination with partial
//!   pivoting, f64, sums in input order) and the coefficients are mapped back.
//! - [`fit_piecewise`]: two segments; every distinct measured `x` is tried as the breakpoint
//!   (points with `x >= breakpoint` go to the right segment, matching the seed's
//!   "x < 8 MB / x >= 8 MB"), each side needing enough distinct points for its polynomial; the
//!   breakpoint with the smallest total residual sum of squares wins (ties: the smaller one).
//! - Goodness of fit: residual sum of squares, `R^2 = 1 - SSE / SST`, `RMSE = sqrt(SSE / n)`.
//!
//! A fit is not guaranteed to be monotone (noise can make the right segment start below the
//! left one's end); [`FitReport::cost_model`] validates before a planner may use it.

use super::cost_model::{PiecewiseCost, Polynomial};
use super::error::Mc2Error;
use crate::math::sqrt_f64;

/// The polynomial degree of a segment to fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentKind {
    Linear,
    Quadratic,
}

impl SegmentKind {
    fn parameters(self) -> usize {
        match self {
            SegmentKind::Linear => 2,
            SegmentKind::Quadratic => 3,
        }
    }
    fn name(self) -> &'static str {
        match self {
            SegmentKind::Linear => "linear",
            SegmentKind::Quadratic => "quadratic",
        }
    }
}

/// A fitted model and its goodness of fit.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FitReport {
    pub segments: Vec<Polynomial>,
    pub breakpoints: Vec<f64>,
    /// Residual sum of squares over all points.
    pub sse: f64,
    pub r_squared: f64,
    pub rmse: f64,
    pub points: usize,
}

impl FitReport {
    /// The fit as a validated cost model (fails if it is not monotone).
    pub fn cost_model(&self, name: impl Into<String>) -> Result<PiecewiseCost, Mc2Error> {
        PiecewiseCost::new(name, self.segments.clone(), self.breakpoints.clone())
    }
}

/// Measurements `(x, t)`.
type Points = Vec<(f64, f64)>;

fn check_points(points: &[(f64, f64)]) -> Result<(), Mc2Error> {
    for (i, &(x, y)) in points.iter().enumerate() {
        if !(x.is_finite() && y.is_finite()) {
            return Err(Mc2Error::NonFiniteMeasurement { index: i, x, y });
        }
    }
    Ok(())
}

fn distinct_xs(points: &[(f64, f64)]) -> Vec<f64> {
    let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    xs
}

/// Solves the `n x n` system `a * x = b` (row-major) by Gaussian elimination with partial
/// pivoting. `None` if singular.
fn solve(mut a: Vec<f64>, mut b: Vec<f64>, n: usize) -> Option<Vec<f64>> {
    for col in 0..n {
        let pivot =
            (col..n).max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs()))?;
        if a[pivot * n + col].abs() <= f64::EPSILON * 1e-3 {
            return None;
        }
        if pivot != col {
            for j in 0..n {
                a.swap(pivot * n + j, col * n + j);
            }
            b.swap(pivot, col);
        }
        for row in col + 1..n {
            let f = a[row * n + col] / a[col * n + col];
            for j in col..n {
                a[row * n + j] -= f * a[col * n + j];
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let mut s = b[row];
        for j in row + 1..n {
            s -= a[row * n + j] * x[j];
        }
        x[row] = s / a[row * n + row];
    }
    Some(x)
}

/// Least-squares fit of one polynomial.
pub fn fit_polynomial(points: &[(f64, f64)], kind: SegmentKind) -> Result<Polynomial, Mc2Error> {
    check_points(points)?;
    let distinct = distinct_xs(points).len();
    let p = kind.parameters();
    if distinct < p {
        return Err(Mc2Error::NotEnoughPoints {
            needed: p,
            got: distinct,
        });
    }
    let count = points.len() as f64;
    let mean = points.iter().map(|q| q.0).sum::<f64>() / count;
    let scale = points
        .iter()
        .map(|q| (q.0 - mean).abs())
        .fold(0.0f64, f64::max);
    if scale == 0.0 {
        return Err(Mc2Error::SingularFit { kind: kind.name() });
    }
    // Basis in the scaled variable u = (x - mean) / scale, highest degree first.
    let basis = |u: f64| -> Vec<f64> {
        match kind {
            SegmentKind::Linear => vec![u, 1.0],
            SegmentKind::Quadratic => vec![u * u, u, 1.0],
        }
    };
    let mut ata = vec![0.0; p * p];
    let mut aty = vec![0.0; p];
    for &(x, y) in points {
        let row = basis((x - mean) / scale);
        for i in 0..p {
            for j in 0..p {
                ata[i * p + j] += row[i] * row[j];
            }
            aty[i] += row[i] * y;
        }
    }
    let coef = solve(ata, aty, p).ok_or(Mc2Error::SingularFit { kind: kind.name() })?;
    let (mu, s) = (mean, scale);
    Ok(match kind {
        SegmentKind::Linear => {
            let (bu, cu) = (coef[0], coef[1]);
            Polynomial::Linear {
                slope: bu / s,
                intercept: cu - bu * mu / s,
            }
        }
        SegmentKind::Quadratic => {
            let (au, bu, cu) = (coef[0], coef[1], coef[2]);
            Polynomial::Quadratic {
                a: au / (s * s),
                b: bu / s - 2.0 * au * mu / (s * s),
                c: au * mu * mu / (s * s) - bu * mu / s + cu,
            }
        }
    })
}

fn sse_of(points: &[(f64, f64)], f: impl Fn(f64) -> f64) -> f64 {
    points
        .iter()
        .map(|&(x, y)| {
            let r = y - f(x);
            r * r
        })
        .sum()
}

fn report(points: &[(f64, f64)], segments: Vec<Polynomial>, breakpoints: Vec<f64>) -> FitReport {
    let eval = |x: f64| {
        let i = breakpoints.iter().take_while(|&&b| x >= b).count();
        segments[i].eval(x)
    };
    let sse = sse_of(points, eval);
    let n = points.len() as f64;
    let mean = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sst = sse_of(points, |_| mean);
    let r_squared = if sst > 0.0 {
        1.0 - sse / sst
    } else if sse == 0.0 {
        1.0
    } else {
        0.0
    };
    FitReport {
        segments,
        breakpoints,
        sse,
        r_squared,
        rmse: sqrt_f64(sse / n),
        points: points.len(),
    }
}

/// Fits one polynomial over all points and reports the goodness of fit.
pub fn fit_single(points: &[(f64, f64)], kind: SegmentKind) -> Result<FitReport, Mc2Error> {
    let poly = fit_polynomial(points, kind)?;
    Ok(report(points, vec![poly], Vec::new()))
}

/// Fits two segments (`left` below the breakpoint, `right` at and above it), choosing the
/// breakpoint among the measured `x` values to minimise the total residual.
pub fn fit_piecewise(
    points: &[(f64, f64)],
    left: SegmentKind,
    right: SegmentKind,
) -> Result<FitReport, Mc2Error> {
    check_points(points)?;
    let xs = distinct_xs(points);
    let needed = left.parameters() + right.parameters();
    if xs.len() < needed {
        return Err(Mc2Error::NotEnoughPoints {
            needed,
            got: xs.len(),
        });
    }
    let mut best: Option<FitReport> = None;
    // Breakpoint xs[j]: left gets xs[..j] (>= left.parameters() distinct), right the rest.
    let candidates = &xs[left.parameters()..=xs.len() - right.parameters()];
    for &bp in candidates {
        if bp <= 0.0 {
            continue;
        }
        let (lp, rp): (Points, Points) = points.iter().partition(|p| p.0 < bp);
        let (Ok(l), Ok(r)) = (fit_polynomial(&lp, left), fit_polynomial(&rp, right)) else {
            continue;
        };
        let candidate = report(points, vec![l, r], vec![bp]);
        if best.as_ref().is_none_or(|b| candidate.sse < b.sse) {
            best = Some(candidate);
        }
    }
    best.ok_or(Mc2Error::SingularFit { kind: "piecewise" })
}
