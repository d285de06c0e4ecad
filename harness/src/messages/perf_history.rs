//! User-facing text of `conform perf history`.

use std::fmt::Write as _;
use std::path::Path;

use crate::perf::history::gate::{FlaggedRun, NoiseBand, ReferenceInfo, SeriesAnalysis};
use crate::perf::history::{Ingested, Night, SeriesKey, SeriesSummary};

pub fn ingested(file: &Path, db: &str, what: &Ingested) -> String {
    match what {
        Ingested::New {
            run_id,
            series,
            samples,
        } => format!(
            "ingested {}: run {run_id}, {series} series, {samples} samples into {}",
            file.display(),
            db
        ),
        Ingested::AlreadyPresent { run_id } => format!(
            "{}: already in {} as run {run_id} (same contents); nothing added",
            file.display(),
            db
        ),
    }
}

fn hw(k: &SeriesKey) -> &str {
    if k.hardware.is_empty() {
        "-"
    } else {
        &k.hardware
    }
}

pub fn series_table(db: &str, series: &[SeriesSummary]) -> String {
    if series.is_empty() {
        return format!("{db}: the history holds no series yet\n");
    }
    let mut out = String::new();
    let w = series
        .iter()
        .map(|s| s.key.case.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        out,
        "{:<w$}  {:<12}  {:<16}  {:>5}  {:>8}  {:<20}  last",
        "case", "target", "hardware", "runs", "samples", "first"
    );
    for s in series {
        let _ = writeln!(
            out,
            "{:<w$}  {:<12}  {:<16}  {:>5}  {:>8}  {:<20}  {}",
            s.key.case,
            s.key.target,
            hw(&s.key),
            s.runs,
            s.samples,
            s.first_date,
            s.last_date
        );
    }
    let _ = writeln!(out, "{} series in {db}", series.len());
    out
}

pub fn series_detail(
    key: &SeriesKey,
    nights: &[Night],
    a: &SeriesAnalysis,
    flagged: &[FlaggedRun],
    noise: Option<&NoiseBand>,
) -> String {
    let mut out = format!(
        "{} on target {}, hardware {}: {} run(s)\n\n",
        key.case,
        key.target,
        hw(key),
        nights.len()
    );
    let _ = writeln!(
        out,
        "{:>4}  {:<20}  {:<12}  {:>7}  {:>14}  segment",
        "run", "date", "commit", "samples", "location us"
    );
    let mut seg = 0;
    for (i, (n, loc)) in nights.iter().zip(&a.locations).enumerate() {
        if a.changes
            .iter()
            .any(|c| c.after.date == n.date && c.after.commit == n.commit)
            && i > 0
        {
            seg += 1;
        }
        let commit = n.commit.as_deref().map_or("-", |c| &c[..c.len().min(12)]);
        let _ = writeln!(
            out,
            "{:>4}  {:<20}  {:<12}  {:>7}  {:>14.3}  {}",
            n.run_id,
            n.date,
            commit,
            n.samples.len(),
            loc,
            seg
        );
    }
    let (drift, changed): (Vec<&FlaggedRun>, Vec<&FlaggedRun>) =
        flagged.iter().partition(|f| f.drift.is_some());
    if changed.is_empty() {
        out.push_str("\nno run flagged by the gate against the runs before it\n");
    } else {
        out.push_str("\nruns the gate flags against the runs before them:\n");
        for f in changed {
            let band = f.band.map_or(String::new(), |(lo, hi)| {
                format!(" (nights' spread [{lo:.3}, {hi:.3}])")
            });
            let _ = writeln!(
                out,
                "  {} {:+.1}%: between {} and {}{band}",
                f.verdict.label(),
                100.0 * (f.ratio - 1.0),
                f.before.label(),
                f.after.label()
            );
        }
    }
    if !drift.is_empty() {
        out.push_str(
            "\nruns that moved by their own interval, judged environment drift (not the code):\n",
        );
        for f in drift {
            let _ = writeln!(
                out,
                "  DRIFT {:+.1}% on {}: {}",
                100.0 * (f.ratio - 1.0),
                f.after.label(),
                f.drift.as_deref().unwrap_or("")
            );
        }
    }
    if let Some(b) = noise {
        let _ = writeln!(
            out,
            "\nnight-to-night noise: {:.1}% (log-location standard deviation over {} runs of \
             unchanged code, {} degrees of freedom); the next run is expected within \
             [{:.3}, {:.3}] of the newest segment",
            100.0 * b.log_sd,
            b.nights,
            b.df,
            b.low,
            b.high
        );
    } else {
        let _ = writeln!(
            out,
            "\nnight-to-night noise: not learned yet (needs {} runs of unchanged code)",
            crate::perf::history::gate::MIN_NOISE_NIGHTS
        );
    }
    if a.changes.is_empty() {
        out.push_str("\nno change point (E-divisive means, permutation test)\n");
    } else {
        out.push_str("\nchange points (E-divisive means, permutation test):\n");
        for c in &a.changes {
            let _ = writeln!(
                out,
                "  {} {:+.1}% (p = {:.3}): between {} and {}",
                if c.ratio > 1.0 { "slower" } else { "faster" },
                100.0 * (c.ratio - 1.0),
                c.p_value,
                c.before.label(),
                c.after.label()
            );
        }
    }
    out
}

pub fn references(refs: &[ReferenceInfo]) -> String {
    let mut out = String::new();
    for r in refs {
        if r.history_runs == 0 {
            continue;
        }
        if let Some(d) = r.noise.as_ref().and_then(|n| n.drift.as_ref()) {
            let _ = writeln!(out, "DRIFT {} [{}]: {d}", r.id, r.target);
        }
        for c in &r.changes {
            let _ = writeln!(
                out,
                "{} [{}]: earlier change {:+.1}% between {} and {}",
                r.id,
                r.target,
                100.0 * (c.ratio - 1.0),
                c.before.label(),
                c.after.label()
            );
        }
    }
    out
}

pub fn regression(case: &str, target: &str, reason: &str) -> String {
    format!("REGRESSION {case} [{target}]: {reason}")
}

pub fn first_run(db: &str) -> String {
    format!(
        "no case has an earlier run in {db}: nothing to compare yet (this run becomes the reference once ingested)"
    )
}

pub fn no_case(file: &Path) -> String {
    format!(
        "{}: the perf file holds no case (nothing was timed); nothing was added to the history",
        file.display()
    )
}

pub fn exported(rows: usize, out: &str) -> String {
    format!("exported {rows} sample(s) to {out}")
}

/// `history show`: runs of the series timed with other op parameters, left out of it.
pub fn other_params_left_out(n: usize) -> String {
    format!(
        "{n} run(s) of this series were timed with other op parameters (another params_digest \
         under the same case id) and are left out: a series is never analysed across a change \
         of its case's parameters"
    )
}
