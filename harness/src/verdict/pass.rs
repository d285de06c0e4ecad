//! What one comparison pass is told and what it gathers: the per-element failure rule, the
//! pass configuration and the figures of a pass (or of one chunk of it). Both the chunk
//! kernels (`kernel`) and the passes that drive them (`metrics`) use these, so they live below
//! both and neither file imports the other back.

use super::heatmap::HeatGeometry;
use super::histogram::{REL_BUCKETS, ULP_BUCKETS};
use super::subnormal::SubnormalStratum;
use super::worst::WorstList;

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

impl ElementRule {
    /// Whether the rule judges `actual` against `expected` (its bits or ULP distance) rather
    /// than against the golden tensor (its errors). The classes of an element (`actual`
    /// non-finite where the judged value is finite; the judged value's own infinity matched)
    /// are read from the same side, so a rule never judges against one tensor and excuses or
    /// blames an element by the other.
    pub(crate) fn judges_expected(self) -> bool {
        matches!(self, ElementRule::Bitwise { .. } | ElementRule::Ulp { .. })
    }
}

/// What one pass computes.
#[derive(Clone, Debug)]
pub(crate) struct PassConfig<'a> {
    pub rule: ElementRule,
    /// Bit patterns that mark an element the target never wrote.
    pub poison: &'a [u64],
    /// When given, the elements the target never wrote (flat order), in place of `poison`.
    pub unwritten: Option<&'a [bool]>,
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
    /// Elements NaN/Inf in `actual` where the judged value is finite (`expected` under a
    /// bitwise or ULP rule, the golden one, as the output dtype holds it, under the others;
    /// [`ElementRule::judges_expected`]). In the baseline pass: the baseline's NaN/Inf where
    /// the golden value is finite.
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
    /// The subnormal stratum's figures (module `subnormal`): filled by `evaluate`, after the
    /// pass, for a judge that asks for them ([`crate::verdict::policies::Judge`]'s
    /// `judges_subnormal_stratum`); never by the kernels, and not combined by `absorb`.
    pub subnormal: Option<SubnormalStratum>,
}

impl PassStats {
    pub(crate) fn new(heat_cells: usize) -> PassStats {
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
            subnormal: None,
        }
    }

    /// Adds a later chunk's figures (called in chunk order).
    pub(crate) fn absorb(&mut self, o: &PassStats) {
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
