//! The gate against the history: no hand-kept baseline. For each series of the candidate:
//!
//! 1. the earlier runs of the series (the candidate's own run left out, so it may already be
//!    ingested), only those with the candidate's op parameters when both are known;
//! 2. their per-run locations (fenced means) cut into segments by E-divisive change points
//!    ([`crate::perf::changepoint`]);
//! 3. the reference is the newest segment (at most [`MAX_REFERENCE_RUNS`] of its runs, samples
//!    pooled): after an intended improvement the series' new level becomes the reference by
//!    itself, once the change point is established;
//! 4. the candidate's samples against the reference through the same test as
//!    `conform perf compare` ([`crate::perf::compare_samples`]). A REGRESSION names the change:
//!    between the newest reference run's commit and the candidate's.

use serde::Serialize;

use super::error::HistoryError;
use super::store::{History, Night, SeriesKey};
use crate::perf::changepoint::{e_divisive, ChangePoint, ChangePointConfig};
use crate::perf::compare::{CaseComparison, SampleComparison};
use crate::perf::stats::fenced_mean;
use crate::perf::{compare_samples, Comparison, GateConfig, PerfFile, Verdict};

/// Most runs of the newest segment whose samples make the reference.
pub const MAX_REFERENCE_RUNS: usize = 10;

/// A change point of a series, with the runs on either side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamedChange {
    /// Location after / before (above 1: slower).
    pub ratio: f64,
    pub p_value: f64,
    /// The last run before the change and the first run after it.
    pub before: RunRef,
    pub after: RunRef,
}

/// A run as the messages name it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRef {
    pub date: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl RunRef {
    fn of(n: &Night) -> RunRef {
        RunRef {
            date: n.date.clone(),
            commit: n.commit.clone(),
        }
    }

    /// `commit 1a2b3c4d (date)` or `date`.
    pub fn label(&self) -> String {
        match &self.commit {
            Some(c) => format!("commit {} ({})", short(c), self.date),
            None => self.date.clone(),
        }
    }
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(10)]
}

/// The history of a series as the gate and `history show` see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesAnalysis {
    /// One location (fenced mean, microseconds) per run, oldest first.
    pub locations: Vec<f64>,
    pub changes: Vec<NamedChange>,
    /// Index of the first run of each segment after the first (the change points).
    pub segment_starts: Vec<usize>,
}

/// A run the gate flagged against its reference (the newest segment before it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlaggedRun {
    pub verdict: Verdict,
    /// Its location over the reference's.
    pub ratio: f64,
    /// The run before it and the run itself: the commit range of the change.
    pub before: RunRef,
    pub after: RunRef,
}

/// The reference of run `i`: the runs of the newest segment that starts before it (change
/// points at `cps`, first indices of their segments), at most [`MAX_REFERENCE_RUNS`].
fn reference_range(cps: &[usize], i: usize) -> std::ops::Range<usize> {
    let start = cps.iter().copied().filter(|&c| c < i).max().unwrap_or(0);
    start.max(i.saturating_sub(MAX_REFERENCE_RUNS))..i
}

/// Per-run locations and change points of `nights` (oldest first).
pub fn analyse(series: &SeriesKey, nights: &[Night], cfg: &ChangePointConfig) -> SeriesAnalysis {
    let locations: Vec<f64> = nights
        .iter()
        .map(|n| fenced_mean(&n.samples, 3.0).unwrap_or(f64::NAN))
        .collect();
    let cps: Vec<ChangePoint> = if locations.iter().all(|v| v.is_finite()) {
        e_divisive(&locations, &series.label(), cfg)
    } else {
        Vec::new()
    };
    SeriesAnalysis {
        locations,
        changes: cps
            .iter()
            .map(|c| NamedChange {
                ratio: c.ratio(),
                p_value: c.p_value,
                before: RunRef::of(&nights[c.index - 1]),
                after: RunRef::of(&nights[c.index]),
            })
            .collect(),
        segment_starts: cps.iter().map(|c| c.index).collect(),
    }
}

