//! The self-contained HTML report built from files (`conform report`): a results file (or
//! the journal a killed run left) with perf files, a baseline comparison, an MC2 timeline, a
//! kill matrix and a perf history; or the partial kill matrix of a killed `conform adequacy`
//! recovered from its journal. [`build`] tells the caller what it did through [`ReportNote`]s,
//! in order, and prints nothing.

use crate::adequacy::AdequacyReport;
use crate::report::{self, ReportError, ReportInputs};
use std::path::{Path, PathBuf};

/// What to build the report from, and where it goes.
#[derive(Debug, Clone, Default)]
pub struct ReportRequest {
    /// The results file (or a journal).
    pub input: PathBuf,
    /// Perf files.
    pub perf: Vec<PathBuf>,
    /// A baseline comparison (`perf compare --json`).
    pub baseline: Option<PathBuf>,
    /// An MC2 timeline.
    pub mc2: Option<PathBuf>,
    /// A kill matrix (`adequacy --json`).
    pub adequacy: Option<PathBuf>,
    /// A perf history (a SQLite file or a PostgreSQL URL).
    pub history: Option<String>,
    /// The newest runs of the history shown.
    pub history_runs: usize,
    /// The report's directory.
    pub out: PathBuf,
}

/// What [`build`] did, as it did it.
#[derive(Debug)]
pub enum ReportNote<'a> {
    /// A run's journal became a results file.
    RecoveredJournal {
        journal: &'a Path,
        results: &'a Path,
        finished: usize,
        unfinished: usize,
    },
    /// An adequacy journal became a kill matrix (`matrix`, written to `out`).
    RecoveredAdequacyJournal {
        journal: &'a Path,
        out: &'a Path,
        measured: usize,
        unfinished: usize,
        matrix: &'a AdequacyReport,
    },
    /// The report's page was written here.
    Wrote(&'a Path),
}

/// What `conform report` wrote.
pub struct ReportOutcome {
    /// `DIR/index.html`.
    pub page: PathBuf,
    /// Whether the results judged any case (passed or failed; not every one skipped).
    pub judged: bool,
}

/// Builds and writes the report; returns the path of `index.html` and whether the results
/// judged anything.
pub fn build(
    args: &ReportRequest,
    note: &mut dyn FnMut(ReportNote),
) -> Result<ReportOutcome, ReportError> {
    if report::load::is_journal(&args.input)
        && crate::adequacy::journal::is_adequacy_journal(&args.input)
    {
        return recover_adequacy(args, note);
    }
    let mut inputs = ReportInputs::load(
        &args.input,
        &args.perf,
        args.baseline.as_deref(),
        args.mc2.as_deref(),
    )?;
    if let Some(db) = &args.history {
        let mut view = report::history_input::load(db, args.history_runs)?;
        view.runs.append(&mut inputs.perf_files);
        inputs.perf_files = view.runs;
        inputs.history_changes = view.changes;
        inputs.history_noise = view.noise;
    }
    inputs.adequacy = args
        .adequacy
        .as_deref()
        .map(report::load::adequacy)
        .transpose()?;
    // A journal (what SIGKILL leaves) also becomes a results file beside the report.
    if report::load::is_journal(&args.input) {
        let out = args.out.join("results.json");
        let text =
            serde_json::to_string_pretty(&inputs.results).map_err(|e| ReportError::Write {
                path: out.clone(),
                source: std::io::Error::other(e),
            })?;
        std::fs::create_dir_all(&args.out).map_err(|source| ReportError::Write {
            path: args.out.clone(),
            source,
        })?;
        crate::atomic_file::write(&out, text.as_bytes()).map_err(|source| ReportError::Write {
            path: out.clone(),
            source,
        })?;
        inputs.results_path = out.clone();
        note(ReportNote::RecoveredJournal {
            journal: &args.input,
            results: &out,
            finished: inputs.results.cases.len(),
            unfinished: inputs.results.unfinished.len(),
        });
    }
    let judged = inputs
        .results
        .cases
        .iter()
        .any(|c| c.status != crate::results::Status::Skipped);
    let page = report::render(&inputs)?;
    let path = report::write(&args.out, &page)?;
    note(ReportNote::Wrote(&path));
    Ok(ReportOutcome { page: path, judged })
}

/// `conform report --input PATH.journal` on the journal of a killed `conform adequacy`: the
/// partial kill matrix as `DIR/adequacy.json` and its page `DIR/index.html`. Judged when at
/// least one cell was measured.
fn recover_adequacy(
    args: &ReportRequest,
    note: &mut dyn FnMut(ReportNote),
) -> Result<ReportOutcome, ReportError> {
    let journal = &args.input;
    if !args.perf.is_empty()
        || args.baseline.is_some()
        || args.mc2.is_some()
        || args.adequacy.is_some()
        || args.history.is_some()
    {
        return Err(ReportError::Field {
            path: journal.clone(),
            field: "journal".to_string(),
            reason: crate::messages::report::ADEQUACY_JOURNAL_ALONE.to_string(),
        });
    }
    let text = crate::input_file::read_text(journal, crate::input_file::Limit::RESULTS).map_err(
        |source| ReportError::Read {
            path: journal.clone(),
            source,
        },
    )?;
    let matrix = crate::adequacy::journal::recover(&text).map_err(|reason| ReportError::Field {
        path: journal.clone(),
        field: "journal".to_string(),
        reason: reason.to_string(),
    })?;
    let write_err = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| ReportError::Write { path, source }
    };
    std::fs::create_dir_all(&args.out).map_err(write_err(&args.out))?;
    let out = args.out.join("adequacy.json");
    let text = serde_json::to_string_pretty(&matrix)
        .map_err(|e| write_err(&out)(std::io::Error::other(e)))?;
    crate::atomic_file::write(&out, text.as_bytes()).map_err(write_err(&out))?;
    let measured: usize = matrix.matrix.iter().map(|c| c.outcomes.len()).sum();
    note(ReportNote::RecoveredAdequacyJournal {
        journal,
        out: &out,
        measured,
        unfinished: matrix.unfinished.len(),
        matrix: &matrix,
    });
    let page = report::write(&args.out, &crate::adequacy::html::page(&matrix))?;
    note(ReportNote::Wrote(&page));
    Ok(ReportOutcome {
        page,
        judged: measured > 0,
    })
}
