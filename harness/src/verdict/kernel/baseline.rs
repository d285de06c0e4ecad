//! The lean baseline pass over (baseline, golden): only the figures the baseline policies
//! read, by the same per-element and block rules as the main pass (module `kernel`).

use super::*;

/// The running figures of one chunk of the baseline pass.
struct BaselineAcc {
    comparable: u64,
    /// Elements where the golden value (as the dtype holds it) is an infinity and the
    /// baseline returns the same one: matched, as for a target, so not non-comparable.
    inf_matched: u64,
    /// Elements where the baseline is NaN/Inf and the golden value (as the dtype holds it) is
    /// finite.
    non_finite: u64,
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
    fn element<A: Lane>(&mut self, small_value: Option<(f64, f64)>, j: usize, bv: f64, gv: f64) {
        if !(bv.is_finite() && gv.is_finite()) {
            // Classified against the golden value, as the main pass does under the rules
            // that judge against it (the baseline policies' rules).
            let gd = in_range_of::<A>(gv);
            self.inf_matched += (gd.is_infinite() && bv == gd) as u64;
            self.non_finite += (!bv.is_finite() && gd.is_finite()) as u64;
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

/// One chunk of the baseline pass: only the figures the baseline policies read (comparable,
/// non-comparable and non-finite counts, max and sum of |b-g|, the small-value split).
pub(crate) fn baseline_chunk<A: Lane, G: Lane>(
    base: &[u8],
    gold: &[u8],
    small_value: Option<(f64, f64)>,
    path: KernelPath,
) -> PassStats {
    #[cfg(target_arch = "x86_64")]
    {
        if path == KernelPath::Auto && conform_reference::cpu::avx2() {
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
        inf_matched: 0,
        non_finite: 0,
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
                acc.element::<A>(small_value, j0 + i, bv, gv);
            }
        }
    }
    for j in whole..n {
        let (bv, gv) = (A::value(load::<A>(base, j)), G::value(load::<G>(gold, j)));
        acc.element::<A>(small_value, j, bv, gv);
    }

    let split_small = small_value.is_some();
    let mut st = PassStats::new(0);
    st.numel = n as u64;
    st.comparable = acc.comparable;
    st.non_comparable = n as u64 - acc.comparable - acc.inf_matched;
    st.non_finite = acc.non_finite;
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
