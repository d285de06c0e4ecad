//! The comparison kernel: one pass over (actual, expected, golden) that gathers every figure a
//! verdict reports, and the filling of [`OutputMetrics`] from them.
//!
//! Work is split into fixed chunks of [`CHUNK`] elements (independent of the thread count);
//! each chunk's figures are computed in element order and the chunks are combined in chunk
//! order on one thread, so every figure is bitwise identical for any thread count. No memory
//! is allocated per element.

use super::heatmap::{HeatAccumulator, HeatGeometry};
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
}

/// What one pass computes.
#[derive(Clone, Debug)]
pub(crate) struct PassConfig<'a> {
    pub rule: ElementRule,
    /// Bit patterns that mark an element the target never wrote.
    pub poison: &'a [u64],
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

/// Interleaved histogram copies in the kernel.
const LANES: usize = 4;
/// Slots per histogram copy: a power of two above every bucket count, so a masked index needs
/// no bounds check.
const HIST_SLOTS: usize = 128;
const _: () = assert!(ULP_BUCKETS <= HIST_SLOTS && REL_BUCKETS <= HIST_SLOTS);

/// `max(m, x)` for values known not to be NaN (one `maxsd`, no NaN handling).
#[inline(always)]
fn fmax(m: f64, x: f64) -> f64 {
    if x > m {
        x
    } else {
        m
    }
}

