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
//!    `conform perf compare` ([`crate::perf::compare_samples`]);
//! 5. the night-to-night noise ([`NoiseBand`]): the spread of the per-run locations of unchanged
//!    code, learned from the earlier runs (within their segments: nights with no change
//!    between them). A run is flagged only when it leaves that band as well as its own
//!    interval; one inside the band, one judged before enough nights were seen, and one on
//!    the same commit as a reference run are *environment drift* (other load on the runner,
//!    clocks), never a regression. A REGRESSION names the change: between the newest
//!    reference run's commit and the candidate's.

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

/// A run the gate flagged against its reference (the newest segment before it): a
/// REGRESSION / IMPROVEMENT, or a move its own interval shows that the gate judged to be
/// environment drift.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlaggedRun {
    /// REGRESSION or IMPROVEMENT: by its own interval, and (unless `drift`) by the band.
    pub verdict: Verdict,
    /// Its location over the reference's.
    pub ratio: f64,
    /// The run before it and the run itself: the commit range of the change.
    pub before: RunRef,
    pub after: RunRef,
    /// Why the move is environment drift, not a change of the code (None: a real change).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<String>,
    /// The learned band it was judged against (ratios to the reference), when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band: Option<(f64, f64)>,
}

/// Fewest earlier runs of unchanged code before the night-to-night spread is learned; before
/// that a move of the whole run cannot be told from a change and is reported as drift.
pub const MIN_NOISE_NIGHTS: usize = 4;

/// Most recent runs the spread is learned from.
pub const MAX_NOISE_NIGHTS: usize = 30;

/// The band's two-sided miss rate for a run of unchanged code (normal model of the log
/// location; a lighter-tailed spread, such as a bounded load factor, misses less).
pub const NOISE_ALPHA: f64 = 0.001;

/// Student's t at 1 - [`NOISE_ALPHA`] / 2 = 0.9995 for 1..=30 degrees of freedom (published
/// tables); beyond 30 the Cornish-Fisher expansion ([`student_t_quantile`]) is accurate.
const T_9995: [f64; 30] = [
    636.619, 31.599, 12.924, 8.610, 6.869, 5.959, 5.408, 5.041, 4.781, 4.587, 4.437, 4.318, 4.221,
    4.140, 4.073, 4.015, 3.965, 3.922, 3.883, 3.850, 3.819, 3.792, 3.768, 3.745, 3.725, 3.707,
    3.690, 3.674, 3.659, 3.646,
];

fn t_9995(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T_9995[df - 1],
        _ => crate::perf::welch::student_t_quantile(1.0 - NOISE_ALPHA / 2.0, df as f64),
    }
}

/// The night-to-night noise of a series: where the location of the next run of unchanged
/// code falls, learned from earlier runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoiseBand {
    /// Runs the spread was learned from, and its degrees of freedom (runs minus segments).
    pub nights: usize,
    pub df: usize,
    /// Standard deviation of the log location between runs of the same segment (0.05 is
    /// about 5% from night to night).
    pub log_sd: f64,
    /// The band for the next run's location, as ratios to the reference's location: a
    /// `1 - NOISE_ALPHA` prediction interval.
    pub low: f64,
    pub high: f64,
}

/// The band for the run after `locations[reference]` (the reference segment), learned from
/// the log locations of the `locations` before it within their segments (`segment_starts`):
/// the pooled within-segment standard deviation, a prediction interval around the reference
/// segment's mean, as ratios to `reference_location`. None with fewer than
/// [`MIN_NOISE_NIGHTS`] runs or no degree of freedom.
pub fn noise_band(
    locations: &[f64],
    segment_starts: &[usize],
    reference: std::ops::Range<usize>,
    reference_location: f64,
) -> Option<NoiseBand> {
    let end = reference.end;
    let start = end.saturating_sub(MAX_NOISE_NIGHTS);
    if end - start < MIN_NOISE_NIGHTS || reference_location.is_nan() || reference_location <= 0.0 {
        return None;
    }
    let mut bounds: Vec<usize> = std::iter::once(start)
        .chain(
            segment_starts
                .iter()
                .copied()
                .filter(|&c| c > start && c < end),
        )
        .collect();
    bounds.push(end);
    let (mut ss, mut n, mut segments) = (0.0, 0usize, 0usize);
    for w in bounds.windows(2) {
        let logs: Vec<f64> = locations[w[0]..w[1]].iter().map(|x| x.ln()).collect();
        if logs.is_empty() || logs.iter().any(|x| !x.is_finite()) {
            continue;
        }
        let m = logs.iter().sum::<f64>() / logs.len() as f64;
        ss += logs.iter().map(|x| (x - m) * (x - m)).sum::<f64>();
        n += logs.len();
        segments += 1;
    }
    let df = n.checked_sub(segments)?;
    if n < MIN_NOISE_NIGHTS || df == 0 {
        return None;
    }
    let log_sd = (ss / df as f64).sqrt();
    let refs: Vec<f64> = locations[reference.clone()]
        .iter()
        .map(|x| x.ln())
        .collect();
    let m_ref = refs.len().max(1) as f64;
    let centre = refs.iter().sum::<f64>() / m_ref;
    let half = t_9995(df) * log_sd * (1.0 + 1.0 / m_ref).sqrt();
    Some(NoiseBand {
        nights: n,
        df,
        log_sd,
        low: (centre - half).exp() / reference_location,
        high: (centre + half).exp() / reference_location,
    })
}

