//! The regression gate: compare a candidate perf file against a baseline, case by case.
//!
//! Per case (matched on id, target and hardware) the gate drops each side's spikes once
//! (Tukey's outer fences), estimates the ratio candidate / baseline of the means with a
//! Welch-t (Fieller) confidence interval, and runs a one-sided Mann-Whitney U test, both on
//! the fenced samples (`super::welch`). A verdict needs both:
//! - REGRESSION: lower bound > 1 + threshold and the "candidate slower" test is significant;
//! - IMPROVEMENT: upper bound < 1 - threshold and the "candidate faster" test is significant;
//! - UNCHANGED otherwise; INCONCLUSIVE when either side has fewer than `min_samples`.
//!
//! Cases present on one side only are reported as such. The calibration of the defaults is in
//! `harness/tests/perf_gate_simulation.rs` and docs/perf.md.

use serde::{Deserialize, Serialize};

use super::error::PerfError;
use super::mann_whitney::{mann_whitney, Alternative};
use super::perf_file::PerfFile;
use super::stats::{count_outside_fences, fenced_mean, median};
use super::welch::{fenced, ratio_interval};

/// Parameters of the gate. [`GateConfig::default`] is the calibrated setting.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GateConfig {
    /// Relative change that matters: a regression needs the ratio's lower bound above
    /// `1 + threshold`.
    pub threshold: f64,
    /// One-sided level of each confidence bound: the reported interval is the
    /// `[alpha, 1 - alpha]` percentile interval.
    pub ci_alpha: f64,
    /// One-sided significance level of the Mann-Whitney test.
    pub rank_alpha: f64,
    /// Fewer samples than this on either side: INCONCLUSIVE.
    pub min_samples: usize,
    /// Tukey fence multiplier of the location estimator (3 = outer fences).
    pub fence_k: f64,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            threshold: 0.03,
            ci_alpha: DEFAULT_CI_ALPHA,
            rank_alpha: DEFAULT_RANK_ALPHA,
            min_samples: 5,
            fence_k: 3.0,
        }
    }
}

/// Default one-sided level of each bound of the ratio interval.
pub const DEFAULT_CI_ALPHA: f64 = 0.01;
/// Default one-sided level of the rank test.
pub const DEFAULT_RANK_ALPHA: f64 = 0.025;

impl GateConfig {
    /// The default configuration with another threshold.
    pub fn with_threshold(threshold: f64) -> Result<GateConfig, PerfError> {
        let cfg = GateConfig {
            threshold,
            ..GateConfig::default()
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reject settings that would make the gate meaningless.
    pub fn validate(&self) -> Result<(), PerfError> {
        let bad = |field, problem: String| Err(PerfError::InvalidArgument { field, problem });
        if !(self.threshold.is_finite() && (0.0..1.0).contains(&self.threshold)) {
            return bad("threshold", format!("{} is not in [0, 1)", self.threshold));
        }
        if !(self.ci_alpha > 0.0 && self.ci_alpha < 0.5) {
            return bad("ci_alpha", format!("{} is not in (0, 0.5)", self.ci_alpha));
        }
        if !(self.rank_alpha > 0.0 && self.rank_alpha < 0.5) {
            return bad(
                "rank_alpha",
                format!("{} is not in (0, 0.5)", self.rank_alpha),
            );
        }
        if self.min_samples < 2 {
            return bad("min_samples", format!("{} is below 2", self.min_samples));
        }
        if !(self.fence_k.is_finite() && self.fence_k >= 0.0) {
            return bad(
                "fence_k",
                format!("{} is not a finite value >= 0", self.fence_k),
            );
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    Regression,
    Improvement,
    Unchanged,
    Inconclusive,
    /// In the baseline only: the candidate lost the case.
    OnlyInBaseline,
    /// In the candidate only: a new case, nothing to compare against.
    OnlyInCandidate,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Regression => "REGRESSION",
            Verdict::Improvement => "IMPROVEMENT",
            Verdict::Unchanged => "UNCHANGED",
            Verdict::Inconclusive => "INCONCLUSIVE",
            Verdict::OnlyInBaseline => "ONLY_IN_BASELINE",
            Verdict::OnlyInCandidate => "ONLY_IN_CANDIDATE",
        }
    }
}

/// The statistics of one side.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SideSummary {
    pub samples: usize,
    pub median_us: f64,
    /// The robust location (fenced mean) the ratio is built from.
    pub location_us: f64,
    /// Samples outside the location estimator's fences (dropped from it).
    pub outliers: usize,
}

/// Comparison of one pair of sample sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleComparison {
    pub verdict: Verdict,
    pub baseline: Option<SideSummary>,
    pub candidate: Option<SideSummary>,
    /// candidate / baseline of the robust location.
    pub ratio: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// One-sided Mann-Whitney p-value for "candidate slower".
    pub p_slower: Option<f64>,
    /// One-sided Mann-Whitney p-value for "candidate faster".
    pub p_faster: Option<f64>,
    /// Why the verdict is what it is, for a human.
    pub reason: String,
}

