//! The comparison kernel: one pass over (actual, expected, golden) that gathers every figure a
//! verdict reports, and the filling of [`OutputMetrics`] from them.
//!
//! Work is split into fixed chunks of [`CHUNK`] elements (independent of the thread count);
//! each chunk's figures are computed in element order and the chunks are combined in chunk
//! order on one thread, so every figure is bitwise identical for any thread count. No memory
//! is allocated per element.

use super::heatmap::{CellWalker, HeatGeometry};
use super::histogram::{
    labelled, rel_bucket, rel_label, ulp_bucket, ulp_label, REL_BUCKETS, ULP_BUCKETS,
};
use super::index::format_index;
use super::lane::{
    ulp_distance, Bf16Lane, F16Lane, F32Lane, F64Lane, I32Lane, I64Lane, Lane, U8Lane,
};
use super::worst::{Candidate, Severity, WorstList};
use crate::results::{OutputMetrics, WorstElement};
use conform_reference::ops::{ElemType, Tensor};
use conform_reference::parallel::{map_tasks, Threads};

/// Elements per chunk of the parallel decomposition (fixed: the figures never depend on it
/// varying with the thread count).
pub const CHUNK: usize = 1 << 18;

/// Denominator guard of the CANN relative error |a-g| / (|g| + 1e-7).
pub const CANN_EPS: f64 = 1e-7;
/// Denominator guard of flashinfer-bench's relative error |a-g| / (|g| + 1e-8).
pub const FLASHINFER_EPS: f64 = 1e-8;

/// The per-element failure rule of a pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ElementRule {
    /// Bits differ (NaN by class unless `nan_bits`).
    Bitwise { nan_bits: bool },
    /// ULP distance above `max`, or NaN against a number.
    Ulp { max: u64 },
    /// flashinfer-bench: |a-g| > atol AND |a-g|/(|g|+1e-8) > rtol.
    Allclose { atol: f64, rtol: f64 },
    /// CANN relative error above `limit`.
    RelAbove { limit: f64 },
    /// CANN mixed tolerance: |a-g| > t + t|g|.
    Mixed { t: f64 },
    /// CANN double benchmark: small values (|g| < small) fail above `small_err` absolute
    /// error; the others above `rel_limit` relative error.
    CannDouble {
        rel_limit: f64,
        small: f64,
        small_err: f64,
    },
    /// Absolute error above `limit`.
    AbsAbove { limit: f64 },
    /// Only elements that cannot be compared numerically fail.
    Comparable,
}

/// What one pass computes.
#[derive(Clone, Debug)]
pub(crate) struct PassConfig<'a> {
    pub rule: ElementRule,
    /// Bit patterns that mark an element the target never wrote.
    pub poison: &'a [u64],
    /// Compute ULP distances (actual vs expected, same dtype).
    pub ulp: bool,
    /// Split figures into small (|g| < .0) and normal values; count small values whose
    /// absolute error exceeds .1.
    pub small_value: Option<(f64, f64)>,
    pub heat: Option<&'a HeatGeometry>,
    pub worst: bool,
}

/// Figures of one pass (or one chunk of it).
#[derive(Clone, Debug)]
pub(crate) struct PassStats {
    pub numel: u64,
    /// Elements with finite actual and golden values (the numeric figures are over these).
    pub comparable: u64,
    /// Elements still holding a poison pattern (excluded from every other count).
    pub unwritten: u64,
    /// Elements NaN/Inf in `actual` where `expected` is finite.
    pub non_finite: u64,
    /// Elements with NaN/Inf on either side (includes `non_finite`).
    pub non_comparable: u64,
    pub mismatches: u64,
    pub max_abs: f64,
    /// max |a-g|/|g| over g != 0.
    pub max_rel_plain: f64,
    pub sum_abs: f64,
    pub sum_sq: f64,
    /// Sum and max of |a-g|/(|g|+1e-7).
    pub sum_rel: f64,
    pub max_rel: f64,
    pub max_ulp: u64,
    /// Elements where exactly one of actual/expected is NaN (no ULP distance).
    pub ulp_nan_mismatch: u64,
    pub ulp_hist: [u64; ULP_BUCKETS],
    pub rel_hist: [u64; REL_BUCKETS],
    /// Small-value split (only with `small_value`).
    pub small: u64,
    pub small_err: u64,
    pub normal: u64,
    pub normal_sum_rel: f64,
    pub normal_max_rel: f64,
    pub normal_sum_sq: f64,
    pub worst: WorstList,
    pub heat: Vec<f64>,
}

