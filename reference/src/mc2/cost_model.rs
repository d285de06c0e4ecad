//! Piecewise cost models: time in microseconds as a function of one size variable `x`.
//!
//! A model is data: `segments[i]` is a linear or quadratic polynomial that applies on
//! `[breakpoints[i-1], breakpoints[i])` (with `breakpoints[-1] = 0` and the last segment
//! unbounded above), so `segments.len() == breakpoints.len() + 1`. The seed's communication
//! fit is two segments with one breakpoint at 8 MiB:
//! `t = -0.9698202 x^2 + 27.0622573 x + 14.769` for `x < 8`, `t = 13.58491263 x + 61.508333`
//! for `x >= 8`.
//!
//! Construction validates the model: finite coefficients, positive strictly increasing
//! breakpoints, a non-negative time at `x = 0`, and monotonicity (non-decreasing inside every
//! segment and across every breakpoint: the left limit may not exceed the value at the
//! breakpoint). A quadratic with a negative leading coefficient is therefore only accepted on a
//! bounded segment, up to its vertex. Monotonicity is what makes [`PiecewiseCost::invert`]
//! well defined: it returns the smallest `x >= 0` with `t(x) >= t`.
//!
//! Evaluation order is fixed: linear `slope * x + intercept`, quadratic `a * x * x + b * x + c`
//! (left to right, f64, no FMA).
//!
//! [`AxisCost`] ties a model to the quantity its `x` measures for a matmul of `m` rows:
//! rows, MiB of the `[m, N]` output, or GFLOP of the `[m, K] x [K, N]` product.

use super::error::Mc2Error;

/// The cost models' claims as fidelity-ledger rows (docs/ascend.md): `(id, claim)`.
pub const COST_MODEL_CLAIMS: [(&str, &str); 2] = [
    (
        "mc2.cost.comm_fit",
        "all-reduce time as the seed's two-segment fit in MiB (quadratic below 8 MiB, linear above)",
    ),
    (
        "mc2.cost.matmul_linear",
        "matmul time linear in the rows of M (the seed's 803 us per 4096 rows)",
    ),
];

/// One segment's polynomial.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Polynomial {
    /// `t = slope * x + intercept`.
    Linear { slope: f64, intercept: f64 },
    /// `t = a * x^2 + b * x + c`.
    Quadratic { a: f64, b: f64, c: f64 },
}

impl Polynomial {
    /// The polynomial's value (fixed evaluation order, see the module docs).
    #[inline]
    pub fn eval(&self, x: f64) -> f64 {
        match *self {
            Polynomial::Linear { slope, intercept } => slope * x + intercept,
            Polynomial::Quadratic { a, b, c } => a * x * x + b * x + c,
        }
    }

    /// The derivative at `x`.
    #[inline]
    pub fn derivative(&self, x: f64) -> f64 {
        match *self {
            Polynomial::Linear { slope, .. } => slope,
            Polynomial::Quadratic { a, b, .. } => 2.0 * a * x + b,
        }
    }

    /// The coefficients, highest degree first.
    pub fn coefficients(&self) -> Vec<f64> {
        match *self {
            Polynomial::Linear { slope, intercept } => vec![slope, intercept],
            Polynomial::Quadratic { a, b, c } => vec![a, b, c],
        }
    }
}

/// A validated piecewise cost model (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct PiecewiseCost {
    name: String,
    breakpoints: Vec<f64>,
    segments: Vec<Polynomial>,
}

impl PiecewiseCost {
    /// Builds and validates a model. `name` appears in every error.
    pub fn new(
        name: impl Into<String>,
        segments: Vec<Polynomial>,
        breakpoints: Vec<f64>,
    ) -> Result<PiecewiseCost, Mc2Error> {
        let name = name.into();
        if segments.is_empty() || breakpoints.len() + 1 != segments.len() {
            return Err(Mc2Error::SegmentCount {
                model: name,
                segments: segments.len(),
                expected: segments.len().saturating_sub(1),
                breakpoints: breakpoints.len(),
            });
        }
        for (i, s) in segments.iter().enumerate() {
            if s.coefficients().iter().any(|c| !c.is_finite()) {
                return Err(Mc2Error::NonFinite {
                    model: name,
                    what: format!("a coefficient of segment {i}"),
                });
            }
        }
        let mut previous = 0.0f64;
        for (i, &b) in breakpoints.iter().enumerate() {
            if !b.is_finite() {
                return Err(Mc2Error::NonFinite {
                    model: name,
                    what: format!("breakpoint {i}"),
                });
            }
            if b <= previous {
                return Err(Mc2Error::BreakpointOrder {
                    model: name,
                    index: i,
                    value: b,
                });
            }
            previous = b;
        }
        let model = PiecewiseCost {
            name,
            breakpoints,
            segments,
        };
        model.validate_monotone()?;
        Ok(model)
    }

