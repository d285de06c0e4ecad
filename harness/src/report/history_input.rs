//! The trend from the perf history store (`conform report --history DB`): the newest runs as
//! perf files (one per run, labelled by commit or date, each series' median), and the change
//! points of every series those runs cover.

use super::error::ReportError;
use super::perf_input::{PerfCase, PerfFile};
use crate::perf::changepoint::ChangePointConfig;
use crate::perf::history::{analyse, History};
use crate::perf::stats::median;

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

/// The newest `runs` runs of the history at `location` (a file or a PostgreSQL URL), oldest first, and every change point of
/// the series over the whole history.
pub fn load(location: &str, runs: usize) -> Result<(Vec<PerfFile>, Vec<ChangeRow>), ReportError> {
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
    Ok((files, changes))
}