/// The band the next run of `nights` (with analysis `a`) would be judged against.
pub fn series_noise(nights: &[Night], a: &SeriesAnalysis) -> Option<NoiseBand> {
    let range = reference_range(&a.segment_starts, nights.len());
    let pooled: Vec<f64> = nights[range.clone()]
        .iter()
        .flat_map(|n| n.samples.iter().copied())
        .collect();
    let loc = fenced_mean(&pooled, 3.0)?;
    noise_band(&a.locations, &a.segment_starts, range, loc)
}

/// How a run's own-interval verdict stands against the night-to-night noise.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NightJudgement {
    /// The verdict after the noise: a REGRESSION / IMPROVEMENT only outside the band too.
    pub verdict: Verdict,
    /// Its own interval's verdict (the samples of this run against the reference's).
    pub own_verdict: Verdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band: Option<NoiseBand>,
    /// Why a move its own interval shows is environment drift (None: no move, or a change).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<String>,
}

/// Judges `candidate` (with its `commit`) against the earlier runs `nights` (oldest first;
/// `a` their [`analyse`]): the reference segment's pooled samples through the gate's test,
/// then the noise band. The same judgement for the nightly gate, `history show` and the
/// calibration simulation.
pub fn judge_night(
    nights: &[Night],
    a: &SeriesAnalysis,
    candidate: &[f64],
    commit: Option<&str>,
    gate_cfg: &GateConfig,
) -> (SampleComparison, NightJudgement, std::ops::Range<usize>) {
    let range = reference_range(&a.segment_starts, nights.len());
    let pooled: Vec<f64> = nights[range.clone()]
        .iter()
        .flat_map(|n| n.samples.iter().copied())
        .collect();
    let mut r = compare_samples(&pooled, candidate, gate_cfg);
    let own = r.verdict;
    let ref_loc = r.baseline.as_ref().map_or(f64::NAN, |b| b.location_us);
    let band = noise_band(&a.locations, &a.segment_starts, range.clone(), ref_loc);
    let moved = matches!(own, Verdict::Regression | Verdict::Improvement);
    let same_commit = commit.and_then(|c| {
        nights[range.clone()]
            .iter()
            .rev()
            .find(|n| n.commit.as_deref() == Some(c))
    });
    let ratio = r.ratio.unwrap_or(f64::NAN);
    let drift = if !moved {
        None
    } else if let Some(n) = same_commit {
        Some(format!(
            "environment drift: the same commit as the reference run of {} ({:+.1}% with the \
             code unchanged)",
            n.date,
            100.0 * (ratio - 1.0)
        ))
    } else {
        match &band {
            None => Some(format!(
                "environment drift or a change, not told apart: {:+.1}% by its own interval, \
                 but the night-to-night spread needs {MIN_NOISE_NIGHTS} earlier runs ({} so far)",
                100.0 * (ratio - 1.0),
                nights.len()
            )),
            Some(b) if ratio <= b.high && ratio >= b.low => Some(format!(
                "environment drift: {:+.1}% is inside the nights' spread [{:.3}, {:.3}] \
                 (learned from {} runs of unchanged code, {:.1}% night to night)",
                100.0 * (ratio - 1.0),
                b.low,
                b.high,
                b.nights,
                100.0 * b.log_sd
            )),
            Some(_) => None,
        }
    };
    if drift.is_some() {
        r.verdict = Verdict::Unchanged;
    }
    if let (Some(b), None, true) = (&band, &drift, moved) {
        r.reason = format!(
            "{}; outside the nights' spread [{:.3}, {:.3}] ({} runs)",
            r.reason, b.low, b.high, b.nights
        );
    }
    if let Some(d) = &drift {
        r.reason = d.clone();
    }
    (
        r,
        NightJudgement {
            verdict: if drift.is_some() {
                Verdict::Unchanged
            } else {
                own
            },
            own_verdict: own,
            band,
            drift,
        },
        range,
    )
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
    judge_every_night(nights, a, gate_cfg)
        .into_iter()
        .enumerate()
        .filter_map(|(i, j)| {
            let (r, j) = j?;
            matches!(j.own_verdict, Verdict::Regression | Verdict::Improvement).then(|| {
                FlaggedRun {
                    verdict: j.own_verdict,
                    ratio: r.ratio.unwrap_or(f64::NAN),
                    before: RunRef::of(&nights[i - 1]),
                    after: RunRef::of(&nights[i]),
                    drift: j.drift,
                    band: j.band.map(|b| (b.low, b.high)),
                }
            })
        })
        .collect()
}

