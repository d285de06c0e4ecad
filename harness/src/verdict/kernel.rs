//! The comparison kernels: one chunk of a pass over (actual, expected, golden), and one chunk
//! of the lean baseline pass over (baseline, golden).
//!
//! A chunk is cut into blocks of [`BLOCK`] elements. A block whose elements are all finite on
//! every side and hold no poison pattern ("clean") is decoded into fixed-size arrays and
//! reduced by straight-line loops the compiler vectorises; any other block, and the ragged
//! tail of the last chunk, goes element by element through the general path (NaN, Inf,
//! unwritten elements). Both paths give the same figures bit for bit: every per-element value
//! is one IEEE operation per step (no FMA: Rust never contracts), maxima and counts do not
//! depend on the order, and every sum has one fixed order on both paths:
//!
//! - element `j` of a chunk (counted from the chunk's start) is added into partial sum
//!   `j % PARTIALS` in increasing `j` (elements a figure does not cover add nothing, or +0,
//!   which leaves a partial sum unchanged: partial sums start at +0 and only grow);
//! - the [`PARTIALS`] partial sums of a chunk are combined by the fixed tree
//!   `p[k] += p[k + 4]`, then `p[k] += p[k + 2]`, then `p[0] + p[1]`;
//! - chunks are then added in chunk order (see `metrics`).
//!
//! The figures therefore depend neither on the thread count nor on the CPU's vector width or
//! features: on x86-64 with AVX2 the same code is compiled a second time with AVX2 enabled and
//! chosen at run time; other machines run the portable build.

use super::heatmap::HeatAccumulator;
use super::histogram::{rel_bucket, ulp_bucket, REL_BUCKETS, ULP_BUCKETS};
use super::lane::{ulp_distance, Lane};
use super::metrics::{sat, ElementRule, PassConfig, PassStats, CANN_EPS, FLASHINFER_EPS};
use super::worst::{Candidate, Severity, WorstList};

/// Elements per block of the vectorised path.
pub(crate) const BLOCK: usize = 64;
/// Partial sums per figure (element `j` of a chunk adds into partial `j % PARTIALS`).
pub(crate) const PARTIALS: usize = 8;
const _: () = assert!(BLOCK.is_multiple_of(PARTIALS) && PARTIALS == 8);

/// Interleaved histogram copies (element `j` counts in copy `j % HIST_COPIES`), so runs of one
/// bucket do not serialise on a single counter; summed at the end.
const HIST_COPIES: usize = 4;
/// Slots per histogram copy: a power of two above every bucket count, so a masked index needs
/// no bounds check.
const HIST_SLOTS: usize = 128;
const _: () = assert!(ULP_BUCKETS <= HIST_SLOTS && REL_BUCKETS <= HIST_SLOTS);
const _: () = assert!(BLOCK.is_multiple_of(HIST_COPIES));

/// Which code computes a chunk. Every path gives the same figures bit for bit; tests compare
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KernelPath {
    /// The vectorised blocks, compiled for the best instruction set the CPU has.
    Auto,
    /// The vectorised blocks, portable build (what non-x86 machines run).
    #[cfg_attr(not(test), allow(dead_code))]
    Portable,
    /// Every element through the general per-element path.
    #[cfg_attr(not(test), allow(dead_code))]
    PerElement,
}

/// `max(m, x)` for values known not to be NaN (`maxsd`/`maxpd`, no NaN handling).
#[inline(always)]
fn fmax(m: f64, x: f64) -> f64 {
    if x > m {
        x
    } else {
        m
    }
}

/// The fixed combination of a figure's partial sums (module docs).
#[inline(always)]
fn combine(mut p: [f64; PARTIALS]) -> f64 {
    for k in 0..4 {
        p[k] += p[k + 4];
    }
    for k in 0..2 {
        p[k] += p[k + 2];
    }
    p[0] + p[1]
}

/// The largest of eight running maxima.
#[inline(always)]
fn max_lanes(m: [f64; PARTIALS]) -> f64 {
    m.iter().fold(0.0, |a, &b| fmax(a, b))
}

/// Adds element `i` of a block into partial sum `i % PARTIALS`, in increasing `i`.
#[inline(always)]
fn add_lanes(acc: &mut [f64; PARTIALS], x: &[f64; BLOCK]) {
    for c in 0..BLOCK / PARTIALS {
        for k in 0..PARTIALS {
            acc[k] += x[c * PARTIALS + k];
        }
    }
}

/// The largest element of a block of values that are not NaN, and 0.
#[inline(always)]
fn max_of_block(x: &[f64; BLOCK]) -> f64 {
    let mut m = [0f64; PARTIALS];
    for c in 0..BLOCK / PARTIALS {
        for k in 0..PARTIALS {
            m[k] = fmax(m[k], x[c * PARTIALS + k]);
        }
    }
    max_lanes(m)
}

/// The small-value split of a clean block: counts, and the relative and squared errors of the
/// normal values (+0 in place of the small ones).
struct SmallSplit {
    small: u64,
    small_err: u64,
    normal_rel: [f64; BLOCK],
    normal_sq: [f64; BLOCK],
}

impl SmallSplit {
    #[inline(always)]
    fn of(
        ag: &[f64; BLOCK],
        d: &[f64; BLOCK],
        rel: &[f64; BLOCK],
        small: f64,
        small_err: f64,
    ) -> SmallSplit {
        let mut out = SmallSplit {
            small: 0,
            small_err: 0,
            normal_rel: [0.0; BLOCK],
            normal_sq: [0.0; BLOCK],
        };
        for i in 0..BLOCK {
            let is_small = ag[i] < small;
            out.small += is_small as u64;
            out.small_err += (is_small & (d[i] > small_err)) as u64;
        }
        for i in 0..BLOCK {
            let is_small = ag[i] < small;
            let sq = d[i] * d[i];
            out.normal_rel[i] = if is_small { 0.0 } else { rel[i] };
            out.normal_sq[i] = if is_small { 0.0 } else { sq };
        }
        out
    }
}

/// Whether `x` is neither NaN nor infinite (one compare, vectorisable).
#[inline(always)]
fn finite(x: f64) -> bool {
    x.abs() < f64::INFINITY
}

/// The element's bits from a slice of whole elements.
#[inline(always)]
fn load<L: Lane>(bytes: &[u8], i: usize) -> u64 {
    L::load(&bytes[i * L::BYTES..(i + 1) * L::BYTES])
}

/// The settings of a pass, unpacked once per chunk.
struct PassSettings<'a> {
    rule: ElementRule,
    check_poison: bool,
    /// The first poison pattern, compared directly; the rest (if any) by search.
    p0: u64,
    p_rest: &'a [u64],
    split_small: bool,
    small: f64,
    small_err: f64,
    worst: bool,
}

