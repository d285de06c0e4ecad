//! The adequacy journal: while `conform adequacy` measures its kill matrix, each finished cell
//! (one fault in one suite under one seed set) is appended as one JSON line to the journal
//! and flushed, so a matrix killed with SIGKILL loses at most the cell in flight. Its first
//! line is a header naming everything the matrix meant to measure (seed sets, faults, suites,
//! the selection's ops and whether the quick tier is gated), so [`recover`] rebuilds the
//! partial matrix from the journal alone: `conform report --input PATH.journal --out DIR`
//! (docs/adequacy.md, "Interrupted and killed runs"). The journal is removed once the
//! command's own outputs are written.

use super::{AdequacyOptions, AdequacyReport, SeedSet, SetOutcome, UnfinishedCell};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The journal's first line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Header {
    /// The adequacy journal format's version (1); its presence tells an adequacy journal from
    /// a run's (whose header has `journal`).
    pub adequacy_journal: u32,
    pub conform_version: String,
    pub started_at: String,
    pub seed_sets: Vec<SeedSet>,
    /// The faults measured, in the matrix's order.
    pub faults: Vec<String>,
    /// The suites of the selection, in the matrix's order.
    pub suites: Vec<String>,
    /// The ops of the selected cases (a gated fault of one of them that no case exercises is
    /// a gap).
    pub ops: Vec<String>,
    /// Whether the quick tier is part of the selection (its required faults are gated).
    pub gates_quick: bool,
}

/// One finished cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellLine {
    pub fault: String,
    pub suite: String,
    /// The seed set's index.
    pub set: u32,
    pub result: SetOutcome,
    /// Seconds since the matrix started, when the cell finished.
    pub elapsed_s: f64,
}

/// What a recovered matrix's `interrupted` field says: the journal cannot tell which signal
/// (or crash) ended it.
pub const RECOVERED_INTERRUPT: &str = "SIGKILL or a crash (recovered from its journal)";

/// The journal of a kill matrix written to `json` (beside it; None for a device or FIFO).
pub fn path_beside(json: &Path) -> Option<PathBuf> {
    crate::runner::journal::path_for_output(json)
}

/// The journal kept in a `--report DIR` when there is no `--json`.
pub fn path_in_report_dir(dir: &Path) -> PathBuf {
    dir.join("adequacy.json.journal")
}

pub struct Journal {
    file: std::fs::File,
}

impl Journal {
    /// Starts a journal at `path` (None when it cannot be created: the matrix goes on, and
    /// its outputs are still written at the end). Only a regular file (or nothing) there is
    /// replaced.
    pub fn create(path: &Path, header: &Header) -> Option<Journal> {
        if let Ok(m) = std::fs::symlink_metadata(path)
            && !m.is_file()
        {
            return None;
        }
        let mut j = Journal {
            file: std::fs::File::create(path).ok()?,
        };
        j.append_line(header);
        Some(j)
    }

    fn append_line<T: Serialize>(&mut self, value: &T) {
        if let Ok(mut line) = serde_json::to_string(value) {
            line.push('\n');
            // One write per line: a SIGKILL leaves whole lines and at most one torn last line.
            let _ = self.file.write_all(line.as_bytes());
            let _ = self.file.flush();
        }
    }

    /// Appends one finished cell.
    pub fn append(&mut self, cell: &CellLine) {
        self.append_line(cell);
    }
}

/// Whether the journal at `path` is an adequacy journal (its first line is this header).
pub fn is_adequacy_journal(path: &Path) -> bool {
    use std::io::BufRead;
    let Ok(f) = crate::input_file::open_text(path, crate::input_file::Limit::RESULTS) else {
        return false;
    };
    let mut first = String::new();
    if std::io::BufReader::new(f).read_line(&mut first).is_err() {
        return false;
    }
    serde_json::from_str::<serde_json::Value>(&first)
        .is_ok_and(|v| v.get("adequacy_journal").is_some())
}

/// Why a text is not an adequacy journal.
#[derive(Debug, thiserror::Error)]
pub enum AdequacyJournalError {
    /// The first line is not a header.
    #[error("line 1: not an adequacy journal header: {0}")]
    BadHeader(serde_json::Error),
    /// No line at all.
    #[error("empty: no adequacy journal header")]
    Empty,
    /// A header of another version.
    #[error("adequacy journal version {0} (this conform reads version 1)")]
    Version(u32),
    /// A line (not the torn last one) that is not a cell.
    #[error("line {line}: not an adequacy journal line: {error}")]
    NotALine {
        line: usize,
        error: serde_json::Error,
    },
    /// A fault this conform does not know.
    #[error("fault `{0}` is not in this conform's catalogue (`conform adequacy --list-faults`)")]
    UnknownFault(String),
    /// A cell outside the header's plan.
    #[error("a cell of fault `{fault}` in suite `{suite}` that the header does not plan")]
    Unplanned { fault: String, suite: String },
}