fn summary(samples: &[f64], fence_k: f64) -> Option<SideSummary> {
    Some(SideSummary {
        samples: samples.len(),
        median_us: median(samples)?,
        location_us: fenced_mean(samples, fence_k)?,
        outliers: count_outside_fences(samples, fence_k),
    })
}

/// Compare two sample sets (finite, positive values). Deterministic: the same samples always
/// give the same interval and verdict.
pub fn compare_samples(baseline: &[f64], candidate: &[f64], cfg: &GateConfig) -> SampleComparison {
    let base = summary(baseline, cfg.fence_k);
    let cand = summary(candidate, cfg.fence_k);
    let min = cfg.min_samples;
    if baseline.len() < min || candidate.len() < min {
        return SampleComparison {
            verdict: Verdict::Inconclusive,
            baseline: base,
            candidate: cand,
            ratio: None,
            ci_low: None,
            ci_high: None,
            p_slower: None,
            p_faster: None,
            reason: format!(
                "too few samples: baseline {}, candidate {}; at least {min} per side are needed",
                baseline.len(),
                candidate.len()
            ),
        };
    }
    let (b, c) = (base.expect("non-empty"), cand.expect("non-empty"));
    let ratio = c.location_us / b.location_us;
    // Spikes are dropped once, before anything is estimated or tested.
    let (clean_b, clean_c) = (
        fenced(baseline, cfg.fence_k),
        fenced(candidate, cfg.fence_k),
    );
    let (lo, hi) = ratio_interval(&clean_b, &clean_c, cfg.ci_alpha)
        .unwrap_or((f64::NEG_INFINITY, f64::INFINITY));
    let slower = mann_whitney(&clean_b, &clean_c, Alternative::Greater).expect("non-empty");
    let faster = mann_whitney(&clean_b, &clean_c, Alternative::Less).expect("non-empty");
    let t = cfg.threshold;
    let (verdict, reason) = if lo > 1.0 + t && slower.p_value < cfg.rank_alpha {
        (
            Verdict::Regression,
            format!(
                "lower bound {lo:.4} > {:.4} and rank test p = {:.2e} < {}",
                1.0 + t,
                slower.p_value,
                cfg.rank_alpha
            ),
        )
    } else if hi < 1.0 - t && faster.p_value < cfg.rank_alpha {
        (
            Verdict::Improvement,
            format!(
                "upper bound {hi:.4} < {:.4} and rank test p = {:.2e} < {}",
                1.0 - t,
                faster.p_value,
                cfg.rank_alpha
            ),
        )
    } else {
        (
            Verdict::Unchanged,
            format!(
                "no change beyond the {:.1}% threshold shown by both the interval and the rank test",
                100.0 * t
            ),
        )
    };
    SampleComparison {
        verdict,
        baseline: Some(b),
        candidate: Some(c),
        ratio: Some(ratio),
        ci_low: Some(lo),
        ci_high: Some(hi),
        p_slower: Some(slower.p_value),
        p_faster: Some(faster.p_value),
        reason,
    }
}

/// One case of a [`Comparison`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseComparison {
    pub id: String,
    pub target: String,
    pub hardware: Option<String>,
    #[serde(flatten)]
    pub result: SampleComparison,
}

/// The whole comparison, in baseline order followed by candidate-only cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub config: GateConfig,
    pub cases: Vec<CaseComparison>,
}

impl Comparison {
    /// Whether any case regressed (the gate's exit status).
    pub fn has_regression(&self) -> bool {
        self.cases
            .iter()
            .any(|c| c.result.verdict == Verdict::Regression)
    }