impl PassStats {
    fn new(heat_cells: usize) -> PassStats {
        PassStats {
            numel: 0,
            comparable: 0,
            unwritten: 0,
            non_finite: 0,
            non_comparable: 0,
            mismatches: 0,
            max_abs: 0.0,
            max_rel_plain: 0.0,
            sum_abs: 0.0,
            sum_sq: 0.0,
            sum_rel: 0.0,
            max_rel: 0.0,
            max_ulp: 0,
            ulp_nan_mismatch: 0,
            ulp_hist: [0; ULP_BUCKETS],
            rel_hist: [0; REL_BUCKETS],
            small: 0,
            small_err: 0,
            normal: 0,
            normal_sum_rel: 0.0,
            normal_max_rel: 0.0,
            normal_sum_sq: 0.0,
            worst: WorstList::new(),
            heat: vec![0.0; heat_cells],
        }
    }

    /// Adds a later chunk's figures (called in chunk order).
    fn absorb(&mut self, o: &PassStats) {
        self.numel += o.numel;
        self.comparable += o.comparable;
        self.unwritten += o.unwritten;
        self.non_finite += o.non_finite;
        self.non_comparable += o.non_comparable;
        self.mismatches += o.mismatches;
        self.max_abs = self.max_abs.max(o.max_abs);
        self.max_rel_plain = self.max_rel_plain.max(o.max_rel_plain);
        self.sum_abs += o.sum_abs;
        self.sum_sq += o.sum_sq;
        self.sum_rel += o.sum_rel;
        self.max_rel = self.max_rel.max(o.max_rel);
        self.max_ulp = self.max_ulp.max(o.max_ulp);
        self.ulp_nan_mismatch += o.ulp_nan_mismatch;
        for (a, b) in self.ulp_hist.iter_mut().zip(&o.ulp_hist) {
            *a += b;
        }
        for (a, b) in self.rel_hist.iter_mut().zip(&o.rel_hist) {
            *a += b;
        }
        self.small += o.small;
        self.small_err += o.small_err;
        self.normal += o.normal;
        self.normal_sum_rel += o.normal_sum_rel;
        self.normal_max_rel = self.normal_max_rel.max(o.normal_max_rel);
        self.normal_sum_sq += o.normal_sum_sq;
        self.worst.merge(&o.worst);
        for (a, b) in self.heat.iter_mut().zip(&o.heat) {
            *a = a.max(*b);
        }
    }

    /// Mean of |a-g|/(|g|+1e-7) over comparable elements (CANN MERE).
    pub fn mere(&self) -> f64 {
        mean(self.sum_rel, self.comparable)
    }
    pub fn rmse(&self) -> f64 {
        sat(mean(self.sum_sq, self.comparable).sqrt())
    }
    pub fn mean_abs(&self) -> f64 {
        mean(self.sum_abs, self.comparable)
    }
    pub fn normal_mere(&self) -> f64 {
        mean(self.normal_sum_rel, self.normal)
    }
    pub fn normal_rmse(&self) -> f64 {
        sat(mean(self.normal_sum_sq, self.normal).sqrt())
    }
}

fn mean(sum: f64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        sat(sum / n as f64)
    }
}

/// Saturates an overflowed figure to f64::MAX so reports stay finite numbers.
#[inline(always)]
pub(crate) fn sat(x: f64) -> f64 {
    if x > f64::MAX {
        f64::MAX
    } else {
        x
    }
}

