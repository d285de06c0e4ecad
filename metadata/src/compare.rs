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
    /// One-sided Mann-Whitney p-value for "candidate slower".
    pub p_slower: Option<f64>,
    /// One-sided Mann-Whitney p-value for "candidate faster".
    pub p_faster: Option<f64>,
    /// Why the verdict is what it is, for a human.
    pub reason: String,
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

    /// Number of cases with the given verdict.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.cases
            .iter()
            .filter(|c| c.result.verdict == verdict)
            .count()
    }
}