/// Turns the text of an adequacy journal back into the partial kill matrix: the finished
/// cells as measured, every cell the header planned that never finished as `unfinished`,
/// `interrupted` saying it was recovered. Never a pass. Err says why it is not a journal.
pub fn recover(text: &str) -> Result<AdequacyReport, AdequacyJournalError> {
    let total = text.lines().count();
    let mut lines = text.lines().enumerate();
    let header: Header = match lines.next() {
        Some((_, l)) => serde_json::from_str(l).map_err(AdequacyJournalError::BadHeader)?,
        None => return Err(AdequacyJournalError::Empty),
    };
    if header.adequacy_journal != 1 {
        return Err(AdequacyJournalError::Version(header.adequacy_journal));
    }
    let mut cells: Vec<CellLine> = Vec::new();
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<CellLine>(line) {
            Ok(c) => cells.push(c),
            // A torn last line (the process died while writing it) is expected.
            Err(_) if i + 1 == total && !text.ends_with('\n') => {}
            Err(error) => return Err(AdequacyJournalError::NotALine { line: i + 1, error }),
        }
    }
    let mut faults = Vec::new();
    for name in &header.faults {
        faults.push(
            conform_reference::faults::find(name)
                .ok_or_else(|| AdequacyJournalError::UnknownFault(name.clone()))?,
        );
    }
    let opts = AdequacyOptions {
        seed_sets: header.seed_sets.len().saturating_sub(1) as u32,
        base_seed: None,
        gates_quick: header.gates_quick,
        run: crate::runner::RunOptions::default(),
        journal: None,
    };
    // Outcomes in seed set order (the order they were measured in), each cell once.
    cells.sort_by_key(|c| c.set);
    let mut seen: BTreeSet<(String, String, u32)> = BTreeSet::new();
    let mut outcomes: BTreeMap<&str, BTreeMap<&str, Vec<SetOutcome>>> = BTreeMap::new();
    for c in &cells {
        if !header.faults.contains(&c.fault) || !header.suites.contains(&c.suite) {
            return Err(AdequacyJournalError::Unplanned {
                fault: c.fault.clone(),
                suite: c.suite.clone(),
            });
        }
        if !seen.insert((c.fault.clone(), c.suite.clone(), c.set)) {
            continue;
        }
        outcomes
            .entry(c.fault.as_str())
            .or_default()
            .entry(c.suite.as_str())
            .or_default()
            .push(c.result.clone());
    }
    let mut unfinished = Vec::new();
    for set in &header.seed_sets {
        for fault in &header.faults {
            for suite in &header.suites {
                if !seen.contains(&(fault.clone(), suite.clone(), set.index)) {
                    unfinished.push(UnfinishedCell {
                        fault: fault.clone(),
                        suite: suite.clone(),
                        set: set.index,
                    });
                }
            }
        }
    }
    let ops: Vec<&str> = header.ops.iter().map(String::as_str).collect();
    let suites: Vec<&str> = header.suites.iter().map(String::as_str).collect();
    let duration_s = cells.iter().map(|c| c.elapsed_s).fold(0.0, f64::max);
    Ok(super::matrix::summarise(
        &faults,
        &ops,
        &suites,
        header.seed_sets.clone(),
        outcomes,
        &opts,
        duration_s,
        super::matrix::Partial {
            interrupted: Some(RECOVERED_INTERRUPT.to_string()),
            unfinished,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            adequacy_journal: 1,
            conform_version: "x".into(),
            started_at: "t".into(),
            seed_sets: vec![
                SeedSet {
                    index: 0,
                    seed: None,
                },
                SeedSet {
                    index: 1,
                    seed: Some(9),
                },
            ],
            faults: vec!["pa-last-partial-block-dropped".into()],
            suites: vec!["pa_decode".into()],
            ops: vec!["pa_decode".into()],
            gates_quick: true,
        }
    }

    #[test]
    fn a_journal_recovers_into_a_partial_matrix_that_never_passes() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.json.journal");
        let mut j = Journal::create(&p, &header()).unwrap();
        j.append(&CellLine {
            fault: "pa-last-partial-block-dropped".into(),
            suite: "pa_decode".into(),
            set: 0,
            result: SetOutcome::Killed {
                case: "c".into(),
                seed: 3,
                by: "out: bitwise".into(),
                margin: Some(12),
            },
            elapsed_s: 0.5,
        });
        drop(j);
        assert!(is_adequacy_journal(&p));
        // A torn last line, as a SIGKILL mid-write leaves it.
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str("{\"fault\": \"pa-last");
        let r = recover(&text).unwrap();
        assert_eq!(r.matrix.len(), 1);
        assert_eq!(r.matrix[0].outcomes.len(), 1);
        assert_eq!(r.matrix[0].kill_rate, Some(1.0));
        assert_eq!(r.interrupted.as_deref(), Some(RECOVERED_INTERRUPT));
        assert_eq!(
            r.unfinished,
            vec![UnfinishedCell {
                fault: "pa-last-partial-block-dropped".into(),
                suite: "pa_decode".into(),
                set: 1,
            }]
        );
        assert_eq!(r.duration_s, 0.5);
        // Killed on the one set measured, yet not a pass: set 1 was never measured.
        assert!(!r.passes());
        assert!(r.required_survivors.is_empty(), "{r:?}");
        assert!(!r.faults[0].passes);
    }

    #[test]
    fn what_is_not_an_adequacy_journal_is_refused() {
        assert!(recover("").is_err());
        assert!(recover("{\"journal\": 1, \"planned\": []}\n").is_err());
        let mut h = header();
        h.faults = vec!["no-such-fault".into()];
        let text = serde_json::to_string(&h).unwrap() + "\n";
        assert!(recover(&text)
            .unwrap_err()
            .to_string()
            .contains("no-such-fault"));
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json.journal");
        std::fs::write(&p, "{\"journal\": 1}\n").unwrap();
        assert!(!is_adequacy_journal(&p));
    }
}
