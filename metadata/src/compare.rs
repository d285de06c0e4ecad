//! The regression gate's settings and its comparison, as `conform perf compare --json`,
//! `conform perf history gate --json` and the A/B section of a results file write them. The
//! statistics that fill them are the harness's (`conform_harness::perf::compare`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A gate setting outside its range: the field and why.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("{field}: {problem}")]
pub struct InvalidSetting {
    pub field: &'static str,
    pub problem: String,
}

/// Parameters of the gate. [`GateConfig::default`] is the calibrated setting.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    pub fn with_threshold(threshold: f64) -> Result<GateConfig, InvalidSetting> {
        let cfg = GateConfig {
            threshold,
            ..GateConfig::default()
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reject settings that would make the gate meaningless.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        let bad = |field, problem: String| Err(InvalidSetting { field, problem });
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SideSummary {
    pub samples: usize,
    pub median_us: f64,
    /// The robust location (fenced mean) the ratio is built from.
    pub location_us: f64,
    /// Samples outside the location estimator's fences (dropped from it).
    pub outliers: usize,
}

/// Comparison of one pair of sample sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SampleComparison {
    pub verdict: Verdict,
    pub baseline: Option<SideSummary>,
    pub candidate: Option<SideSummary>,
    /// candidate / baseline of the robust location.
    pub ratio: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// One-sided p-value for "candidate slower": Mann-Whitney on the samples, or the
    /// Wilcoxon signed-rank test on the per-round ratios of an A/B comparison in rounds.
    pub p_slower: Option<f64>,
    /// One-sided p-value for "candidate faster" (the same test as `p_slower`).
    pub p_faster: Option<f64>,
    /// Why the verdict is what it is, for a human.
    pub reason: String,
    /// An A/B comparison timed in rounds (the same-night control): one paired ratio per
    /// round, which the verdict is judged on. Absent for a comparison of two sample sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<RoundsSummary>,
}

impl SampleComparison {
    /// The p-value a table shows for this comparison: the one in the direction of the
    /// ratio ([`directed_p_value`]). `conform perf compare`, the A/B table and the report
    /// all show this one, so one row reads the same everywhere.
    pub fn shown_p_value(&self) -> Option<f64> {
        directed_p_value(self.ratio, self.p_slower, self.p_faster)
    }
}

/// The p-value in the direction of the change: `p_faster` when the ratio is below 1, else
/// `p_slower` (no ratio: `p_slower`).
pub fn directed_p_value(
    ratio: Option<f64>,
    p_slower: Option<f64>,
    p_faster: Option<f64>,
) -> Option<f64> {
    if ratio.is_some_and(|r| r < 1.0) {
        p_faster
    } else {
        p_slower
    }
}

/// The rounds of an A/B comparison: each round timed both sides in fresh worker processes
/// (A B B A, or B A A B), and gave one ratio candidate / baseline of the round's medians.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RoundsSummary {
    /// Rounds asked for.
    pub planned: u32,
    /// Samples per side in each round.
    pub samples_per_round: u32,
    /// The ratio of each round that completed, in round order.
    pub ratios: Vec<f64>,
    /// Indices (into `ratios`) of the rounds set aside as outliers (outside the Tukey fences
    /// of the rounds' log ratios): a round whose worker processes were placed unevenly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<usize>,
    /// Fewest rounds the verdict needs (the signed-rank test of fewer cannot reach its level).
    pub min_rounds: u32,
    /// Rounds that did not complete, with why (a worker that crashed or failed in that round).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<String>,
    /// The signed-rank p-value of the rounds in the direction of the verdict they pointed to,
    /// adjusted (Holm) for the number of cases the comparison judged: what the level is held
    /// against, so that a night of many cases is not flagged by the luckiest of them. Absent
    /// when the rounds pointed to no change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_family: Option<f64>,
    /// The ratios of the confirmation rounds: a case whose rounds pointed to a REGRESSION or an
    /// IMPROVEMENT (after the adjustment) is timed again in as many fresh rounds, and keeps the
    /// verdict only when those rounds alone reach it too. Empty when no confirmation ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub confirmation: Vec<f64>,
}

impl RoundsSummary {
    /// Whether too few rounds completed (and were kept) for a verdict: the control could not
    /// judge the case.
    pub fn too_few(&self) -> bool {
        self.ratios.len().saturating_sub(self.set_aside.len()) < self.min_rounds as usize
    }
}

/// One case of a [`Comparison`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CaseComparison {
    pub id: String,
    pub target: String,
    pub hardware: Option<String>,
    #[serde(flatten)]
    pub result: SampleComparison,
}

/// The whole comparison, in baseline order followed by candidate-only cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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

    /// Whether any case could not be judged: INCONCLUSIVE (too few samples or rounds, op
    /// parameters that differ, rounds that disagree).
    pub fn has_inconclusive(&self) -> bool {
        self.count(Verdict::Inconclusive) > 0
    }

    /// The exit code the comparison earns: nothing judged (no case on both sides), a
    /// REGRESSION, an INCONCLUSIVE case, or success, in that order. One rule for
    /// `perf compare`, `perf history gate` and the A/B comparison of `run --against`.
    pub fn exit_code(&self) -> i32 {
        if self.judged() == 0 {
            crate::exit_code::NOTHING_JUDGED
        } else if self.has_regression() {
            crate::exit_code::FAILURE
        } else if self.has_inconclusive() {
            crate::exit_code::INCONCLUSIVE
        } else {
            crate::exit_code::SUCCESS
        }
    }

    /// Number of cases with the given verdict.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.cases
            .iter()
            .filter(|c| c.result.verdict == verdict)
            .count()
    }
}