/// Every run of `nights` the gate flags against its reference, as the nightly gate judged (or
/// would have judged) that night: a one-night slowdown shows here even when no lasting step
/// follows it. `a` is the series' [`analyse`].
pub fn flagged_runs(
    nights: &[Night],
    a: &SeriesAnalysis,
    gate_cfg: &GateConfig,
) -> Vec<FlaggedRun> {
    (1..nights.len())
        .filter_map(|i| {
            let pooled: Vec<f64> = nights[reference_range(&a.segment_starts, i)]
                .iter()
                .flat_map(|n| n.samples.iter().copied())
                .collect();
            let r = compare_samples(&pooled, &nights[i].samples, gate_cfg);
            matches!(r.verdict, Verdict::Regression | Verdict::Improvement).then(|| FlaggedRun {
                verdict: r.verdict,
                ratio: r.ratio.unwrap_or(f64::NAN),
                before: RunRef::of(&nights[i - 1]),
                after: RunRef::of(&nights[i]),
            })
        })
        .collect()
}

/// What a case of the candidate was compared against.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReferenceInfo {
    pub id: String,
    pub target: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    /// Earlier runs of the series (with the candidate's parameters).
    pub history_runs: usize,
    /// The runs pooled as the reference: the newest segment's first and last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_from: Option<RunRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_to: Option<RunRef>,
    pub reference_runs: usize,
    /// Every change point of the earlier runs.
    pub changes: Vec<NamedChange>,
}

/// The gate's result: the comparison (the same JSON as `conform perf compare`) and what each
/// case was compared against.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryComparison {
    #[serde(flatten)]
    pub comparison: Comparison,
    pub references: Vec<ReferenceInfo>,
}

/// Compares every record of `candidate` with its series' reference in `history`.
pub fn gate(
    history: &mut History,
    candidate: &PerfFile,
    cfg: &GateConfig,
    cp: &ChangePointConfig,
) -> Result<HistoryComparison, HistoryError> {
    let own = super::store::run_digest(candidate);
    let env = candidate.environment.clone().unwrap_or_default();
    let tonight = RunRef {
        date: env.date.clone().unwrap_or_else(|| "this run".to_string()),
        commit: env.commit.clone(),
    };
    let mut cases = Vec::new();
    let mut references = Vec::new();
    for rec in &candidate.cases {
        let hw = rec.hardware.clone().unwrap_or_default();
        let nights: Vec<Night> = match history.series_of(&rec.id, &rec.target, &hw)? {
            Some(key) => history
                .nights(&key)?
                .into_iter()
                .filter(|n| n.digest != own)
                .filter(|n| match (&n.params_digest, &rec.params_digest) {
                    (Some(a), Some(b)) => a == b,
                    _ => true,
                })
                .collect(),
            None => Vec::new(),
        };
        let mut info = ReferenceInfo {
            id: rec.id.clone(),
            target: rec.target.clone(),
            hardware: rec.hardware.clone(),
            history_runs: nights.len(),
            reference_from: None,
            reference_to: None,
            reference_runs: 0,
            changes: Vec::new(),
        };
        let result = if nights.is_empty() {
            SampleComparison {
                verdict: Verdict::OnlyInCandidate,
                baseline: None,
                candidate: None,
                ratio: None,
                ci_low: None,
                ci_high: None,
                p_slower: None,
                p_faster: None,
                reason: "no earlier run of this series in the history (with these op parameters)"
                    .to_string(),
            }
        } else {
            let key = SeriesKey {
                id: 0,
                case: rec.id.clone(),
                target: rec.target.clone(),
                hardware: hw.clone(),
            };
            let a = analyse(&key, &nights, cp);
            let reference = &nights[reference_range(&a.segment_starts, nights.len())];
            let pooled: Vec<f64> = reference
                .iter()
                .flat_map(|n| n.samples.iter().copied())
                .collect();
            info.reference_from = Some(RunRef::of(&reference[0]));
            info.reference_to = Some(RunRef::of(&reference[reference.len() - 1]));
            info.reference_runs = reference.len();
            info.changes = a.changes;
            let mut r = compare_samples(&pooled, &rec.samples_us, cfg);
            let span = format!(
                "reference: {} run(s) from {} to {}",
                reference.len(),
                RunRef::of(&reference[0]).label(),
                RunRef::of(&reference[reference.len() - 1]).label()
            );
            r.reason = match r.verdict {
                Verdict::Regression => format!(
                    "{}; {span}; the change is between {} and {}",
                    r.reason,
                    RunRef::of(&reference[reference.len() - 1]).label(),
                    tonight.label()
                ),
                _ => format!("{}; {span}", r.reason),
            };
            r
        };
        cases.push(CaseComparison {
            id: rec.id.clone(),
            target: rec.target.clone(),
            hardware: rec.hardware.clone(),
            result,
        });
        references.push(info);
    }
    Ok(HistoryComparison {
        comparison: Comparison {
            config: *cfg,
            cases,
        },
        references,
    })
}