    /// Number of cases on both sides, i.e. actually compared.
    pub fn judged(&self) -> usize {
        self.cases
            .iter()
            .filter(|c| {
                !matches!(
                    c.result.verdict,
                    Verdict::OnlyInBaseline | Verdict::OnlyInCandidate
                )
            })
            .count()
    }

    /// Number of cases with the given verdict.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.cases
            .iter()
            .filter(|c| c.result.verdict == verdict)
            .count()
    }
}

fn one_sided(verdict: Verdict, samples: &[f64], fence_k: f64) -> SampleComparison {
    let s = summary(samples, fence_k);
    let (baseline, candidate, reason) = match verdict {
        Verdict::OnlyInBaseline => (s, None, "the candidate has no samples for this case"),
        _ => (None, s, "the baseline has no samples for this case"),
    };
    SampleComparison {
        verdict,
        baseline,
        candidate,
        ratio: None,
        ci_low: None,
        ci_high: None,
        p_slower: None,
        p_faster: None,
        reason: reason.to_string(),
    }
}

/// Compare every case of `candidate` with the same (id, target, hardware) in `baseline`.
pub fn compare(baseline: &PerfFile, candidate: &PerfFile, cfg: &GateConfig) -> Comparison {
    let mut cases = Vec::new();
    for b in &baseline.cases {
        let key = b.key();
        let result = match candidate.cases.iter().find(|c| c.key() == key) {
            Some(c) => compare_samples(&b.samples_us, &c.samples_us, cfg),
            None => one_sided(Verdict::OnlyInBaseline, &b.samples_us, cfg.fence_k),
        };
        cases.push(CaseComparison {
            id: b.id.clone(),
            target: b.target.clone(),
            hardware: b.hardware.clone(),
            result,
        });
    }
    for c in &candidate.cases {
        if !baseline.cases.iter().any(|b| b.key() == c.key()) {
            cases.push(CaseComparison {
                id: c.id.clone(),
                target: c.target.clone(),
                hardware: c.hardware.clone(),
                result: one_sided(Verdict::OnlyInCandidate, &c.samples_us, cfg.fence_k),
            });
        }
    }
    Comparison {
        config: *cfg,
        cases,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wave(n: usize, scale: f64) -> Vec<f64> {
        // deterministic spread of about +-3% around `scale`
        (0..n)
            .map(|i| scale * (1.0 + 0.03 * (((i * 7919) % 101) as f64 / 50.0 - 1.0)))
            .collect()
    }

    #[test]
    fn too_few_samples_is_inconclusive() {
        let r = compare_samples(&[1.0, 1.1, 0.9], &[2.0, 2.1, 1.9], &GateConfig::default());
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(r.reason.contains("too few samples"));
    }

    #[test]
    fn clear_shifts_are_detected_both_ways() {
        let cfg = GateConfig::default();
        let base = wave(30, 100.0);
        let r = compare_samples(&base, &wave(30, 110.0), &cfg);
        assert_eq!(r.verdict, Verdict::Regression, "{r:?}");
        assert!(r.ci_low.unwrap() > 1.03 && r.ci_high.unwrap() > 1.1 - 1e-9);
        let r = compare_samples(&base, &wave(30, 90.0), &cfg);
        assert_eq!(r.verdict, Verdict::Improvement, "{r:?}");
        let r = compare_samples(&base, &base, &cfg);
        assert_eq!(r.verdict, Verdict::Unchanged, "{r:?}");
        assert_eq!(r.ratio, Some(1.0));
    }

    #[test]
    fn a_few_spikes_do_not_make_a_regression() {
        let base = wave(30, 100.0);
        let mut cand = wave(30, 100.0);
        cand[3] *= 3.0;
        cand[17] *= 3.0;
        let r = compare_samples(&base, &cand, &GateConfig::with_threshold(0.0).unwrap());
        assert_ne!(r.verdict, Verdict::Regression, "{r:?}");
        assert_eq!(r.candidate.unwrap().outliers, 2);
    }

    #[test]
    fn invalid_settings_are_rejected_by_name() {
        let e = GateConfig::with_threshold(-0.1).unwrap_err().to_string();
        assert!(e.starts_with("threshold"), "{e}");
        let e = GateConfig::with_threshold(f64::NAN)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("threshold"), "{e}");
    }
}
