//! The vectorised path of a pass: a clean block of [`BLOCK`] elements, decoded into fixed-size
//! arrays and reduced by straight-line loops (module `kernel`).

use super::*;

impl PassAcc {
    /// The vectorised path for the block of [`BLOCK`] elements starting at element `j0` of the
    /// chunk (`act`, `exp`, `gold`: exactly that block). Returns false, having recorded
    /// nothing, when the block is not clean (a poison pattern in `actual`, or NaN/Inf on any
    /// side); the caller then runs it through [`PassAcc::element`].
    #[inline(always)]
    pub(super) fn block<A: Lane, G: Lane>(
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
        if let Some(mask) = s.unwritten {
            for &u in &mask[first + j0..first + j0 + BLOCK] {
                bad |= u as u32;
            }
        } else if s.check_poison {
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
}
