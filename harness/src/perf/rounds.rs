//! The verdict of an A/B comparison timed in rounds: the same-night control of the nightly
//! gate (and `conform run --against`).
//!
//! Each round times both sides in fresh worker processes, in a short A B B A block, and gives
//! one paired ratio per case: the median of the candidate's samples of the round over the
//! median of the baseline's ([`round_ratio`]). Whatever holds for one process — the core it
//! was placed on beside a busy job, its memory layout, its clock — holds for every sample of
//! that side in that round, so the samples of a round are not independent of each other; the
//! rounds are (each has its own processes). The verdict is therefore judged on the rounds,
//! never on the pooled samples ([`judge_rounds`]):
//!
//! 1. the log ratios of the completed rounds; a round farther from their median than
//!    [`OUTLIER_MADS`] robust standard deviations (1.4826 times the median absolute
//!    deviation), and at least [`OUTLIER_FLOOR`] times away, is set aside: a process placed far worse
//!    than the others (at most a quarter of the rounds: more are rounds that disagree);
//! 2. at least [`min_rounds`] kept rounds, else INCONCLUSIVE ("too few rounds");
//! 3. the ratio is the geometric mean of the kept rounds, with the `1 - 2 alpha` t interval
//!    of their mean log ratio (`rounds - 1` degrees of freedom);
//! 4. the one-sided Wilcoxon signed-rank test of the kept log ratios against 0;
//! 5. REGRESSION: lower bound above `1 + threshold` and p(slower) below the rank level;
//!    IMPROVEMENT: the mirror image; INCONCLUSIVE when the rounds disagree (the ratio moved
//!    beyond the threshold, but the rounds do not agree enough for either verdict); UNCHANGED
//!    otherwise.
//!
//! Calibrated in `harness/tests/harness/perf_nightly_simulation.rs` (docs/perf.md).

use super::compare::{GateConfig, RoundsSummary, SampleComparison, SideSummary, Verdict};
use super::mann_whitney::Alternative;
use super::signed_rank::signed_rank;
use super::stats::{count_outside_fences, fenced_mean, mean, median, std_dev};

/// The samples one round gave each side.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Round {
    pub baseline: Vec<f64>,
    pub candidate: Vec<f64>,
}

/// A round farther than this many robust standard deviations from the median of the rounds
/// is set aside (and only when it is also farther than [`OUTLIER_FLOOR`]).
pub const OUTLIER_MADS: f64 = 4.0;

/// A round is set aside only when its ratio is at least this factor away from the median of
/// the rounds: a process placed far worse (1.3-1.8x, measured), never an ordinary round that a
/// tight set of others happens to leave out (trimming those would bias the rest).
pub const OUTLIER_FLOOR: f64 = 1.2;

/// The default one-sided level of the rounds' signed-rank test: 2^-7 = 0.0078 is below it, so
/// seven rounds that all agree can reach it (the calibration in
/// `harness/tests/harness/perf_nightly_simulation.rs`: at 0.05 an unchanged build on an
/// unevenly loaded runner was flagged in 13% of 20-night histories).
pub const DEFAULT_ROUNDS_RANK_ALPHA: f64 = 0.01;

/// Fewest rounds whose signed-rank test can reach `rank_alpha` at all: all `n` rounds on one
/// side give `p = 2^-n`, so `n` is the smallest with `2^-n < rank_alpha` (5 at 0.05).
pub fn min_rounds(rank_alpha: f64) -> u32 {
    let mut n = 1u32;
    while 0.5f64.powi(n as i32) >= rank_alpha && n < 64 {
        n += 1;
    }
    n
}

/// The paired ratio of a round: median of the candidate's samples over the median of the
/// baseline's. None when either side has no sample or a median that is not a finite time > 0.
pub fn round_ratio(r: &Round) -> Option<f64> {
    let (b, c) = (median(&r.baseline)?, median(&r.candidate)?);
    let x = c / b;
    (b > 0.0 && c > 0.0 && x.is_finite()).then_some(x)
}