/// Every run of `nights` judged as the nightly gate judged it (against the runs before it,
/// `a` the series' [`analyse`]); None for the first run.
pub fn judge_every_night(
    nights: &[Night],
    a: &SeriesAnalysis,
    gate_cfg: &GateConfig,
) -> Vec<Option<(SampleComparison, NightJudgement)>> {
    (0..nights.len())
        .map(|i| {
            if i == 0 {
                return None;
            }
            let earlier = SeriesAnalysis {
                locations: a.locations[..i].to_vec(),
                changes: Vec::new(),
                segment_starts: a
                    .segment_starts
                    .iter()
                    .copied()
                    .filter(|&c| c < i)
                    .collect(),
            };
            let (r, j, _) = judge_night(
                &nights[..i],
                &earlier,
                &nights[i].samples,
                nights[i].commit.as_deref(),
                gate_cfg,
            );
            Some((r, j))
        })
        .collect()
}

/// Whether two runs of a series were timed with the same op parameters (a run that does not
/// say is taken to be).
pub fn same_params(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// The runs of `nights` (oldest first) timed with the op parameters of the newest run that
/// names them, and how many runs of other parameters were left out: `history show` and the
/// report analyse a series as the gate judges it, never across a change of the case's
/// parameters under the same id.
pub fn with_newest_params(nights: Vec<Night>) -> (Vec<Night>, usize) {
    let newest = nights.iter().rev().find_map(|n| n.params_digest.clone());
    let before = nights.len();
    let kept: Vec<Night> = nights
        .into_iter()
        .filter(|n| same_params(n.params_digest.as_deref(), newest.as_deref()))
        .collect();
    let left_out = before - kept.len();
    (kept, left_out)
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
    /// The night-to-night noise and what it made of tonight's move.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise: Option<NightJudgement>,
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
                .filter(|n| same_params(n.params_digest.as_deref(), rec.params_digest.as_deref()))
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
            noise: None,
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
                rounds: None,
            }
        } else {
            let key = SeriesKey {
                id: 0,
                case: rec.id.clone(),
                target: rec.target.clone(),
                hardware: hw.clone(),
            };
            let a = analyse(&key, &nights, cp);
            let (mut r, judgement, range) =
                judge_night(&nights, &a, &rec.samples_us, env.commit.as_deref(), cfg);
            let reference = &nights[range];
            info.reference_from = Some(RunRef::of(&reference[0]));
            info.reference_to = Some(RunRef::of(&reference[reference.len() - 1]));
            info.reference_runs = reference.len();
            info.changes = a.changes;
            info.noise = Some(judgement);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn night(i: i64, params: Option<&str>) -> Night {
        Night {
            run_id: i,
            digest: format!("run{i}"),
            date: format!("2026-01-{:02}T02:00:00Z", i + 1),
            commit: None,
            params_digest: params.map(str::to_string),
            samples: vec![10.0 + i as f64],
        }
    }

    #[test]
    fn a_series_is_read_with_its_newest_op_parameters_only() {
        let nights = vec![
            night(0, Some("old")),
            night(1, Some("old")),
            night(2, None),
            night(3, Some("new")),
            night(4, Some("new")),
        ];
        let (kept, left_out) = with_newest_params(nights);
        assert_eq!(left_out, 2);
        assert_eq!(
            kept.iter().map(|n| n.run_id).collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
        let (kept, left_out) = with_newest_params(vec![night(0, None), night(1, None)]);
        assert_eq!((kept.len(), left_out), (2, 0));
        assert!(same_params(Some("a"), None) && !same_params(Some("a"), Some("b")));
    }
}
