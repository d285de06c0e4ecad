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
//! `harness/tests/harness/perf_gate_simulation.rs` and docs/perf.md.

pub use conform_metadata::compare::{
    directed_p_value, CaseComparison, Comparison, GateConfig, RoundsSummary, SampleComparison,
    SideSummary, Verdict, DEFAULT_CI_ALPHA, DEFAULT_RANK_ALPHA,
};

use super::mann_whitney::{mann_whitney, Alternative};
use super::perf_file::{is_valid_sample, PerfFile, MAX_SAMPLE_US};
use super::stats::{count_outside_fences, fenced_mean, median};
use super::welch::{fenced, ratio_interval};

fn summary(samples: &[f64], fence_k: f64) -> Option<SideSummary> {
    Some(SideSummary {
        samples: samples.len(),
        median_us: median(samples)?,
        location_us: fenced_mean(samples, fence_k)?,
        outliers: count_outside_fences(samples, fence_k),
    })
}

/// An INCONCLUSIVE comparison of `baseline` and `candidate` (summarised), with `reason`.
fn inconclusive(
    baseline: &[f64],
    candidate: &[f64],
    cfg: &GateConfig,
    reason: String,
) -> SampleComparison {
    SampleComparison {
        verdict: Verdict::Inconclusive,
        baseline: summary(baseline, cfg.fence_k),
        candidate: summary(candidate, cfg.fence_k),
        ratio: None,
        ci_low: None,
        ci_high: None,
        p_slower: None,
        p_faster: None,
        reason,
        rounds: None,
    }
}

/// Compare two sample sets (finite, positive values). Deterministic: the same samples always
/// give the same interval and verdict. Samples that are not finite times in
/// `(0, MAX_SAMPLE_US]` (a perf file is refused for them when read; samples from elsewhere
/// may hold them), or figures that overflow, give INCONCLUSIVE with the reason, never a
/// verdict built on an infinite or NaN interval.
pub fn compare_samples(baseline: &[f64], candidate: &[f64], cfg: &GateConfig) -> SampleComparison {
    let min = cfg.min_samples;
    if baseline.len() < min || candidate.len() < min {
        let reason = format!(
            "too few samples: baseline {}, candidate {}; at least {min} per side are needed",
            baseline.len(),
            candidate.len()
        );
        return inconclusive(baseline, candidate, cfg, reason);
    }
    for (side, samples) in [("baseline", baseline), ("candidate", candidate)] {
        if let Some(i) = samples.iter().position(|x| !is_valid_sample(*x)) {
            let reason = format!(
                "{side} sample [{i}] = {} is not a finite time in (0, {MAX_SAMPLE_US:e}] us: \
                 nothing is judged on it",
                samples[i]
            );
            return inconclusive(baseline, candidate, cfg, reason);
        }
    }
    let base = summary(baseline, cfg.fence_k);
    let cand = summary(candidate, cfg.fence_k);
    let (b, c) = (base.expect("non-empty"), cand.expect("non-empty"));
    let ratio = c.location_us / b.location_us;
    // Spikes are dropped once, before anything is estimated or tested.
    let (clean_b, clean_c) = (
        fenced(baseline, cfg.fence_k),
        fenced(candidate, cfg.fence_k),
    );
    let (lo, hi) = ratio_interval(&clean_b, &clean_c, cfg.ci_alpha)
        .unwrap_or((f64::NEG_INFINITY, f64::INFINITY));
    if !(ratio.is_finite() && lo.is_finite() && hi.is_finite()) {
        let reason = format!(
            "the ratio {ratio} or its interval [{lo}, {hi}] is not finite (samples too far \
             apart to be compared): nothing is judged on it"
        );
        return inconclusive(baseline, candidate, cfg, reason);
    }
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
        rounds: None,
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
        rounds: None,
    }
}

/// Compare every case of `candidate` with the same (id, target, hardware) in `baseline`.
pub fn compare(baseline: &PerfFile, candidate: &PerfFile, cfg: &GateConfig) -> Comparison {
    let mut cases = Vec::new();
    for b in &baseline.cases {
        let key = b.key();
        let result = match candidate.cases.iter().find(|c| c.key() == key) {
            Some(c) => match (&b.params_digest, &c.params_digest) {
                // Another case under the same id: never compared (as the history gate never
                // compares runs of other op parameters).
                (Some(pb), Some(pc)) if pb != pc => inconclusive(
                    &b.samples_us,
                    &c.samples_us,
                    cfg,
                    super::verdict_text::other_params(pb, pc),
                ),
                _ => compare_samples(&b.samples_us, &c.samples_us, cfg),
            },
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
