//! The general path of a pass: one element at a time (NaN, Inf, unwritten elements, the ragged
//! tail). Its figures equal the block path's bit for bit (module `kernel`).

use super::*;

impl PassAcc {
    /// The general path: element `j` of the chunk (flat index `first + j`).
    #[inline(always)]
    pub(super) fn element<A: Lane, G: Lane>(
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
        if s.is_unwritten(first + j, ab, eb) {
            self.unwritten_element::<A, G>(s, first + j, ab, gbits);
            return;
        }
        let av = A::value(ab);
        let ev = A::value(eb);
        let gv = G::value(gbits);
        let a_nan = A::is_nan(ab);
        let e_nan = A::is_nan(eb);
        // The value the rule judges against, as the output dtype holds it: `expected` under a
        // bitwise or ULP rule, else the golden one (an unrounded oracle beyond the dtype's
        // range is the infinity the dtype rounds it to). An element is non-finite, or matches
        // an infinity, by this side only.
        let jv = if s.judges_expected {
            ev
        } else {
            in_range_of::<A>(gv)
        };
        let non_finite = !av.is_finite() && jv.is_finite();
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
        // The judged value is itself an infinity (the exact result overflowed the dtype, or is
        // infinite by definition, as the LSE of a row with no valid key) and the target
        // returns the same one: a match under every policy. NaN is never infinite, so never
        // matched here.
        let inf_match = jv.is_infinite() && av == jv;
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

        let rule_fails = rule_fails(
            s.rule,
            ab,
            eb,
            a_nan && e_nan,
            ulp,
            is_comparable,
            d,
            ag,
            rel,
        );
        let fails = (rule_fails && !inf_match) || non_finite;
        self.mismatches += fails as u64;

        if s.worst {
            self.offer_worst(first + j, is_comparable, fails, d, av, gv, rel, ulp);
        }
    }

    /// An element still holding the poison pattern: counted apart from every other figure.
    #[inline(always)]
    fn unwritten_element<A: Lane, G: Lane>(
        &mut self,
        s: &PassSettings<'_>,
        flat: usize,
        ab: u64,
        gbits: u64,
    ) {
        if let Some(heat) = self.heat.as_mut() {
            heat.add(0.0);
        }
        self.unwritten += 1;
        self.mismatches += 1;
        if s.worst {
            self.worst.offer(Candidate {
                flat,
                severity: Severity::Unwritten,
                abs_err: 0.0,
                actual: A::value(ab),
                golden: G::value(gbits),
                rel_err: 0.0,
                ulp: None,
            });
        }
    }

    /// Offers a judged element to the worst list: by its error when comparable, else when it
    /// fails.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn offer_worst(
        &mut self,
        flat: usize,
        is_comparable: bool,
        fails: bool,
        d: f64,
        av: f64,
        gv: f64,
        rel: f64,
        ulp: Option<u64>,
    ) {
        if is_comparable {
            if d > self.worst.floor() {
                self.worst.offer(Candidate {
                    flat,
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
                flat,
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

/// Whether the element fails `rule` (before the shared overrides: the judged value's own
/// infinity matched, non-finite actual values). `both_nan`: actual and expected are NaN;
/// `d`, `ag`, `rel`: |a-g|, |g| and the CANN relative error (0 where not comparable).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn rule_fails(
    rule: ElementRule,
    ab: u64,
    eb: u64,
    both_nan: bool,
    ulp: Option<u64>,
    is_comparable: bool,
    d: f64,
    ag: f64,
    rel: f64,
) -> bool {
    match rule {
        ElementRule::Bitwise { nan_bits } => {
            if !nan_bits && both_nan {
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
    }
}
