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

/// A run's label on the trend and noise plots: its commit (8 characters) and its date to the
/// second (`abcd1234 11-25 04:05:06`), so two nights of one commit are told apart; the date
/// alone when the run has no commit.
pub fn run_label(commit: Option<&str>, date: &str) -> String {
    // RFC 3339 `2026-11-25T04:05:06Z` -> `11-25 04:05:06`.
    let short_date = date
        .get(5..19)
        .map(|d| d.replace('T', " "))
        .unwrap_or_else(|| date.to_string());
    match commit {
        Some(c) => format!("{} {short_date}", &c[..c.len().min(8)]),
        None => date.to_string(),
    }
}

/// `labels` with every repeat numbered (`x`, `x #2`, ...): no two points of a plot share one.
fn unique(labels: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(labels.len());
    for l in labels {
        let seen = out
            .iter()
            .filter(|o| **o == l || o.starts_with(&format!("{l} #")))
            .count();
        out.push(if seen == 0 {
            l
        } else {
            format!("{l} #{}", seen + 1)
        });
    }
    out
}

/// The newest `runs` runs of the history at `location` (a file or a PostgreSQL URL), oldest first, and every change point of
/// the series over the whole history.
pub fn load(location: &str, runs: usize) -> Result<HistoryView, ReportError> {
    let mut h = History::open(location)?;
    let all = h.runs()?;
    let newest = &all[all.len().saturating_sub(runs)..];
    let labels = unique(
        newest
            .iter()
            .map(|(_, date, commit)| run_label(commit.as_deref(), date))
            .collect(),
    );
    let mut files: Vec<PerfFile> = newest
        .iter()
        .zip(&labels)
        .map(|(_, label)| PerfFile {
            label: label.clone(),
            cases: Vec::new(),
        })
        .collect();
    let mut changes = Vec::new();
    let mut noise = Vec::new();
    let gate = GateConfig::default();
    for s in h.series()? {
        let (nights, _) = crate::perf::history::gate::with_newest_params(h.nights(&s.key)?);
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
        let series_labels = unique(
            nights[from..]
                .iter()
                .map(|n| run_label(n.commit.as_deref(), &n.date))
                .collect(),
        );
        for (k, i) in (from..nights.len()).enumerate() {
            view.labels.push(series_labels[k].clone());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::history::RunMeta;
    use crate::perf::{Environment, PerfFile as Record, PerfFileIo, PerfRecord, PerfRecordBuild};

    #[test]
    fn two_nights_of_one_commit_get_two_labels() {
        let a = run_label(Some("0123456789abcdef"), "2026-11-25T04:05:06Z");
        let b = run_label(Some("0123456789abcdef"), "2026-11-25T04:05:07Z");
        assert_eq!(a, "01234567 11-25 04:05:06");
        assert_ne!(a, b);
        assert_eq!(
            run_label(None, "2026-11-25T04:05:06Z"),
            "2026-11-25T04:05:06Z"
        );
        // Even one second apart and more: every repeat is numbered.
        assert_eq!(
            unique(vec!["x".into(), "y".into(), "x".into(), "x".into()]),
            vec!["x", "y", "x #2", "x #3"]
        );
    }

    /// Two nights of one commit in a history store: the trend and the noise plot label them
    /// apart (they used to read the same commit twice).
    #[test]
    fn the_trend_of_a_store_tells_two_nights_of_one_commit_apart() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.sqlite");
        let location = db.to_string_lossy().into_owned();
        let mut h = History::open_or_create(&location).unwrap();
        for (night, date) in [(1, "2026-11-25T02:00:00Z"), (2, "2026-11-26T02:00:00Z")] {
            let mut env = Environment {
                commit: Some("0123456789abcdef0123".into()),
                date: Some(date.into()),
                ..Default::default()
            };
            env.versions.insert("night".into(), format!("{night}"));
            let mut f = Record::new(env);
            f.push(
                PerfRecord::from_samples("s/c", "reference", vec![10.0, 11.0, 10.5, 10.2, 10.8])
                    .unwrap(),
            )
            .unwrap();
            h.ingest(&f, &RunMeta::default()).unwrap();
        }
        drop(h);
        let view = load(&location, 30).unwrap();
        let labels: Vec<&str> = view.runs.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels.len(), 2);
        assert_ne!(labels[0], labels[1], "{labels:?}");
        assert_eq!(view.noise[0].labels, labels);
    }
}