impl PassSettings<'_> {
    fn of<'a>(cfg: &'a PassConfig<'_>) -> PassSettings<'a> {
        let (check_poison, p0, p_rest) = match cfg.poison.split_first() {
            Some((&p0, rest)) => (true, p0, rest),
            None => (false, 0, &[][..]),
        };
        let (split_small, small, small_err) = match cfg.small_value {
            Some((s, e)) => (true, s, e),
            None => (false, 0.0, 0.0),
        };
        PassSettings {
            rule: cfg.rule,
            check_poison,
            p0,
            p_rest,
            split_small,
            small,
            small_err,
            worst: cfg.worst,
        }
    }

    #[inline(always)]
    fn is_poison(&self, b: u64) -> bool {
        self.check_poison && (b == self.p0 || self.p_rest.contains(&b))
    }
}

/// The running figures of one chunk of a pass.
struct PassAcc {
    comparable: u64,
    unwritten: u64,
    non_finite: u64,
    non_comparable: u64,
    mismatches: u64,
    ulp_nan_mismatch: u64,
    max_ulp: u64,
    max_abs: f64,
    max_rel_plain: f64,
    max_rel: f64,
    sum_abs: [f64; PARTIALS],
    sum_sq: [f64; PARTIALS],
    sum_rel: [f64; PARTIALS],
    small: u64,
    small_err: u64,
    normal: u64,
    normal_sum_rel: [f64; PARTIALS],
    normal_max_rel: f64,
    normal_sum_sq: [f64; PARTIALS],
    ulp_hist: [[u64; HIST_SLOTS]; HIST_COPIES],
    rel_hist: [[u64; HIST_SLOTS]; HIST_COPIES],
    worst: WorstList,
    heat: Option<HeatAccumulator>,
}

impl PassAcc {
    fn new(heat: Option<HeatAccumulator>) -> PassAcc {
        PassAcc {
            comparable: 0,
            unwritten: 0,
            non_finite: 0,
            non_comparable: 0,
            mismatches: 0,
            ulp_nan_mismatch: 0,
            max_ulp: 0,
            max_abs: 0.0,
            max_rel_plain: 0.0,
            max_rel: 0.0,
            sum_abs: [0.0; PARTIALS],
            sum_sq: [0.0; PARTIALS],
            sum_rel: [0.0; PARTIALS],
            small: 0,
            small_err: 0,
            normal: 0,
            normal_sum_rel: [0.0; PARTIALS],
            normal_max_rel: 0.0,
            normal_sum_sq: [0.0; PARTIALS],
            ulp_hist: [[0; HIST_SLOTS]; HIST_COPIES],
            rel_hist: [[0; HIST_SLOTS]; HIST_COPIES],
            worst: WorstList::new(),
            heat,
        }
    }