/// One chunk of the kernel: elements `first..first + n` of the three byte streams.
fn pass_chunk<A: Lane, G: Lane>(
    act: &[u8],
    exp: &[u8],
    gold: &[u8],
    first: usize,
    cfg: &PassConfig<'_>,
) -> PassStats {
    let mut st = PassStats::new(cfg.heat.map_or(0, HeatGeometry::cells));
    let mut walker = cfg.heat.map(|g| CellWalker::new(g, first));
    let poison = cfg.poison;
    let is_poison = |b: u64| poison.contains(&b);
    let elements = act
        .chunks_exact(A::BYTES)
        .zip(exp.chunks_exact(A::BYTES))
        .zip(gold.chunks_exact(G::BYTES));
    for (j, ((ab, eb), gb)) in elements.enumerate() {
        let ab = A::load(ab);
        let eb = A::load(eb);
        let gbits = G::load(gb);
        st.numel += 1;
        let cell = walker.as_ref().map_or(0, CellWalker::cell);
        if let Some(w) = walker.as_mut() {
            w.step();
        }
        if !poison.is_empty() && is_poison(ab) && !is_poison(eb) {
            st.unwritten += 1;
            st.mismatches += 1;
            if cfg.worst {
                st.worst.offer(Candidate {
                    flat: first + j,
                    severity: Severity::Unwritten,
                    abs_err: 0.0,
                    actual: A::value(ab),
                    golden: G::value(gbits),
                    rel_err: 0.0,
                    ulp: None,
                });
            }
            continue;
        }
        let av = A::value(ab);
        let ev = A::value(eb);
        let gv = G::value(gbits);
        let a_nan = A::is_nan(ab);
        let e_nan = A::is_nan(eb);
        let non_finite = !av.is_finite() && ev.is_finite();
        st.non_finite += non_finite as u64;

        // ULP distance against `expected`, in the output dtype.
        let mut ulp = None;
        if cfg.ulp {
            if a_nan || e_nan {
                if a_nan && e_nan {
                    ulp = Some(0);
                    st.ulp_hist[0] += 1;
                } else {
                    st.ulp_nan_mismatch += 1;
                }
            } else {
                let d = ulp_distance::<A>(ab, eb);
                st.max_ulp = st.max_ulp.max(d);
                st.ulp_hist[ulp_bucket(d)] += 1;
                ulp = Some(d);
            }
        }

        let comparable = av.is_finite() && gv.is_finite();
        let (d, rel) = if comparable {
            let d = sat((av - gv).abs());
            let ag = gv.abs();
            let rel = sat(d / (ag + CANN_EPS));
            st.comparable += 1;
            st.max_abs = st.max_abs.max(d);
            if ag != 0.0 {
                st.max_rel_plain = st.max_rel_plain.max(sat(d / ag));
            }
            st.sum_abs += d;
            st.sum_sq += d * d;
            st.sum_rel += rel;
            st.max_rel = st.max_rel.max(rel);
            st.rel_hist[rel_bucket(rel)] += 1;
            if let Some((small, small_err)) = cfg.small_value {
                if ag < small {
                    st.small += 1;
                    st.small_err += (d > small_err) as u64;
                } else {
                    st.normal += 1;
                    st.normal_sum_rel += rel;
                    st.normal_max_rel = st.normal_max_rel.max(rel);
                    st.normal_sum_sq += d * d;
                }
            }
            if walker.is_some() && d > st.heat[cell] {
                st.heat[cell] = d;
            }
            (d, rel)
        } else {
            st.non_comparable += 1;
            (0.0, 0.0)
        };

        let rule_fails = match cfg.rule {
            ElementRule::Bitwise { nan_bits } => {
                if !nan_bits && a_nan && e_nan {
                    false
                } else {
                    ab != eb
                }
            }
            ElementRule::Ulp { max } => match ulp {
                Some(u) => u > max,
                None => {
                    if a_nan || e_nan {
                        !(a_nan && e_nan)
                    } else {
                        ulp_distance::<A>(ab, eb) > max
                    }
                }
            },
            ElementRule::Allclose { atol, rtol } => {
                !comparable || (d > atol && d / (gv.abs() + FLASHINFER_EPS) > rtol)
            }
            ElementRule::RelAbove { limit } => !comparable || rel > limit,
            ElementRule::Mixed { t } => !comparable || d > t + t * gv.abs(),
            ElementRule::CannDouble {
                rel_limit,
                small,
                small_err,
            } => {
                !comparable
                    || if gv.abs() < small {
                        d > small_err
                    } else {
                        rel > rel_limit
                    }
            }
            ElementRule::AbsAbove { limit } => !comparable || d > limit,
            ElementRule::Comparable => !comparable,
        };
        let fails = rule_fails || non_finite;
        st.mismatches += fails as u64;

        if cfg.worst {
            if comparable {
                if d > st.worst.floor() {
                    st.worst.offer(Candidate {
                        flat: first + j,
                        severity: Severity::Numeric,
                        abs_err: d,
                        actual: av,
                        golden: gv,
                        rel_err: rel,
                        ulp,
                    });
                }
            } else if fails {
                st.worst.offer(Candidate {
                    flat: first + j,
                    severity: Severity::NonComparable,
                    abs_err: 0.0,
                    actual: av,
                    golden: gv,
                    rel_err: 0.0,
                    ulp,
                });
            }
        }
    }
    st
}

