//! The comparison kernels: one chunk of a pass over (actual, expected, golden), and one chunk
//! of the lean baseline pass over (baseline, golden).
//!
//! A chunk is cut into blocks of [`BLOCK`] elements. A block whose elements are all finite on
//! every side and hold no poison pattern ("clean") is decoded into fixed-size arrays and
//! reduced by straight-line loops the compiler vectorises; any other block, and the ragged
//! tail of the last chunk, goes element by element through the general path (NaN, Inf,
//! unwritten elements). Whether an element is non-finite, or matches an infinity, is read
//! from the side the rule judges against (`expected` for the bitwise and ULP rules, the
//! golden tensor for the others), on every path, the baseline's included. Both paths give the same figures bit for bit: every per-element value
//! is one IEEE operation per step (no FMA: Rust never contracts), maxima and counts do not
//! depend on the order, and every sum has one fixed order on both paths:
//!
//! - element `j` of a chunk (counted from the chunk's start) is added into partial sum
//!   `j % PARTIALS` in increasing `j` (elements a figure does not cover add nothing, or +0,
//!   which leaves a partial sum unchanged: partial sums start at +0 and only grow);
//! - the [`PARTIALS`] partial sums of a chunk are combined by the fixed tree
//!   `p[k] += p[k + 4]`, then `p[k] += p[k + 2]`, then `p[0] + p[1]`;
//! - chunks are then added in chunk order (see [`chunks`]).
//!
//! The figures therefore depend neither on the thread count nor on the CPU's vector width or
//! features: on x86-64 with AVX2 the same code is compiled a second time with AVX2 enabled and
//! chosen at run time; other machines run the portable build.

use super::heatmap::HeatAccumulator;
use super::histogram::{rel_bucket, ulp_bucket, REL_BUCKETS, ULP_BUCKETS};
use super::lane::{in_range_of, ulp_distance, Lane};
use super::pass::{sat, ElementRule, PassConfig, PassStats, CANN_EPS, FLASHINFER_EPS};
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
    /// The rule judges against `expected`, not the golden tensor
    /// ([`ElementRule::judges_expected`]).
    judges_expected: bool,
    check_poison: bool,
    /// The first poison pattern, compared directly; the rest (if any) by search.
    p0: u64,
    p_rest: &'a [u64],
    /// The unwritten elements decided outside the pass (flat order), in place of the poison
    /// test.
    unwritten: Option<&'a [bool]>,
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
            judges_expected: cfg.rule.judges_expected(),
            check_poison,
            p0,
            p_rest,
            unwritten: cfg.unwritten,
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

    /// Whether the element at flat index `flat`, with bits `ab` (actual) and `eb` (expected),
    /// was never written: by the mask when there is one, else it holds a poison pattern that
    /// the expected element does not.
    #[inline(always)]
    fn is_unwritten(&self, flat: usize, ab: u64, eb: u64) -> bool {
        match self.unwritten {
            Some(mask) => mask[flat],
            None => self.is_poison(ab) && !self.is_poison(eb),
        }
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
}

impl PassAcc {
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
        if path == KernelPath::Auto && conform_reference::cpu::avx2() {
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

mod baseline;
mod block;
mod chunks;
mod element;

pub(crate) use baseline::baseline_chunk;
pub use chunks::CHUNK;
pub(crate) use chunks::{run_baseline_pass, run_pass};

#[cfg(test)]
mod tests;
