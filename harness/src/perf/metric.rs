//! What a comparison of two perf files judges: their wall-time samples as timed, or the
//! process CPU time of each sample (docs/perf.md, "Wall or CPU time").

use std::path::Path;

use super::{compare, Comparison, GateConfig, PerfError, PerfFile, PerfFileIo};

/// The figure a comparison judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Metric {
    /// Wall time of each timed iteration (`samples_us`).
    #[default]
    Wall,
    /// Process CPU time of each timed iteration (`cpu_us`).
    Cpu,
}

/// `file` with every record's samples replaced by its CPU times; an error naming the file and
/// the case when a record has none.
pub fn cpu_samples(mut file: PerfFile, path: &Path) -> Result<PerfFile, PerfError> {
    for rec in &mut file.cases {
        if rec.cpu_us.is_empty() || rec.cpu_us.iter().any(|x| x.is_nan() || *x <= 0.0) {
            return Err(PerfError::InvalidArgument {
                field: "--metric",
                problem: format!(
                    "cpu: {}: case `{}` (target `{}`) has no CPU time of every sample (`cpu_us`; \
                     recorded by the reference and CPU workers, not by device targets)",
                    path.display(),
                    rec.id,
                    rec.target
                ),
            });
        }
        rec.samples_us = std::mem::take(&mut rec.cpu_us);
    }
    Ok(file)
}

/// The comparison of the perf files `baseline` and `candidate` on `metric` under the gate
/// `cfg`.
pub fn compare_files(
    baseline: &Path,
    candidate: &Path,
    metric: Metric,
    cfg: &GateConfig,
) -> Result<Comparison, PerfError> {
    let mut base = PerfFile::read(baseline)?;
    let mut cand = PerfFile::read(candidate)?;
    if metric == Metric::Cpu {
        base = cpu_samples(base, baseline)?;
        cand = cpu_samples(cand, candidate)?;
    }
    Ok(compare(&base, &cand, cfg))
}