    /// A single-segment model.
    pub fn single(name: impl Into<String>, poly: Polynomial) -> Result<PiecewiseCost, Mc2Error> {
        PiecewiseCost::new(name, vec![poly], Vec::new())
    }

    /// The model's name (used in errors and reports).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The breakpoints (strictly increasing, positive).
    pub fn breakpoints(&self) -> &[f64] {
        &self.breakpoints
    }

    /// The segments, in order of increasing `x`.
    pub fn segments(&self) -> &[Polynomial] {
        &self.segments
    }

    /// The domain `[lo, hi)` of segment `i` (`hi` is infinite for the last one).
    pub fn segment_domain(&self, i: usize) -> (f64, f64) {
        let lo = if i == 0 { 0.0 } else { self.breakpoints[i - 1] };
        let hi = self.breakpoints.get(i).copied().unwrap_or(f64::INFINITY);
        (lo, hi)
    }

    /// Index of the segment that applies at `x` (`x < 0` uses the first segment).
    pub fn segment_index(&self, x: f64) -> usize {
        self.breakpoints.iter().take_while(|&&b| x >= b).count()
    }

    /// The time at `x`.
    pub fn eval(&self, x: f64) -> f64 {
        self.segments[self.segment_index(x)].eval(x)
    }

    fn validate_monotone(&self) -> Result<(), Mc2Error> {
        let at_zero = self.segments[0].eval(0.0);
        if at_zero < 0.0 {
            return Err(Mc2Error::NegativeCost {
                model: self.name.clone(),
                value: at_zero,
            });
        }
        for (i, seg) in self.segments.iter().enumerate() {
            let (lo, hi) = self.segment_domain(i);
            // The derivative of a linear or quadratic polynomial is linear in x, so it is
            // non-negative on [lo, hi] iff it is at both ends (and, unbounded, iff a >= 0).
            let slope_lo = seg.derivative(lo);
            let bad_end = if hi.is_finite() {
                let slope_hi = seg.derivative(hi);
                (slope_hi < 0.0).then_some(format!(
                    "segment {i} has slope {slope_hi} at x = {hi} (end of its domain)"
                ))
            } else {
                match *seg {
                    Polynomial::Quadratic { a, .. } if a < 0.0 => Some(format!(
                        "the last segment ({i}) is a quadratic with a < 0 ({a}): it decreases for large x"
                    )),
                    _ => None,
                }
            };
            if slope_lo < 0.0 {
                return Err(Mc2Error::NonMonotone {
                    model: self.name.clone(),
                    detail: format!("segment {i} has slope {slope_lo} at x = {lo}"),
                });
            }
            if let Some(detail) = bad_end {
                return Err(Mc2Error::NonMonotone {
                    model: self.name.clone(),
                    detail,
                });
            }
            if i + 1 < self.segments.len() {
                let left = seg.eval(hi);
                let right = self.segments[i + 1].eval(hi);
                if left > right {
                    return Err(Mc2Error::NonMonotone {
                        model: self.name.clone(),
                        detail: format!(
                            "at breakpoint x = {hi} the time drops from {left} us to {right} us"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// The smallest `x >= 0` with `eval(x) >= t`: the inverse of the model.
    ///
    /// Times at or below `eval(0)` give 0; a time inside a jump at a breakpoint gives the
    /// breakpoint. Inside a segment the answer is found by bisection on the segment's domain
    /// down to adjacent f64 values (deterministic, no closed-form cancellation issues), and the
    /// upper end of the returned bracket is used, so `eval(invert(t)) >= t` always holds.
    pub fn invert(&self, t: f64) -> Result<f64, Mc2Error> {
        if t.is_nan() {
            return Err(Mc2Error::NotInvertible {
                model: self.name.clone(),
                time_us: t,
            });
        }
        if t <= self.eval(0.0) {
            return Ok(0.0);
        }
        for (i, seg) in self.segments.iter().enumerate() {
            let (lo, hi) = self.segment_domain(i);
            if t <= seg.eval(lo) {
                return Ok(lo);
            }
            let hi = if hi.is_finite() {
                if seg.eval(hi) < t {
                    continue;
                }
                hi
            } else {
                // Last segment: grow an upper bracket; a bounded (flat) tail never gets there.
                let mut h = if lo > 0.0 { lo * 2.0 } else { 1.0 };
                let mut steps = 0;
                while seg.eval(h) < t {
                    h *= 2.0;
                    steps += 1;
                    if steps > 2100 || !h.is_finite() {
                        return Err(Mc2Error::NotInvertible {
                            model: self.name.clone(),
                            time_us: t,
                        });
                    }
                }
                h
            };
            // Invariant: eval(a) < t <= eval(b).
            let (mut a, mut b) = (lo, hi);
            for _ in 0..4096 {
                let mid = a + (b - a) * 0.5;
                if mid <= a || mid >= b {
                    break;
                }
                if seg.eval(mid) >= t {
                    b = mid;
                } else {
                    a = mid;
                }
            }
            return Ok(b);
        }
        Err(Mc2Error::NotInvertible {
            model: self.name.clone(),
            time_us: t,
        })
    }
}

/// What a cost model's `x` measures for a matmul of `m` rows of a `[m, K] x [K, N]` problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostAxis {
    /// `x = m` (a model measured for one fixed K and N, like the seed's matmul figure).
    Rows,
    /// `x = m * N * element_size / 2^20`: the MiB of the `[m, N]` output (the seed's "MB").
    #[serde(rename = "mib")]
    Mebibytes,
    /// `x = 2 * m * K * N / 10^9`.
    Gflop,
}

impl CostAxis {
    /// The model input for `rows` rows (f64; `rows` may be fractional during inversion).
    pub fn x_for_rows(self, rows: f64, k: u64, n: u64, element_bytes: u64) -> f64 {
        match self {
            CostAxis::Rows => rows,
            CostAxis::Mebibytes => rows * (n as f64) * (element_bytes as f64) / 1_048_576.0,
            CostAxis::Gflop => 2.0 * rows * (k as f64) * (n as f64) / 1e9,
        }
    }

    /// Rows for a model input `x` (the inverse of [`CostAxis::x_for_rows`]).
    pub fn rows_for_x(self, x: f64, k: u64, n: u64, element_bytes: u64) -> f64 {
        match self {
            CostAxis::Rows => x,
            CostAxis::Mebibytes => x * 1_048_576.0 / ((n as f64) * (element_bytes as f64)),
            CostAxis::Gflop => x * 1e9 / (2.0 * (k as f64) * (n as f64)),
        }
    }

    /// The name used in cost files.
    pub fn name(self) -> &'static str {
        match self {
            CostAxis::Rows => "rows",
            CostAxis::Mebibytes => "mib",
            CostAxis::Gflop => "gflop",
        }
    }
}

/// A cost model together with the axis its `x` is measured on.
#[derive(Clone, Debug, PartialEq)]
pub struct AxisCost {
    pub axis: CostAxis,
    pub model: PiecewiseCost,
}

impl AxisCost {
    pub fn new(axis: CostAxis, model: PiecewiseCost) -> AxisCost {
        AxisCost { axis, model }
    }

    /// Time in us for `rows` rows of the problem `[rows, K] x [K, N]`, output element size
    /// `element_bytes`.
    pub fn time_us(&self, rows: f64, k: u64, n: u64, element_bytes: u64) -> f64 {
        self.model
            .eval(self.axis.x_for_rows(rows, k, n, element_bytes))
    }

    /// The (fractional) number of rows whose time reaches `time_us` (see
    /// [`PiecewiseCost::invert`]).
    pub fn rows_for_time(
        &self,
        time_us: f64,
        k: u64,
        n: u64,
        element_bytes: u64,
    ) -> Result<f64, Mc2Error> {
        let x = self.model.invert(time_us)?;
        Ok(self.axis.rows_for_x(x, k, n, element_bytes))
    }
}