/// One chunk of the kernel: elements `first..first + n` of the three byte streams.
///
/// The hot accumulators are locals (kept in registers) and written to the chunk's
/// [`PassStats`] once at the end.
fn pass_chunk<A: Lane, G: Lane>(
    act: &[u8],
    exp: &[u8],
    gold: &[u8],
    first: usize,
    cfg: &PassConfig<'_>,
) -> PassStats {
    let mut st = PassStats::new(0);
    let mut heat = cfg.heat.map(|g| HeatAccumulator::new(g, first));
    let poison = cfg.poison;
    // Usually one pattern: compare it directly, the rest (if any) by search.
    let (check_poison, p0, p_rest) = match poison.split_first() {
        Some((&p0, rest)) => (true, p0, rest),
        None => (false, 0, &[][..]),
    };
    let is_poison = |b: u64| b == p0 || p_rest.contains(&b);
    let rule = cfg.rule;
    let (split_small, small, small_err) = match cfg.small_value {
        Some((s, e)) => (true, s, e),
        None => (false, 0.0, 0.0),
    };

    let (mut comparable, mut unwritten, mut non_finite_n, mut non_comparable) = (0u64, 0, 0, 0);
    let (mut mismatches, mut ulp_nan_mismatch, mut max_ulp) = (0u64, 0u64, 0u64);
    let (mut max_abs, mut max_rel_plain, mut max_rel) = (0f64, 0f64, 0f64);
    let (mut sum_abs, mut sum_sq, mut sum_rel) = (0f64, 0f64, 0f64);
    let (mut n_small, mut n_small_err, mut n_normal) = (0u64, 0u64, 0u64);
    let (mut normal_sum_rel, mut normal_max_rel, mut normal_sum_sq) = (0f64, 0f64, 0f64);
    // Histograms in LANES interleaved copies (element j counts in copy j % LANES), so runs of
    // one bucket do not serialise on a single counter; summed at the end.
    let mut ulp_hist = [[0u64; HIST_SLOTS]; LANES];
    let mut rel_hist = [[0u64; HIST_SLOTS]; LANES];

    let n = (act.len() / A::BYTES)
        .min(exp.len() / A::BYTES)
        .min(gold.len() / G::BYTES);
    let (act, exp, gold) = (
        &act[..n * A::BYTES],
        &exp[..n * A::BYTES],
        &gold[..n * G::BYTES],
    );
    for j in 0..n {
        let ab = A::load(&act[j * A::BYTES..(j + 1) * A::BYTES]);
        let eb = A::load(&exp[j * A::BYTES..(j + 1) * A::BYTES]);
        let gbits = G::load(&gold[j * G::BYTES..(j + 1) * G::BYTES]);
        if check_poison && is_poison(ab) && !is_poison(eb) {
            if let Some(h) = heat.as_mut() {
                h.add(0.0);
            }
            unwritten += 1;
            mismatches += 1;
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
        non_finite_n += non_finite as u64;

        // ULP distance against `expected`, in the output dtype (None: NaN against a number).
        let ulp = if a_nan || e_nan {
            if a_nan && e_nan {
                ulp_hist[j % LANES][0] += 1;
                Some(0)
            } else {
                ulp_nan_mismatch += 1;
                None
            }
        } else {
            let d = ulp_distance::<A>(ab, eb);
            max_ulp = max_ulp.max(d);
            ulp_hist[j % LANES][ulp_bucket(d) & (HIST_SLOTS - 1)] += 1;
            Some(d)
        };

        let is_comparable = av.is_finite() && gv.is_finite();
        let ag = gv.abs();
        let (d, rel) = if is_comparable {
            let d = sat((av - gv).abs());
            let rel = sat(d / (ag + CANN_EPS));
            comparable += 1;
            max_abs = fmax(max_abs, d);
            // max |a-g|/|g|: divide only where the quotient may beat the current maximum
            // (the margin keeps every candidate whose rounded quotient is larger).
            if d > max_rel_plain * ag * 0.999_999 && ag != 0.0 {
                max_rel_plain = fmax(max_rel_plain, sat(d / ag));
            }
            sum_abs += d;
            sum_sq += d * d;
            sum_rel += rel;
            max_rel = fmax(max_rel, rel);
            rel_hist[j % LANES][rel_bucket(rel) & (HIST_SLOTS - 1)] += 1;
            if split_small {
                if ag < small {
                    n_small += 1;
                    n_small_err += (d > small_err) as u64;
                } else {
                    n_normal += 1;
                    normal_sum_rel += rel;
                    normal_max_rel = fmax(normal_max_rel, rel);
                    normal_sum_sq += d * d;
                }
            }
            (d, rel)
        } else {
            non_comparable += 1;
            (0.0, 0.0)
        };

        if let Some(h) = heat.as_mut() {
            h.add(d);
        }

        let rule_fails = match rule {
            ElementRule::Bitwise { nan_bits } => {
                if !nan_bits && a_nan && e_nan {
                    false
                } else {
                    ab != eb
                }
            }
            ElementRule::Ulp { max } => match ulp {
                Some(u) => u > max,
                None => true,
            },
            ElementRule::Allclose { atol, rtol } => {
                !is_comparable || (d > atol && d / (ag + FLASHINFER_EPS) > rtol)
            }
            ElementRule::RelAbove { limit } => !is_comparable || rel > limit,
            ElementRule::Mixed { t } => !is_comparable || d > t + t * ag,
            ElementRule::CannDouble {
                rel_limit,
                small,
                small_err,
            } => {
                !is_comparable
                    || if ag < small {
                        d > small_err
                    } else {
                        rel > rel_limit
                    }
            }
            ElementRule::AbsAbove { limit } => !is_comparable || d > limit,
        };
        let fails = rule_fails || non_finite;
        mismatches += fails as u64;

        if cfg.worst {
            if is_comparable {
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
    if let Some(h) = heat {
        st.heat = h.finish();
    }
    st.numel = n as u64;
    st.comparable = comparable;
    st.unwritten = unwritten;
    st.non_finite = non_finite_n;
    st.non_comparable = non_comparable;
    st.mismatches = mismatches;
    st.max_abs = max_abs;
    st.max_rel_plain = max_rel_plain;
    st.sum_abs = sum_abs;
    st.sum_sq = sum_sq;
    st.sum_rel = sum_rel;
    st.max_rel = max_rel;
    st.max_ulp = max_ulp;
    st.ulp_nan_mismatch = ulp_nan_mismatch;
    for lane in 0..LANES {
        for (t, c) in st.ulp_hist.iter_mut().zip(&ulp_hist[lane]) {
            *t += c;
        }
        for (t, c) in st.rel_hist.iter_mut().zip(&rel_hist[lane]) {
            *t += c;
        }
    }
    st.small = n_small;
    st.small_err = n_small_err;
    st.normal = n_normal;
    st.normal_sum_rel = normal_sum_rel;
    st.normal_max_rel = normal_max_rel;
    st.normal_sum_sq = normal_sum_sq;
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

/// One chunk of the baseline pass: only the figures the baseline policies read (comparable
/// and non-comparable counts, max and sum of |b-g|, the small-value split).
fn baseline_chunk<A: Lane, G: Lane>(
    base: &[u8],
    gold: &[u8],
    small_value: Option<(f64, f64)>,
) -> PassStats {
    let mut st = PassStats::new(0);
    let (split_small, small, small_err) = match small_value {
        Some((s, e)) => (true, s, e),
        None => (false, 0.0, 0.0),
    };
    let (mut numel, mut comparable) = (0u64, 0u64);
    let (mut max_abs, mut sum_abs) = (0f64, 0f64);
    let (mut n_small_err, mut n_normal) = (0u64, 0u64);
    let (mut normal_sum_rel, mut normal_max_rel, mut normal_sum_sq) = (0f64, 0f64, 0f64);
    for (bb, gb) in base.chunks_exact(A::BYTES).zip(gold.chunks_exact(G::BYTES)) {
        numel += 1;
        let bv = A::value(A::load(bb));
        let gv = G::value(G::load(gb));
        if !(bv.is_finite() && gv.is_finite()) {
            continue;
        }
        comparable += 1;
        let d = sat((bv - gv).abs());
        max_abs = fmax(max_abs, d);
        sum_abs += d;
        if split_small {
            let ag = gv.abs();
            if ag < small {
                n_small_err += (d > small_err) as u64;
            } else {
                let rel = sat(d / (ag + CANN_EPS));
                n_normal += 1;
                normal_sum_rel += rel;
                normal_max_rel = fmax(normal_max_rel, rel);
                normal_sum_sq += d * d;
            }
        }
    }
    st.numel = numel;
    st.comparable = comparable;
    st.non_comparable = numel - comparable;
    st.max_abs = max_abs;
    st.sum_abs = sum_abs;
    st.small = if split_small {
        comparable - n_normal
    } else {
        0
    };
    st.small_err = n_small_err;
    st.normal = if split_small { n_normal } else { 0 };
    st.normal_sum_rel = normal_sum_rel;
    st.normal_max_rel = normal_max_rel;
    st.normal_sum_sq = normal_sum_sq;
    st
}

/// The baseline pass: `baseline` against `golden` (same element count; golden of the same
/// dtype or F64), fixed chunks combined in order like [`run_pass`]. Fills the counts, the
/// absolute-error max and sum, and the small-value split (`small_value`); nothing else.
pub(crate) fn run_baseline_pass(
    baseline: &Tensor,
    golden: &Tensor,
    small_value: Option<(f64, f64)>,
    threads: Threads,
) -> PassStats {
    let numel = baseline.numel();
    let golden_f64 = golden.dtype == ElemType::F64 && baseline.dtype != ElemType::F64;
    fn typed<A: Lane, G: Lane>(
        b: &[u8],
        g: &[u8],
        numel: usize,
        small_value: Option<(f64, f64)>,
        threads: Threads,
    ) -> PassStats {
        let parts = map_tasks(numel.div_ceil(CHUNK), threads, |c| {
            let lo = c * CHUNK;
            let hi = (lo + CHUNK).min(numel);
            baseline_chunk::<A, G>(
                &b[lo * A::BYTES..hi * A::BYTES],
                &g[lo * G::BYTES..hi * G::BYTES],
                small_value,
            )
        });
        let mut total = PassStats::new(0);
        for p in &parts {
            total.absorb(p);
        }
        total
    }
    let (b, g) = (&baseline.data[..], &golden.data[..]);
    macro_rules! lane {
        ($lane:ty) => {
            if golden_f64 {
                typed::<$lane, F64Lane>(b, g, numel, small_value, threads)
            } else {
                typed::<$lane, $lane>(b, g, numel, small_value, threads)
            }
        };
    }
    match baseline.dtype {
        ElemType::Bf16 => lane!(Bf16Lane),
        ElemType::F16 => lane!(F16Lane),
        ElemType::F32 => lane!(F32Lane),
        ElemType::F64 => typed::<F64Lane, F64Lane>(b, g, numel, small_value, threads),
        ElemType::U8 => lane!(U8Lane),
        ElemType::I32 => lane!(I32Lane),
        ElemType::I64 => lane!(I64Lane),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_pass_agrees_with_the_full_kernel_on_every_figure_it_fills() {
        let n = CHUNK + 1000;
        let oracle: Vec<f64> = (0..n)
            .map(|i| {
                let x = ((i * 7919) % 10007) as f64 / 10007.0 - 0.5;
                if i % 977 == 0 {
                    f64::NAN
                } else {
                    x * 2f64.powi((i % 13) as i32 - 9)
                }
            })
            .collect();
        let base: Vec<u16> = oracle
            .iter()
            .enumerate()
            .map(|(i, &v)| ((v as f32).to_bits() >> 16) as u16 ^ (i % 3 == 0) as u16)
            .collect();
        let b = Tensor::from_bits16(ElemType::Bf16, vec![n], &base);
        let o = Tensor::of_f64(vec![n], &oracle);
        let small = Some((2f64.powi(-8), 2f64.powi(-16)));
        let cfg = PassConfig {
            rule: ElementRule::AbsAbove {
                limit: f64::INFINITY,
            },
            poison: &[],
            small_value: small,
            heat: None,
            worst: false,
        };
        for threads in [Threads(1), Threads(3)] {
            let full = run_pass(&b, &b, &o, &cfg, threads);
            let lean = run_baseline_pass(&b, &o, small, threads);
            assert_eq!(
                (lean.numel, lean.comparable, lean.non_comparable),
                (full.numel, full.comparable, full.non_comparable)
            );
            assert_eq!((lean.max_abs, lean.sum_abs), (full.max_abs, full.sum_abs));
            assert_eq!(
                (lean.small, lean.small_err, lean.normal),
                (full.small, full.small_err, full.normal)
            );
            assert_eq!(
                (lean.normal_sum_rel, lean.normal_max_rel, lean.normal_sum_sq),
                (full.normal_sum_rel, full.normal_max_rel, full.normal_sum_sq)
            );
            assert!(lean.small_err > 0 && lean.non_comparable > 0);
        }
    }
}