/// The rounds (indices into `logs`, their log ratios) set aside: farther from the median than
/// [`OUTLIER_MADS`] robust standard deviations and than [`OUTLIER_FLOOR`]. None below 4
/// rounds (no spread to judge by), and none when more than a quarter of the rounds would go:
/// so many are not a few unlucky placements but rounds that disagree, which the interval
/// must show.
pub fn outlier_rounds(logs: &[f64]) -> Vec<usize> {
    if logs.len() < 4 {
        return Vec::new();
    }
    let Some(m) = median(logs) else {
        return Vec::new();
    };
    let deviations: Vec<f64> = logs.iter().map(|x| (x - m).abs()).collect();
    let mad = median(&deviations).unwrap_or(0.0);
    let limit = (OUTLIER_MADS * 1.4826 * mad).max(OUTLIER_FLOOR.ln());
    let out: Vec<usize> = (0..logs.len()).filter(|&i| deviations[i] > limit).collect();
    if out.len() > logs.len() / 4 {
        return Vec::new();
    }
    out
}

fn side(samples: &[f64], fence_k: f64) -> Option<SideSummary> {
    Some(SideSummary {
        samples: samples.len(),
        median_us: median(samples)?,
        location_us: fenced_mean(samples, fence_k)?,
        outliers: count_outside_fences(samples, fence_k),
    })
}