    /// The general path: element `j` of the chunk (flat index `first + j`).
    #[inline(always)]
    fn element<A: Lane, G: Lane>(
        &mut self,
        s: &PassSettings<'_>,
        first: usize,
        j: usize,
        ab: u64,
        eb: u64,
        gbits: u64,
    ) {
        let p = j % PARTIALS;
        let h = j % HIST_COPIES;
        if s.is_poison(ab) && !s.is_poison(eb) {
            if let Some(heat) = self.heat.as_mut() {
                heat.add(0.0);
            }
            self.unwritten += 1;
            self.mismatches += 1;
            if s.worst {
                self.worst.offer(Candidate {
                    flat: first + j,
                    severity: Severity::Unwritten,
                    abs_err: 0.0,
                    actual: A::value(ab),
                    golden: G::value(gbits),
                    rel_err: 0.0,
                    ulp: None,
                });
            }
            return;
        }
        let av = A::value(ab);
        let ev = A::value(eb);
        let gv = G::value(gbits);
        let a_nan = A::is_nan(ab);
        let e_nan = A::is_nan(eb);
        let non_finite = !av.is_finite() && ev.is_finite();
        self.non_finite += non_finite as u64;

        // ULP distance against `expected`, in the output dtype (None: NaN against a number).
        let ulp = if a_nan || e_nan {
            if a_nan && e_nan {
                self.ulp_hist[h][0] += 1;
                Some(0)
            } else {
                self.ulp_nan_mismatch += 1;
                None
            }
        } else {
            let d = ulp_distance::<A>(ab, eb);
            self.max_ulp = self.max_ulp.max(d);
            self.ulp_hist[h][ulp_bucket(d) & (HIST_SLOTS - 1)] += 1;
            Some(d)
        };

        let is_comparable = av.is_finite() && gv.is_finite();
        // The reference itself gives this infinity (its exact result overflowed the dtype)
        // and the target returns the same one: a match under every policy.
        let inf_match = ev.is_infinite() && av == ev;
        let ag = gv.abs();
        let (d, rel) = if is_comparable {
            let d = sat((av - gv).abs());
            let rel = sat(d / (ag + CANN_EPS));
            self.comparable += 1;
            self.max_abs = fmax(self.max_abs, d);
            if ag != 0.0 {
                self.max_rel_plain = fmax(self.max_rel_plain, sat(d / ag));
            }
            self.sum_abs[p] += d;
            self.sum_sq[p] += d * d;
            self.sum_rel[p] += rel;
            self.max_rel = fmax(self.max_rel, rel);
            self.rel_hist[h][rel_bucket(rel) & (HIST_SLOTS - 1)] += 1;
            if s.split_small {
                if ag < s.small {
                    self.small += 1;
                    self.small_err += (d > s.small_err) as u64;
                } else {
                    self.normal += 1;
                    self.normal_sum_rel[p] += rel;
                    self.normal_max_rel = fmax(self.normal_max_rel, rel);
                    self.normal_sum_sq[p] += d * d;
                }
            }
            (d, rel)
        } else {
            self.non_comparable += !inf_match as u64;
            (0.0, 0.0)
        };

        if let Some(heat) = self.heat.as_mut() {
            heat.add(d);
        }

        let rule_fails = match s.rule {
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
        let fails = (rule_fails && !inf_match) || non_finite;
        self.mismatches += fails as u64;

        if s.worst {
            if is_comparable {
                if d > self.worst.floor() {
                    self.worst.offer(Candidate {
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
                self.worst.offer(Candidate {
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

    /// The vectorised path for the block of [`BLOCK`] elements starting at element `j0` of the
    /// chunk (`act`, `exp`, `gold`: exactly that block). Returns false, having recorded
    /// nothing, when the block is not clean (a poison pattern in `actual`, or NaN/Inf on any
    /// side); the caller then runs it through [`PassAcc::element`].
    #[inline(always)]
    fn block<A: Lane, G: Lane>(
        &mut self,
        s: &PassSettings<'_>,
        first: usize,
        j0: usize,
        act: &[u8],
        exp: &[u8],
        gold: &[u8],
    ) -> bool {
        let (act, exp, gold) = (
            &act[..BLOCK * A::BYTES],
            &exp[..BLOCK * A::BYTES],
            &gold[..BLOCK * G::BYTES],
        );
        let mut ab = [0u64; BLOCK];
        let mut eb = [0u64; BLOCK];
        let mut av = [0f64; BLOCK];
        let mut gv = [0f64; BLOCK];
        let mut bad = 0u32;
        for i in 0..BLOCK {
            let (a, e, g) = (load::<A>(act, i), load::<A>(exp, i), load::<G>(gold, i));
            ab[i] = a;
            eb[i] = e;
            av[i] = A::value(a);
            gv[i] = G::value(g);
            bad |= !(finite(av[i]) & finite(A::value(e)) & finite(gv[i])) as u32;
        }
        if s.check_poison {
            for &p in std::iter::once(&s.p0).chain(s.p_rest) {
                for &a in &ab {
                    bad |= (a == p) as u32;
                }
            }
        }
        if bad != 0 {
            return false;
        }

        // Per-element figures.
        let mut ag = [0f64; BLOCK];
        let mut d = [0f64; BLOCK];
        let mut rel = [0f64; BLOCK];
        let mut du = [0u64; BLOCK];
        for i in 0..BLOCK {
            ag[i] = gv[i].abs();
            d[i] = sat((av[i] - gv[i]).abs());
            rel[i] = sat(d[i] / (ag[i] + CANN_EPS));
            du[i] = ulp_distance::<A>(ab[i], eb[i]);
        }

        // Sums (element j0 + i into partial i % PARTIALS: BLOCK is a multiple of PARTIALS and
        // j0 of BLOCK) and maxima, in PARTIALS lanes.
        let mut m_abs = [0f64; PARTIALS];
        let mut m_rel = [0f64; PARTIALS];
        let mut m_plain = [0f64; PARTIALS];
        for c in 0..BLOCK / PARTIALS {
            for k in 0..PARTIALS {
                let i = c * PARTIALS + k;
                self.sum_abs[k] += d[i];
                self.sum_sq[k] += d[i] * d[i];
                self.sum_rel[k] += rel[i];
                m_abs[k] = fmax(m_abs[k], d[i]);
                m_rel[k] = fmax(m_rel[k], rel[i]);
                let q = if ag[i] != 0.0 { sat(d[i] / ag[i]) } else { 0.0 };
                m_plain[k] = fmax(m_plain[k], q);
            }
        }
        let block_max_abs = max_lanes(m_abs);
        self.max_abs = fmax(self.max_abs, block_max_abs);
        self.max_rel = fmax(self.max_rel, max_lanes(m_rel));
        self.max_rel_plain = fmax(self.max_rel_plain, max_lanes(m_plain));
        self.comparable += BLOCK as u64;

        // ULP figures: buckets 0 and 1 counted at once, larger distances one by one.
        let (mut n0, mut n1, mut max_ulp) = (0u64, 0u64, 0u64);
        for &u in &du {
            n0 += (u == 0) as u64;
            n1 += (u == 1) as u64;
            max_ulp = max_ulp.max(u);
        }
        self.max_ulp = self.max_ulp.max(max_ulp);
        self.ulp_hist[0][0] += n0;
        self.ulp_hist[0][1] += n1;
        if n0 + n1 < BLOCK as u64 {
            for (i, &u) in du.iter().enumerate() {
                if u > 1 {
                    self.ulp_hist[i % HIST_COPIES][ulp_bucket(u) & (HIST_SLOTS - 1)] += 1;
                }
            }
        }

        // Relative-error histogram: buckets computed together, then counted.
        let mut rb = [0u32; BLOCK];
        for i in 0..BLOCK {
            rb[i] = rel_bucket(rel[i]) as u32;
        }
        for c in 0..BLOCK / HIST_COPIES {
            for k in 0..HIST_COPIES {
                self.rel_hist[k][rb[c * HIST_COPIES + k] as usize & (HIST_SLOTS - 1)] += 1;
            }
        }

        // Small-value split.
        if s.split_small {
            let split = SmallSplit::of(&ag, &d, &rel, s.small, s.small_err);
            self.small += split.small;
            self.small_err += split.small_err;
            self.normal += BLOCK as u64 - split.small;
            add_lanes(&mut self.normal_sum_rel, &split.normal_rel);
            add_lanes(&mut self.normal_sum_sq, &split.normal_sq);
            self.normal_max_rel = fmax(self.normal_max_rel, max_of_block(&split.normal_rel));
        }

        // The rule (every element is comparable and finite here).
        let mut fails = 0u64;
        match s.rule {
            ElementRule::Bitwise { .. } => {
                for i in 0..BLOCK {
                    fails += (ab[i] != eb[i]) as u64;
                }
            }
            ElementRule::Ulp { max } => {
                for &u in &du {
                    fails += (u > max) as u64;
                }
            }
            ElementRule::Allclose { atol, rtol } => {
                for i in 0..BLOCK {
                    fails += ((d[i] > atol) & (d[i] / (ag[i] + FLASHINFER_EPS) > rtol)) as u64;
                }
            }
            ElementRule::RelAbove { limit } => {
                for &r in &rel {
                    fails += (r > limit) as u64;
                }
            }
            ElementRule::Mixed { t } => {
                for i in 0..BLOCK {
                    fails += (d[i] > t + t * ag[i]) as u64;
                }
            }
            ElementRule::CannDouble {
                rel_limit,
                small,
                small_err,
            } => {
                for i in 0..BLOCK {
                    let f = if ag[i] < small {
                        d[i] > small_err
                    } else {
                        rel[i] > rel_limit
                    };
                    fails += f as u64;
                }
            }
            ElementRule::AbsAbove { limit } => {
                for &x in &d {
                    fails += (x > limit) as u64;
                }
            }
        }
        self.mismatches += fails;

        if let Some(heat) = self.heat.as_mut() {
            heat.add_slice(&d);
        }

        // Worst elements: the same offers, in the same order, as the general path makes.
        if s.worst && block_max_abs > self.worst.floor() {
            for i in 0..BLOCK {
                if d[i] > self.worst.floor() {
                    self.worst.offer(Candidate {
                        flat: first + j0 + i,
                        severity: Severity::Numeric,
                        abs_err: d[i],
                        actual: av[i],
                        golden: gv[i],
                        rel_err: rel[i],
                        ulp: Some(du[i]),
                    });
                }
            }
        }
        true
    }

    fn into_stats(self, numel: usize) -> PassStats {
        let mut st = PassStats::new(0);
        st.numel = numel as u64;
        st.comparable = self.comparable;
        st.unwritten = self.unwritten;
        st.non_finite = self.non_finite;
        st.non_comparable = self.non_comparable;
        st.mismatches = self.mismatches;
        st.max_abs = self.max_abs;
        st.max_rel_plain = self.max_rel_plain;
        st.sum_abs = combine(self.sum_abs);
        st.sum_sq = combine(self.sum_sq);
        st.sum_rel = combine(self.sum_rel);
        st.max_rel = self.max_rel;
        st.max_ulp = self.max_ulp;
        st.ulp_nan_mismatch = self.ulp_nan_mismatch;
        for copy in 0..HIST_COPIES {
            for (t, c) in st.ulp_hist.iter_mut().zip(&self.ulp_hist[copy]) {
                *t += c;
            }
            for (t, c) in st.rel_hist.iter_mut().zip(&self.rel_hist[copy]) {
                *t += c;
            }
        }
        st.small = self.small;
        st.small_err = self.small_err;
        st.normal = self.normal;
        st.normal_sum_rel = combine(self.normal_sum_rel);
        st.normal_max_rel = self.normal_max_rel;
        st.normal_sum_sq = combine(self.normal_sum_sq);
        st.worst = self.worst;
        if let Some(h) = self.heat {
            st.heat = h.finish();
        }
        st
    }
}

/// One chunk of a pass: elements `first..first + n` of the three byte streams, where `n` is
/// the number of whole elements in the shortest of them.
pub(crate) fn pass_chunk<A: Lane, G: Lane>(
    act: &[u8],
    exp: &[u8],
    gold: &[u8],
    first: usize,
    cfg: &PassConfig<'_>,
    path: KernelPath,
) -> PassStats {
    #[cfg(target_arch = "x86_64")]
    {
        if path == KernelPath::Auto && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { pass_chunk_avx2::<A, G>(act, exp, gold, first, cfg) };
        }
    }
    pass_chunk_portable::<A, G>(act, exp, gold, first, cfg, path != KernelPath::PerElement)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn pass_chunk_avx2<A: Lane, G: Lane>(
    act: &[u8],
    exp: &[u8],
    gold: &[u8],
    first: usize,
    cfg: &PassConfig<'_>,
) -> PassStats {
    pass_chunk_portable::<A, G>(act, exp, gold, first, cfg, true)
}

#[inline(always)]
fn pass_chunk_portable<A: Lane, G: Lane>(
    act: &[u8],
    exp: &[u8],
    gold: &[u8],
    first: usize,
    cfg: &PassConfig<'_>,
    blocks: bool,
) -> PassStats {
    let s = PassSettings::of(cfg);
    let mut acc = PassAcc::new(cfg.heat.map(|g| HeatAccumulator::new(g, first)));
    let n = (act.len() / A::BYTES)
        .min(exp.len() / A::BYTES)
        .min(gold.len() / G::BYTES);
    let whole = if blocks { n / BLOCK * BLOCK } else { 0 };
    for j0 in (0..whole).step_by(BLOCK) {
        let (a, e, g) = (
            &act[j0 * A::BYTES..(j0 + BLOCK) * A::BYTES],
            &exp[j0 * A::BYTES..(j0 + BLOCK) * A::BYTES],
            &gold[j0 * G::BYTES..(j0 + BLOCK) * G::BYTES],
        );
        if !acc.block::<A, G>(&s, first, j0, a, e, g) {
            for i in 0..BLOCK {
                let (ab, eb, gb) = (load::<A>(a, i), load::<A>(e, i), load::<G>(g, i));
                acc.element::<A, G>(&s, first, j0 + i, ab, eb, gb);
            }
        }
    }
    for j in whole..n {
        let (ab, eb, gb) = (load::<A>(act, j), load::<A>(exp, j), load::<G>(gold, j));
        acc.element::<A, G>(&s, first, j, ab, eb, gb);
    }
    acc.into_stats(n)
}

/// The running figures of one chunk of the baseline pass.
struct BaselineAcc {
    comparable: u64,
    /// Elements where the baseline (the reference) is infinite: matched by a target that
    /// returns the same infinity, so not counted as non-comparable.
    infinite: u64,
    max_abs: f64,
    sum_abs: [f64; PARTIALS],
    small_err: u64,
    normal: u64,
    normal_sum_rel: [f64; PARTIALS],
    normal_max_rel: f64,
    normal_sum_sq: [f64; PARTIALS],
}

impl BaselineAcc {
    /// The general path: element `j` of the chunk.
    #[inline(always)]
    fn element(&mut self, small_value: Option<(f64, f64)>, j: usize, bv: f64, gv: f64) {
        if !(bv.is_finite() && gv.is_finite()) {
            self.infinite += bv.is_infinite() as u64;
            return;
        }
        let p = j % PARTIALS;
        self.comparable += 1;
        let d = sat((bv - gv).abs());
        self.max_abs = fmax(self.max_abs, d);
        self.sum_abs[p] += d;
        if let Some((small, small_err)) = small_value {
            let ag = gv.abs();
            if ag < small {
                self.small_err += (d > small_err) as u64;
            } else {
                let rel = sat(d / (ag + CANN_EPS));
                self.normal += 1;
                self.normal_sum_rel[p] += rel;
                self.normal_max_rel = fmax(self.normal_max_rel, rel);
                self.normal_sum_sq[p] += d * d;
            }
        }
    }

    /// The vectorised path for one block (see [`PassAcc::block`]); false, having recorded
    /// nothing, when some value is NaN or infinite.
    #[inline(always)]
    fn block<A: Lane, G: Lane>(
        &mut self,
        small_value: Option<(f64, f64)>,
        base: &[u8],
        gold: &[u8],
    ) -> bool {
        match small_value {
            Some((small, small_err)) => self.block_as::<A, G, true>(small, small_err, base, gold),
            None => self.block_as::<A, G, false>(0.0, 0.0, base, gold),
        }
    }

    /// [`BaselineAcc::block`] with or without the small-value split. One pass over the block
    /// in lanes of [`PARTIALS`] elements, into copies of the running sums that are kept only
    /// when the block turns out clean (so each sum still adds the same terms in the same
    /// order as the per-element path).
    #[inline(always)]
    fn block_as<A: Lane, G: Lane, const SPLIT: bool>(
        &mut self,
        small: f64,
        small_err: f64,
        base: &[u8],
        gold: &[u8],
    ) -> bool {
        let (base, gold) = (&base[..BLOCK * A::BYTES], &gold[..BLOCK * G::BYTES]);
        let mut sum_abs = self.sum_abs;
        let mut normal_sum_rel = self.normal_sum_rel;
        let mut normal_sum_sq = self.normal_sum_sq;
        let mut m_abs = [0f64; PARTIALS];
        let mut m_normal = [0f64; PARTIALS];
        let mut n_small = [0u64; PARTIALS];
        let mut n_small_err = [0u64; PARTIALS];
        let mut bad = [0u64; PARTIALS];
        for c in 0..BLOCK / PARTIALS {
            for k in 0..PARTIALS {
                let i = c * PARTIALS + k;
                let bv = A::value(load::<A>(base, i));
                let gv = G::value(load::<G>(gold, i));
                bad[k] |= !(finite(bv) & finite(gv)) as u64;
                let d = sat((bv - gv).abs());
                sum_abs[k] += d;
                m_abs[k] = fmax(m_abs[k], d);
                if SPLIT {
                    let ag = gv.abs();
                    let is_small = ag < small;
                    n_small[k] += is_small as u64;
                    n_small_err[k] += (is_small & (d > small_err)) as u64;
                    let rel = sat(d / (ag + CANN_EPS));
                    let (r, sq) = if is_small { (0.0, 0.0) } else { (rel, d * d) };
                    normal_sum_rel[k] += r;
                    normal_sum_sq[k] += sq;
                    m_normal[k] = fmax(m_normal[k], r);
                }
            }
        }
        if bad.iter().any(|&b| b != 0) {
            return false;
        }
        self.sum_abs = sum_abs;
        self.max_abs = fmax(self.max_abs, max_lanes(m_abs));
        self.comparable += BLOCK as u64;
        if SPLIT {
            let n_small: u64 = n_small.iter().sum();
            self.small_err += n_small_err.iter().sum::<u64>();
            self.normal += BLOCK as u64 - n_small;
            self.normal_sum_rel = normal_sum_rel;
            self.normal_sum_sq = normal_sum_sq;
            self.normal_max_rel = fmax(self.normal_max_rel, max_lanes(m_normal));
        }
        true
    }
}

/// One chunk of the baseline pass: only the figures the baseline policies read (comparable
/// and non-comparable counts, max and sum of |b-g|, the small-value split).
pub(crate) fn baseline_chunk<A: Lane, G: Lane>(
    base: &[u8],
    gold: &[u8],
    small_value: Option<(f64, f64)>,
    path: KernelPath,
) -> PassStats {
    #[cfg(target_arch = "x86_64")]
    {
        if path == KernelPath::Auto && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { baseline_chunk_avx2::<A, G>(base, gold, small_value) };
        }
    }
    baseline_chunk_portable::<A, G>(base, gold, small_value, path != KernelPath::PerElement)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn baseline_chunk_avx2<A: Lane, G: Lane>(
    base: &[u8],
    gold: &[u8],
    small_value: Option<(f64, f64)>,
) -> PassStats {
    baseline_chunk_portable::<A, G>(base, gold, small_value, true)
}

#[inline(always)]
fn baseline_chunk_portable<A: Lane, G: Lane>(
    base: &[u8],
    gold: &[u8],
    small_value: Option<(f64, f64)>,
    blocks: bool,
) -> PassStats {
    let mut acc = BaselineAcc {
        comparable: 0,
        infinite: 0,
        max_abs: 0.0,
        sum_abs: [0.0; PARTIALS],
        small_err: 0,
        normal: 0,
        normal_sum_rel: [0.0; PARTIALS],
        normal_max_rel: 0.0,
        normal_sum_sq: [0.0; PARTIALS],
    };
    let n = (base.len() / A::BYTES).min(gold.len() / G::BYTES);
    let whole = if blocks { n / BLOCK * BLOCK } else { 0 };
    for j0 in (0..whole).step_by(BLOCK) {
        let (b, g) = (
            &base[j0 * A::BYTES..(j0 + BLOCK) * A::BYTES],
            &gold[j0 * G::BYTES..(j0 + BLOCK) * G::BYTES],
        );
        if !acc.block::<A, G>(small_value, b, g) {
            for i in 0..BLOCK {
                let (bv, gv) = (A::value(load::<A>(b, i)), G::value(load::<G>(g, i)));
                acc.element(small_value, j0 + i, bv, gv);
            }
        }
    }
    for j in whole..n {
        let (bv, gv) = (A::value(load::<A>(base, j)), G::value(load::<G>(gold, j)));
        acc.element(small_value, j, bv, gv);
    }

    let split_small = small_value.is_some();
    let mut st = PassStats::new(0);
    st.numel = n as u64;
    st.comparable = acc.comparable;
    st.non_comparable = n as u64 - acc.comparable - acc.infinite;
    st.max_abs = acc.max_abs;
    st.sum_abs = combine(acc.sum_abs);
    st.small = if split_small {
        acc.comparable - acc.normal
    } else {
        0
    };
    st.small_err = acc.small_err;
    st.normal = if split_small { acc.normal } else { 0 };
    st.normal_sum_rel = combine(acc.normal_sum_rel);
    st.normal_max_rel = acc.normal_max_rel;
    st.normal_sum_sq = combine(acc.normal_sum_sq);
    st
}

#[cfg(test)]
mod tests {
    //! The kernels against a straightforward per-element implementation of every figure, on
    //! random data full of the awkward cases (NaN, Inf, poison, subnormals, zeros, values
    //! whose difference overflows), and the kernel paths against each other bit for bit.

    use super::*;
    use crate::verdict::heatmap::HeatGeometry;
    use crate::verdict::lane::{Bf16Lane, F16Lane, F32Lane, F64Lane, I32Lane, I64Lane, U8Lane};
    use crate::verdict::metrics::{run_baseline_pass_on, run_pass_on, CHUNK};
    use conform_reference::ops::{ElemType, Tensor};
    use conform_reference::parallel::Threads;

    /// SplitMix64: the same data everywhere.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Everything about an element type the generator needs.
    struct Kind {
        dtype: ElemType,
        bytes: usize,
        float: bool,
        value: fn(u64) -> f64,
        /// Codes worth having: NaNs (quiet, signalling, negative), infinities, extremes.
        specials: &'static [u64],
        poison: &'static [u64],
    }

    fn kind(dtype: ElemType) -> Kind {
        match dtype {
            ElemType::Bf16 => Kind {
                dtype,
                bytes: 2,
                float: true,
                value: Bf16Lane::value,
                specials: &[
                    0x7FC0, 0xFFC1, 0x7F81, 0x7F80, 0xFF80, 0x7F7F, 0xFF7F, 0x0001,
                ],
                poison: &[0x7FA5, 0xFFA5],
            },
            ElemType::F16 => Kind {
                dtype,
                bytes: 2,
                float: true,
                value: F16Lane::value,
                specials: &[
                    0x7E00, 0xFDA5, 0x7C01, 0x7C00, 0xFC00, 0x7BFF, 0xFBFF, 0x0001,
                ],
                poison: &[0x7DA5, 0xFDA6],
            },
            ElemType::F32 => Kind {
                dtype,
                bytes: 4,
                float: true,
                value: F32Lane::value,
                specials: &[
                    0x7FC0_0000,
                    0xFFC0_0001,
                    0x7F80_0001,
                    0x7F80_0000,
                    0xFF80_0000,
                    0x7F7F_FFFF,
                    0xFF7F_FFFF,
                    0x0000_0001,
                ],
                poison: &[0x7FA5_A5A5],
            },
            ElemType::F64 => Kind {
                dtype,
                bytes: 8,
                float: true,
                value: F64Lane::value,
                specials: &[
                    0x7FF8_0000_0000_0000,
                    0xFFF8_0000_0000_0001,
                    0x7FF0_0000_0000_0001,
                    0x7FF0_0000_0000_0000,
                    0xFFF0_0000_0000_0000,
                    0x7FEF_FFFF_FFFF_FFFF,
                    0xFFEF_FFFF_FFFF_FFFF,
                    0x0000_0000_0000_0001,
                ],
                poison: &[0x7FF4_A5A5_A5A5_A5A5, 0xFFF4_A5A5_A5A5_A5A5],
            },
            ElemType::U8 => Kind {
                dtype,
                bytes: 1,
                float: false,
                value: U8Lane::value,
                specials: &[0, 255],
                poison: &[0xA5],
            },
            ElemType::I32 => Kind {
                dtype,
                bytes: 4,
                float: false,
                value: I32Lane::value,
                specials: &[0x8000_0000, 0x7FFF_FFFF, 0xFFFF_FFFF],
                poison: &[0xA5A5_A5A5],
            },
            ElemType::I64 => Kind {
                dtype,
                bytes: 8,
                float: false,
                value: I64Lane::value,
                specials: &[1 << 63, u64::MAX >> 1, u64::MAX, (1 << 53) + 1],
                poison: &[0xA5A5_A5A5_A5A5_A5A5],
            },
        }
    }

    fn mask(bytes: usize) -> u64 {
        if bytes == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * bytes)) - 1
        }
    }

    /// A random code of the type: any bit pattern for integers; for floats a random sign,
    /// exponent and fraction, often with a zero exponent (subnormals) or zero fraction.
    fn random_code(k: &Kind, rng: &mut Rng) -> u64 {
        let r = rng.next() & mask(k.bytes);
        if !k.float {
            return match rng.below(4) {
                0 => r % 7,
                1 => r % 300,
                _ => r,
            };
        }
        let frac_bits = match k.bytes {
            2 if k.dtype == ElemType::Bf16 => 7,
            2 => 10,
            4 => 23,
            _ => 52,
        };
        match rng.below(8) {
            0 => r & (((1u64 << frac_bits) - 1) | (1 << (8 * k.bytes - 1))), // subnormal or zero
            1 => r & (1 << (8 * k.bytes - 1)),                               // +-0
            _ => r,
        }
    }

    /// actual, expected and golden (of the same type or F64) for `n` elements. Blocks of 64 are
    /// either clean (finite everywhere, no poison) or dirty (specials sprinkled in).
    fn data(k: &Kind, n: usize, golden_f64: bool, seed: u64) -> (Tensor, Tensor, Tensor) {
        let mut rng = Rng(seed);
        let (mut act, mut exp, mut gold) = (Vec::new(), Vec::new(), Vec::new());
        let finite = |c: u64| (k.value)(c).is_finite();
        let mut dirty = false;
        for j in 0..n {
            if j % 64 == 0 {
                dirty = rng.below(3) == 0;
            }
            let mut e = random_code(k, &mut rng);
            while !finite(e) {
                e = random_code(k, &mut rng);
            }
            let mut a = match rng.below(8) {
                0 | 1 => e,
                2 => e.wrapping_add(1) & mask(k.bytes),
                3 => e.wrapping_sub(rng.below(4)) & mask(k.bytes),
                4 => e.wrapping_add(rng.below(3000)) & mask(k.bytes),
                5 => e ^ (1 << (8 * k.bytes - 1)), // sign flipped
                _ => random_code(k, &mut rng),
            };
            if !finite(a) || k.poison.contains(&a) {
                a = e;
            }
            let ev = (k.value)(e);
            let mut g = if golden_f64 {
                let v = match rng.below(5) {
                    0 => ev,
                    1 => (k.value)(a),
                    2 => ev * (1.0 + (rng.below(2001) as f64 - 1000.0) * 1e-6),
                    3 => ev + (rng.below(7) as f64 - 3.0) * 1e-300,
                    _ => f64::from_bits(rng.next() & 0x8FFF_FFFF_FFFF_FFFF),
                };
                v.to_bits()
            } else if rng.below(3) == 0 {
                a
            } else {
                e
            };
            if dirty {
                let pick = |rng: &mut Rng| k.specials[rng.below(k.specials.len() as u64) as usize];
                match rng.below(24) {
                    0 | 1 => a = k.poison[rng.below(k.poison.len() as u64) as usize],
                    2 => {
                        a = k.poison[0];
                        e = a; // poison expected too: not unwritten
                    }
                    3 | 4 => a = pick(&mut rng),
                    5 | 6 => e = pick(&mut rng),
                    7 => {
                        a = pick(&mut rng);
                        e = a;
                    }
                    8 | 9 => {
                        g = if golden_f64 {
                            [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, f64::MAX][j % 4].to_bits()
                        } else {
                            pick(&mut rng)
                        }
                    }
                    _ => {}
                }
            }
            act.extend_from_slice(&a.to_le_bytes()[..k.bytes]);
            exp.extend_from_slice(&e.to_le_bytes()[..k.bytes]);
            if golden_f64 {
                gold.extend_from_slice(&g.to_le_bytes());
            } else {
                gold.extend_from_slice(&g.to_le_bytes()[..k.bytes]);
            }
        }
        let t = |dtype, data| Tensor::new(dtype, vec![n], data).unwrap();
        let gdtype = if golden_f64 { ElemType::F64 } else { k.dtype };
        (t(k.dtype, act), t(k.dtype, exp), t(gdtype, gold))
    }

    /// Every figure of a pass, written out the plain way: one element at a time over the
    /// whole tensor, sums in element order, every candidate offered to the worst list, the heat
    /// cell of each element by division.
    fn reference_pass<A: Lane, G: Lane>(
        act: &[u8],
        exp: &[u8],
        gold: &[u8],
        cfg: &PassConfig<'_>,
    ) -> PassStats {
        let n = act.len() / A::BYTES;
        let mut st = PassStats::new(cfg.heat.map_or(0, HeatGeometry::cells));
        st.numel = n as u64;
        for j in 0..n {
            let ab = load::<A>(act, j);
            let eb = load::<A>(exp, j);
            let gb = load::<G>(gold, j);
            let (av, ev, gv) = (A::value(ab), A::value(eb), G::value(gb));
            let heat_cell = cfg.heat.map(|h| {
                let s = (j / h.row_stride) % h.row_len;
                let c = (j / h.col_stride) % h.col_len;
                (s / h.row_bucket) * h.cols + c / h.col_bucket
            });
            let poisoned = |b: u64| cfg.poison.contains(&b);
            if poisoned(ab) && !poisoned(eb) {
                st.unwritten += 1;
                st.mismatches += 1;
                st.worst.offer(Candidate {
                    flat: j,
                    severity: Severity::Unwritten,
                    abs_err: 0.0,
                    actual: av,
                    golden: gv,
                    rel_err: 0.0,
                    ulp: None,
                });
                continue;
            }
            let non_finite = !av.is_finite() && ev.is_finite();
            st.non_finite += non_finite as u64;
            let ulp = match (A::is_nan(ab), A::is_nan(eb)) {
                (true, true) => Some(0),
                (false, false) => Some(A::ord(ab).abs_diff(A::ord(eb))),
                _ => None,
            };
            match ulp {
                Some(u) => {
                    st.max_ulp = st.max_ulp.max(u);
                    st.ulp_hist[ulp_bucket(u)] += 1;
                }
                None => st.ulp_nan_mismatch += 1,
            }
            let comparable = av.is_finite() && gv.is_finite();
            let inf_match = ev.is_infinite() && av == ev;
            let ag = gv.abs();
            let (d, rel) = if comparable {
                let d = sat((av - gv).abs());
                (d, sat(d / (ag + CANN_EPS)))
            } else {
                (0.0, 0.0)
            };
            if comparable {
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
            } else if !inf_match {
                st.non_comparable += 1;
            }
            if let Some(c) = heat_cell {
                st.heat[c] = st.heat[c].max(d);
            }
            let rule_fails = match cfg.rule {
                ElementRule::Bitwise { nan_bits } => {
                    ab != eb && (nan_bits || !(A::is_nan(ab) && A::is_nan(eb)))
                }
                ElementRule::Ulp { max } => ulp.is_none_or(|u| u > max),
                ElementRule::Allclose { atol, rtol } => {
                    !comparable || (d > atol && d / (ag + FLASHINFER_EPS) > rtol)
                }
                ElementRule::RelAbove { limit } => !comparable || rel > limit,
                ElementRule::Mixed { t } => !comparable || d > t + t * ag,
                ElementRule::CannDouble {
                    rel_limit,
                    small,
                    small_err,
                } => {
                    !comparable || (ag < small && d > small_err) || (ag >= small && rel > rel_limit)
                }
                ElementRule::AbsAbove { limit } => !comparable || d > limit,
            };
            let fails = (rule_fails && !inf_match) || non_finite;
            st.mismatches += fails as u64;
            if comparable || fails {
                st.worst.offer(Candidate {
                    flat: j,
                    severity: if comparable {
                        Severity::Numeric
                    } else {
                        Severity::NonComparable
                    },
                    abs_err: d,
                    actual: av,
                    golden: gv,
                    rel_err: rel,
                    ulp,
                });
            }
        }
        if !cfg.worst {
            st.worst = WorstList::new();
        }
        st
    }

    /// Every figure except the sums, floats as bits (NaN-safe, -0 distinct from +0).
    fn exact_figures(st: &PassStats) -> String {
        let worst: Vec<String> = st
            .worst
            .clone()
            .into_vec()
            .iter()
            .map(|c| {
                format!(
                    "{}:{:?}:{:x}:{:x}:{:x}:{:x}:{:?}",
                    c.flat,
                    c.severity,
                    c.abs_err.to_bits(),
                    c.actual.to_bits(),
                    c.golden.to_bits(),
                    c.rel_err.to_bits(),
                    c.ulp
                )
            })
            .collect();
        let heat: Vec<u64> = st.heat.iter().map(|v| v.to_bits()).collect();
        format!(
            "numel {} comparable {} unwritten {} non_finite {} non_comparable {} mismatches {} \
             max_abs {:x} max_rel_plain {:x} max_rel {:x} max_ulp {} ulp_nan {} ulp_hist {:?} \
             rel_hist {:?} small {} small_err {} normal {} normal_max_rel {:x} worst {:?} heat {:?}",
            st.numel,
            st.comparable,
            st.unwritten,
            st.non_finite,
            st.non_comparable,
            st.mismatches,
            st.max_abs.to_bits(),
            st.max_rel_plain.to_bits(),
            st.max_rel.to_bits(),
            st.max_ulp,
            st.ulp_nan_mismatch,
            st.ulp_hist,
            st.rel_hist,
            st.small,
            st.small_err,
            st.normal,
            st.normal_max_rel.to_bits(),
            worst,
            heat
        )
    }

    fn sums(st: &PassStats) -> [f64; 5] {
        [
            st.sum_abs,
            st.sum_sq,
            st.sum_rel,
            st.normal_sum_rel,
            st.normal_sum_sq,
        ]
    }

    /// Every figure, sums included, floats as bits.
    fn all_figures(st: &PassStats) -> String {
        let s: Vec<u64> = sums(st).iter().map(|v| v.to_bits()).collect();
        format!("{} sums {s:x?}", exact_figures(st))
    }

    /// Sums that differ only in the order of additions of non-negative terms.
    fn sums_agree(got: &PassStats, want: &PassStats) -> bool {
        sums(got).iter().zip(sums(want)).all(|(&g, w)| {
            g == w || (g.is_finite() && w.is_finite() && (g - w).abs() <= 1e-12 * w.abs())
        })
    }

    fn rules() -> Vec<ElementRule> {
        vec![
            ElementRule::Bitwise { nan_bits: false },
            ElementRule::Bitwise { nan_bits: true },
            ElementRule::Ulp { max: 0 },
            ElementRule::Ulp { max: 3 },
            ElementRule::Allclose {
                atol: 1e-3,
                rtol: 1e-2,
            },
            ElementRule::RelAbove { limit: 0.01 },
            ElementRule::Mixed { t: 1.0 / 128.0 },
            ElementRule::CannDouble {
                rel_limit: 0.01,
                small: 1.0 / 64.0,
                small_err: 1.0 / 4096.0,
            },
            ElementRule::AbsAbove { limit: 0.5 },
        ]
    }

    fn reference_for(a: &Tensor, e: &Tensor, g: &Tensor, cfg: &PassConfig<'_>) -> PassStats {
        let f64g = g.dtype == ElemType::F64;
        macro_rules! run {
            ($l:ty) => {
                if f64g {
                    reference_pass::<$l, F64Lane>(&a.data, &e.data, &g.data, cfg)
                } else {
                    reference_pass::<$l, $l>(&a.data, &e.data, &g.data, cfg)
                }
            };
        }
        match a.dtype {
            ElemType::Bf16 => run!(Bf16Lane),
            ElemType::F16 => run!(F16Lane),
            ElemType::F32 => run!(F32Lane),
            ElemType::F64 => run!(F64Lane),
            ElemType::U8 => run!(U8Lane),
            ElemType::I32 => run!(I32Lane),
            ElemType::I64 => run!(I64Lane),
        }
    }

    /// How many whole blocks the vectorised path takes (clean) and leaves (dirty).
    fn block_kinds(k: &Kind, a: &Tensor, e: &Tensor, g: &Tensor, poison: &[u64]) -> (usize, usize) {
        let code = |t: &Tensor, bytes: usize, j: usize| {
            let mut b = [0u8; 8];
            b[..bytes].copy_from_slice(&t.data[j * bytes..(j + 1) * bytes]);
            u64::from_le_bytes(b)
        };
        let gvalue = |j: usize| {
            if g.dtype == ElemType::F64 {
                f64::from_bits(code(g, 8, j))
            } else {
                (k.value)(code(g, k.bytes, j))
            }
        };
        let whole = a.numel() / BLOCK;
        let clean = (0..whole)
            .filter(|b| {
                (b * BLOCK..(b + 1) * BLOCK).all(|j| {
                    let (ac, ec) = (code(a, k.bytes, j), code(e, k.bytes, j));
                    (k.value)(ac).is_finite()
                        && (k.value)(ec).is_finite()
                        && gvalue(j).is_finite()
                        && !poison.contains(&ac)
                })
            })
            .count();
        (clean, whole - clean)
    }

    const PATHS: [KernelPath; 3] = [
        KernelPath::Auto,
        KernelPath::Portable,
        KernelPath::PerElement,
    ];

    #[test]
    fn every_path_gives_the_reference_figures_for_every_rule_and_lane() {
        // Axes with s and n: runs of 5 elements per heat cell, so runs straddle blocks.
        let shape = [2usize, 167, 3, 5];
        let axes: Vec<String> = ["b", "s", "n", "d"].iter().map(|s| s.to_string()).collect();
        let n: usize = shape.iter().product();
        assert!(!n.is_multiple_of(BLOCK));
        let heat = HeatGeometry::for_axes(&shape, &axes).unwrap();
        let dtypes = [
            ElemType::Bf16,
            ElemType::F16,
            ElemType::F32,
            ElemType::F64,
            ElemType::U8,
            ElemType::I32,
            ElemType::I64,
        ];
        let mut clean_blocks_seen = 0;
        for (di, &dtype) in dtypes.iter().enumerate() {
            let k = kind(dtype);
            for golden_f64 in [false, true] {
                let (a, e, g) = data(&k, n, golden_f64, 17 + di as u64 * 2 + golden_f64 as u64);
                for (ri, rule) in rules().into_iter().enumerate() {
                    // Vary the optional parts with the rule.
                    let poison = match ri % 3 {
                        0 => &k.poison[..1],
                        1 => k.poison,
                        _ => &[][..],
                    };
                    let cfg = PassConfig {
                        rule,
                        poison,
                        small_value: (ri % 2 == 0).then_some((1.0 / 64.0, 1.0 / 4096.0)),
                        heat: (ri % 4 != 3).then_some(&heat),
                        worst: ri % 5 != 4,
                    };
                    let want = reference_for(&a, &e, &g, &cfg);
                    let mut first: Option<String> = None;
                    for path in PATHS {
                        let got = run_pass_on(&a, &e, &g, &cfg, Threads(1), path);
                        let what = format!("{dtype:?} golden_f64 {golden_f64} {rule:?} {path:?}");
                        assert_eq!(exact_figures(&got), exact_figures(&want), "{what}");
                        assert!(
                            sums_agree(&got, &want),
                            "{what}: {:?} vs {:?}",
                            sums(&got),
                            sums(&want)
                        );
                        // The paths agree bit for bit, sums included.
                        let all = all_figures(&got);
                        match &first {
                            None => first = Some(all),
                            Some(f) => assert_eq!(&all, f, "{what}"),
                        }
                    }
                    // Some elements of every kind were there to judge.
                    assert!(want.comparable > 0, "{dtype:?}");
                    if k.float || golden_f64 {
                        assert!(want.non_comparable > 0, "{dtype:?}");
                    }
                    if !poison.is_empty() {
                        assert!(want.unwritten > 0, "{dtype:?}");
                    }
                    let (clean, dirty) = block_kinds(&k, &a, &e, &g, poison);
                    let can_be_dirty = k.float || golden_f64 || !poison.is_empty();
                    assert!(
                        clean >= 10 && (dirty >= 10 || !can_be_dirty),
                        "{dtype:?}: {clean} clean, {dirty} dirty"
                    );
                    clean_blocks_seen += clean;
                }
            }
        }
        assert!(clean_blocks_seen > 0);
    }

    #[test]
    fn paths_and_thread_counts_agree_bit_for_bit_across_chunks() {
        let n = 2 * CHUNK + 1000 + 13;
        let k = kind(ElemType::Bf16);
        let (a, e, g) = data(&k, n, true, 99);
        let shape = [1usize, n / 13, 1, 13];
        let axes: Vec<String> = ["b", "s", "n", "d"].iter().map(|s| s.to_string()).collect();
        let heat = HeatGeometry::for_axes(&shape, &axes).unwrap();
        let cfg = PassConfig {
            rule: ElementRule::CannDouble {
                rel_limit: 0.01,
                small: 1.0 / 256.0,
                small_err: 1.0 / 65536.0,
            },
            poison: &k.poison[..1],
            small_value: Some((1.0 / 256.0, 1.0 / 65536.0)),
            heat: Some(&heat),
            worst: true,
        };
        let one = all_figures(&run_pass_on(&a, &e, &g, &cfg, Threads(1), KernelPath::Auto));
        for path in PATHS {
            for t in [1, 2, 3] {
                let got = run_pass_on(&a, &e, &g, &cfg, Threads(t), path);
                assert_eq!(all_figures(&got), one, "{path:?} with {t} threads");
            }
        }
        let small = Some((1.0 / 256.0, 1.0 / 65536.0));
        let one = all_figures(&run_baseline_pass_on(
            &a,
            &g,
            small,
            Threads(1),
            KernelPath::Auto,
        ));
        for path in PATHS {
            for t in [1, 2, 3] {
                let got = run_baseline_pass_on(&a, &g, small, Threads(t), path);
                assert_eq!(all_figures(&got), one, "baseline {path:?} with {t} threads");
            }
        }
    }

    /// The baseline figures written out the plain way.
    fn reference_baseline<A: Lane, G: Lane>(
        base: &[u8],
        gold: &[u8],
        small_value: Option<(f64, f64)>,
    ) -> PassStats {
        let n = base.len() / A::BYTES;
        let mut st = PassStats::new(0);
        st.numel = n as u64;
        for j in 0..n {
            let bv = A::value(load::<A>(base, j));
            let gv = G::value(load::<G>(gold, j));
            if !(bv.is_finite() && gv.is_finite()) {
                st.non_comparable += !bv.is_infinite() as u64;
                continue;
            }
            st.comparable += 1;
            let d = sat((bv - gv).abs());
            st.max_abs = st.max_abs.max(d);
            st.sum_abs += d;
            if let Some((small, small_err)) = small_value {
                let ag = gv.abs();
                if ag < small {
                    st.small += 1;
                    st.small_err += (d > small_err) as u64;
                } else {
                    let rel = sat(d / (ag + CANN_EPS));
                    st.normal += 1;
                    st.normal_sum_rel += rel;
                    st.normal_max_rel = st.normal_max_rel.max(rel);
                    st.normal_sum_sq += d * d;
                }
            }
        }
        st
    }

    #[test]
    fn baseline_paths_give_the_reference_figures() {
        let n = 5000;
        for (i, dtype) in [ElemType::Bf16, ElemType::F16, ElemType::F32, ElemType::F64]
            .into_iter()
            .enumerate()
        {
            let k = kind(dtype);
            for golden_f64 in [false, true] {
                let (b, _, g) = data(&k, n, golden_f64, 500 + i as u64);
                for small in [None, Some((1.0 / 64.0, 1.0 / 4096.0))] {
                    let want = match (dtype, golden_f64) {
                        (ElemType::Bf16, false) => {
                            reference_baseline::<Bf16Lane, Bf16Lane>(&b.data, &g.data, small)
                        }
                        (ElemType::Bf16, true) => {
                            reference_baseline::<Bf16Lane, F64Lane>(&b.data, &g.data, small)
                        }
                        (ElemType::F16, false) => {
                            reference_baseline::<F16Lane, F16Lane>(&b.data, &g.data, small)
                        }
                        (ElemType::F16, true) => {
                            reference_baseline::<F16Lane, F64Lane>(&b.data, &g.data, small)
                        }
                        (ElemType::F32, false) => {
                            reference_baseline::<F32Lane, F32Lane>(&b.data, &g.data, small)
                        }
                        (ElemType::F32, true) => {
                            reference_baseline::<F32Lane, F64Lane>(&b.data, &g.data, small)
                        }
                        _ => reference_baseline::<F64Lane, F64Lane>(&b.data, &g.data, small),
                    };
                    assert!(want.non_comparable > 0 && want.comparable > BLOCK as u64);
                    for path in PATHS {
                        let got = run_baseline_pass_on(&b, &g, small, Threads(1), path);
                        let what = format!("{dtype:?} golden_f64 {golden_f64} {small:?} {path:?}");
                        assert_eq!(exact_figures(&got), exact_figures(&want), "{what}");
                        assert!(sums_agree(&got, &want), "{what}");
                    }
                }
            }
        }
    }
}