fn pass_typed<A: Lane, G: Lane>(
    act: &[u8],
    exp: &[u8],
    gold: &[u8],
    numel: usize,
    cfg: &PassConfig<'_>,
    threads: Threads,
) -> PassStats {
    let n_chunks = numel.div_ceil(CHUNK);
    let parts = map_tasks(n_chunks, threads, |c| {
        let lo = c * CHUNK;
        let hi = (lo + CHUNK).min(numel);
        pass_chunk::<A, G>(
            &act[lo * A::BYTES..hi * A::BYTES],
            &exp[lo * A::BYTES..hi * A::BYTES],
            &gold[lo * G::BYTES..hi * G::BYTES],
            lo,
            cfg,
        )
    });
    let mut total = PassStats::new(cfg.heat.map_or(0, HeatGeometry::cells));
    for p in &parts {
        total.absorb(p);
    }
    total
}

/// Runs one pass. `actual` and `expected` share a dtype and length; `golden` has the same
/// element count and either that dtype or F64. The caller has checked all of this.
pub(crate) fn run_pass(
    actual: &Tensor,
    expected: &Tensor,
    golden: &Tensor,
    cfg: &PassConfig<'_>,
    threads: Threads,
) -> PassStats {
    let numel = actual.numel();
    let golden_f64 = golden.dtype == ElemType::F64 && actual.dtype != ElemType::F64;
    macro_rules! typed {
        ($lane:ty) => {
            if golden_f64 {
                pass_typed::<$lane, F64Lane>(
                    &actual.data,
                    &expected.data,
                    &golden.data,
                    numel,
                    cfg,
                    threads,
                )
            } else {
                pass_typed::<$lane, $lane>(
                    &actual.data,
                    &expected.data,
                    &golden.data,
                    numel,
                    cfg,
                    threads,
                )
            }
        };
    }
    match actual.dtype {
        ElemType::Bf16 => typed!(Bf16Lane),
        ElemType::F16 => typed!(F16Lane),
        ElemType::F32 => typed!(F32Lane),
        ElemType::F64 => pass_typed::<F64Lane, F64Lane>(
            &actual.data,
            &expected.data,
            &golden.data,
            numel,
            cfg,
            threads,
        ),
        ElemType::U8 => typed!(U8Lane),
        ElemType::I32 => typed!(I32Lane),
        ElemType::I64 => typed!(I64Lane),
    }
}

/// Fills the figures every verdict records (policy, pass/fail and reason are the caller's).
pub(crate) fn fill_metrics(
    mut st: PassStats,
    shape: &[usize],
    axes: &[String],
    ulp_computed: bool,
    heat: Option<HeatGeometry>,
) -> OutputMetrics {
    let numel = st.numel;
    let mut m = OutputMetrics {
        numel,
        max_abs_err: st.max_abs,
        max_rel_err: st.max_rel_plain,
        mere: st.mere(),
        mare: st.max_rel,
        rmse: st.rmse(),
        max_ulp: ulp_computed.then_some(st.max_ulp),
        mismatches: st.mismatches,
        mismatch_ratio: if numel == 0 {
            0.0
        } else {
            st.mismatches as f64 / numel as f64
        },
        non_finite: st.non_finite,
        unwritten: st.unwritten,
        ..OutputMetrics::default()
    };
    if ulp_computed {
        m.ulp_histogram = labelled(&st.ulp_hist, ulp_label);
        if st.ulp_nan_mismatch > 0 {
            m.ulp_histogram
                .push(("nan_vs_number".to_string(), st.ulp_nan_mismatch));
        }
    }
    m.rel_err_histogram = labelled(&st.rel_hist, rel_label);
    m.extra.insert("mean_abs_err".to_string(), st.mean_abs());
    m.extra
        .insert("non_comparable".to_string(), st.non_comparable as f64);
    let heat_values = std::mem::take(&mut st.heat);
    m.heatmap = heat.map(|g| g.into_heatmap(heat_values));
    m.worst = st
        .worst
        .into_vec()
        .into_iter()
        .map(|c| WorstElement {
            index: format_index(c.flat, shape, axes),
            actual: c.actual,
            expected: c.golden,
            abs_err: c.abs_err,
            rel_err: c.rel_err,
            ulp: c.ulp,
        })
        .collect();
    m
}