/// Judges the completed `rounds` of a comparison that planned `planned` rounds (`lost`: why
/// the others did not complete), under `cfg` (its threshold, `ci_alpha` for the interval,
/// `rank_alpha` for the signed-rank test, `fence_k` for setting rounds aside).
pub fn judge_rounds(
    rounds: &[Round],
    planned: u32,
    lost: Vec<String>,
    cfg: &GateConfig,
) -> SampleComparison {
    let all_b: Vec<f64> = rounds.iter().flat_map(|r| r.baseline.clone()).collect();
    let all_c: Vec<f64> = rounds.iter().flat_map(|r| r.candidate.clone()).collect();
    let ratios: Vec<f64> = rounds.iter().filter_map(round_ratio).collect();
    let logs: Vec<f64> = ratios.iter().map(|x| x.ln()).collect();
    let set_aside = outlier_rounds(&logs);
    let kept: Vec<f64> = (0..logs.len())
        .filter(|i| !set_aside.contains(i))
        .map(|i| logs[i])
        .collect();
    let summary = RoundsSummary {
        planned,
        samples_per_round: rounds
            .iter()
            .map(|r| r.baseline.len().min(r.candidate.len()) as u32)
            .max()
            .unwrap_or(0),
        ratios,
        set_aside,
        min_rounds: min_rounds(cfg.rank_alpha),
        lost,
        p_family: None,
        confirmation: Vec::new(),
    };
    let mut out = SampleComparison {
        verdict: Verdict::Inconclusive,
        baseline: side(&all_b, cfg.fence_k),
        candidate: side(&all_c, cfg.fence_k),
        ratio: None,
        ci_low: None,
        ci_high: None,
        p_slower: None,
        p_faster: None,
        reason: String::new(),
        rounds: None,
    };
    if summary.too_few() {
        out.reason = super::verdict_text::too_few_rounds(&summary);
        out.rounds = Some(summary);
        return out;
    }
    let n = kept.len();
    let m = mean(&kept).expect("at least min_rounds kept");
    let sd = std_dev(&kept).unwrap_or(0.0);
    let t = super::student_t::quantile(1.0 - cfg.ci_alpha, n - 1);
    let half = t * sd / (n as f64).sqrt();
    let (ratio, lo, hi) = (m.exp(), (m - half).exp(), (m + half).exp());
    let slower = signed_rank(&kept, Alternative::Greater).p_value;
    let faster = signed_rank(&kept, Alternative::Less).p_value;
    let (up, down) = (1.0 + cfg.threshold, 1.0 - cfg.threshold);
    let agreeing = |above: bool| kept.iter().filter(|x| (**x > 0.0) == above).count();
    out.verdict = if lo > up && slower < cfg.rank_alpha {
        Verdict::Regression
    } else if hi < down && faster < cfg.rank_alpha {
        Verdict::Improvement
    } else if ratio > up || ratio < down {
        Verdict::Inconclusive
    } else {
        Verdict::Unchanged
    };
    out.ratio = Some(ratio);
    out.ci_low = Some(lo);
    out.ci_high = Some(hi);
    out.p_slower = Some(slower);
    out.p_faster = Some(faster);
    out.reason = super::verdict_text::rounds_reason(
        out.verdict,
        &summary,
        (lo, hi),
        (slower, faster),
        (agreeing(true), agreeing(false)),
        cfg,
    );
    out.rounds = Some(summary);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` rounds of 4 samples a side, the candidate `ratios[i]` times the baseline's 100 us
    /// in round `i`, with a spread of +-1% inside each round.
    fn rounds(ratios: &[f64]) -> Vec<Round> {
        ratios
            .iter()
            .map(|&x| Round {
                baseline: vec![99.0, 100.0, 100.0, 101.0],
                candidate: vec![99.0 * x, 100.0 * x, 100.0 * x, 101.0 * x],
            })
            .collect()
    }

    fn cfg() -> GateConfig {
        GateConfig {
            rank_alpha: DEFAULT_ROUNDS_RANK_ALPHA,
            ci_alpha: 0.025,
            ..GateConfig::default()
        }
    }

    #[test]
    fn seven_rounds_are_needed_at_the_default_level() {
        assert_eq!(min_rounds(0.05), 5);
        assert_eq!(min_rounds(0.025), 6);
        assert_eq!(min_rounds(DEFAULT_ROUNDS_RANK_ALPHA), 7);
        let r = judge_rounds(
            &rounds(&[1.3, 1.31, 1.29, 1.3, 1.3, 1.32]),
            6,
            Vec::new(),
            &cfg(),
        );
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(r.reason.contains("too few rounds"), "{}", r.reason);
    }

    #[test]
    fn a_slowdown_every_round_agrees_on_is_a_regression() {
        let r = judge_rounds(
            &rounds(&[1.1, 1.12, 1.09, 1.11, 1.1, 1.08, 1.1, 1.12]),
            8,
            Vec::new(),
            &cfg(),
        );
        assert_eq!(r.verdict, Verdict::Regression, "{}", r.reason);
        assert!(r.ci_low.unwrap() > 1.03);
        assert_eq!(r.p_slower, Some(1.0 / 256.0));
        let s = r.rounds.unwrap();
        assert_eq!((s.planned, s.ratios.len(), s.samples_per_round), (8, 8, 4));
    }

    #[test]
    fn one_round_of_a_badly_placed_process_is_set_aside() {
        // Unchanged code; round 3's baseline process sat on a busy core (candidate 0.6x).
        let r = judge_rounds(
            &rounds(&[1.01, 0.99, 1.0, 0.6, 1.005, 0.995, 1.0, 1.01]),
            8,
            Vec::new(),
            &cfg(),
        );
        assert_eq!(r.verdict, Verdict::Unchanged, "{}", r.reason);
        assert_eq!(r.rounds.unwrap().set_aside, vec![3]);
        // The same with a real 10% slowdown: caught despite the outlier round.
        let r = judge_rounds(
            &rounds(&[1.1, 1.09, 1.11, 0.66, 1.1, 1.1, 1.12, 1.09]),
            8,
            Vec::new(),
            &cfg(),
        );
        assert_eq!(r.verdict, Verdict::Regression, "{}", r.reason);
    }

    #[test]
    fn rounds_that_disagree_are_inconclusive_never_unchanged() {
        // Five rounds 30% slower, three 25% faster: moved 8% by the ratio, no verdict, and
        // not "unchanged".
        let r = judge_rounds(
            &rounds(&[1.3, 0.75, 1.32, 0.76, 1.29, 1.3, 1.31, 0.77]),
            8,
            Vec::new(),
            &cfg(),
        );
        assert_eq!(r.verdict, Verdict::Inconclusive, "{}", r.reason);
        assert!(r.reason.contains("disagree"), "{}", r.reason);
        // Moved 8% by the ratio, but half the rounds near 1 or faster: inconclusive.
        let r = judge_rounds(
            &rounds(&[1.25, 0.95, 1.2, 0.97, 1.22, 0.96, 1.02, 1.05]),
            8,
            Vec::new(),
            &cfg(),
        );
        assert_eq!(r.verdict, Verdict::Inconclusive, "{}", r.reason);
    }

    #[test]
    fn lost_rounds_count_against_the_minimum_and_are_named() {
        let r = judge_rounds(
            &rounds(&[1.0, 1.0, 1.01]),
            8,
            vec!["round 4: worker crashed (signal 9)".into()],
            &cfg(),
        );
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(
            r.reason.contains("3 of 8") && r.reason.contains("signal 9"),
            "{}",
            r.reason
        );
        assert!(r.rounds.unwrap().too_few());
    }

    #[test]
    fn quiet_unchanged_rounds_are_unchanged() {
        let r = judge_rounds(
            &rounds(&[1.0, 1.01, 0.99, 1.005, 0.995, 1.0, 1.01, 0.99]),
            8,
            Vec::new(),
            &cfg(),
        );
        assert_eq!(r.verdict, Verdict::Unchanged, "{}", r.reason);
    }
}
