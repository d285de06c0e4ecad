//! The trend from the perf history store (`conform report --history DB`): the newest runs as
//! perf files (one per run, labelled by commit or date, each series' median), and the change
//! points of every series those runs cover.

use super::error::ReportError;
use super::perf_input::{PerfCase, PerfFile};
use crate::perf::changepoint::ChangePointConfig;
use crate::perf::history::gate::judge_every_night;
use crate::perf::history::{analyse, History};
use crate::perf::stats::median;
use crate::perf::GateConfig;

/// One change point of a series, as the report lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangeRow {
    pub series: String,
    /// after / before (above 1: slower).
    pub ratio: f64,
    pub p_value: f64,
    pub before: String,
    pub after: String,
}

/// A series over the newest runs, with what the gate made of each run against the runs
/// before it: the noise plot of the report.
#[derive(Clone, Debug, PartialEq)]
pub struct NoiseSeries {
    pub series: String,
    /// Per run (oldest first): its label (commit or date) and location (fenced mean, us).
    pub labels: Vec<String>,
    pub locations: Vec<f64>,
    /// The learned band the run was judged against, in microseconds (None: not learned yet).
    pub bands: Vec<Option<(f64, f64)>>,
    /// Runs whose own interval moved and that the gate judged environment drift.
    pub drift: Vec<usize>,
    /// Runs the gate flagged (REGRESSION or IMPROVEMENT beyond the band too).
    pub flagged: Vec<usize>,
}

/// The history's newest runs and change points, and each series' noise over those runs.
pub struct HistoryView {
    pub runs: Vec<PerfFile>,
    pub changes: Vec<ChangeRow>,
    pub noise: Vec<NoiseSeries>,
}

/// The newest `runs` runs of the history at `location` (a file or a PostgreSQL URL), oldest first, and every change point of
/// the series over the whole history.
pub fn load(location: &str, runs: usize) -> Result<HistoryView, ReportError> {
    let mut h = History::open(location)?;
    let all = h.runs()?;
    let newest = &all[all.len().saturating_sub(runs)..];
    let mut files: Vec<PerfFile> = newest
        .iter()
        .map(|(_, date, commit)| PerfFile {
            label: commit
                .as_deref()
                .map_or_else(|| date.clone(), |c| c[..c.len().min(8)].to_string()),
            cases: Vec::new(),
        })
        .collect();
    let mut changes = Vec::new();
    let mut noise = Vec::new();
    let gate = GateConfig::default();
    for s in h.series()? {
        let nights = h.nights(&s.key)?;
        for n in &nights {
            if let Some(k) = newest.iter().position(|(id, _, _)| *id == n.run_id) {
                files[k].cases.push(PerfCase {
                    id: s.key.case.clone(),
                    target: s.key.target.clone(),
                    samples_us: n.samples.clone(),
                    median_us: median(&n.samples),
                    budget_us: None,
                    min_roofline_fraction: None,
                    roofline_fraction: None,
                    implausible: false,
                    hardware: (!s.key.hardware.is_empty()).then(|| s.key.hardware.clone()),
                });
            }
        }
        let a = analyse(&s.key, &nights, &ChangePointConfig::default());
        let judged = judge_every_night(&nights, &a, &gate);
        let from = nights.len().saturating_sub(runs);
        let mut view = NoiseSeries {
            series: s.key.label(),
            labels: Vec::new(),
            locations: Vec::new(),
            bands: Vec::new(),
            drift: Vec::new(),
            flagged: Vec::new(),
        };
        for (k, i) in (from..nights.len()).enumerate() {
            let n = &nights[i];
            view.labels.push(
                n.commit
                    .as_deref()
                    .map_or_else(|| n.date.clone(), |c| c[..c.len().min(8)].to_string()),
            );
            view.locations.push(a.locations[i]);
            let (band, drift, flagged) = match &judged[i] {
                Some((r, j)) => {
                    let ref_loc = r.baseline.as_ref().map(|b| b.location_us);
                    (
                        j.band
                            .as_ref()
                            .zip(ref_loc)
                            .map(|(b, l)| (b.low * l, b.high * l)),
                        j.drift.is_some(),
                        j.verdict != j.own_verdict
                            || matches!(
                                j.verdict,
                                crate::perf::Verdict::Regression
                                    | crate::perf::Verdict::Improvement
                            ),
                    )
                }
                None => (None, false, false),
            };
            view.bands.push(band);
            if drift {
                view.drift.push(k);
            } else if flagged {
                view.flagged.push(k);
            }
        }
        noise.push(view);
        for c in a.changes {
            changes.push(ChangeRow {
                series: s.key.label(),
                ratio: c.ratio,
                p_value: c.p_value,
                before: c.before.label(),
                after: c.after.label(),
            });
        }
    }
    Ok(HistoryView {
        runs: files,
        changes,
        noise,
    })
}
