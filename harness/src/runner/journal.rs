//! The results journal: while a run with `--json PATH` goes on, each finished trial's result is
//! appended to `PATH.journal` as one JSON line and flushed, so a run killed with SIGKILL (which
//! no handler can catch) still leaves its finished cases readable. The journal is removed once
//! the results file itself has been written.
//!
//! Its first line is a header (the run's metadata and every planned trial), so
//! [`recover`] turns a journal back into a results file: the finished trials as cases, the
//! planned ones that never finished as `unfinished`, the run marked interrupted. `conform
//! report --input PATH.journal` does that (docs/results.md).

use crate::results::{CaseResult, RunResults, UnfinishedTrial, RESULTS_SCHEMA_VERSION};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct Journal {
    file: std::fs::File,
}

/// The journal's first line: what the run was and what it meant to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JournalHeader {
    /// The journal format's version (1); its presence tells a header from a result line.
    pub journal: u32,
    pub conform_version: String,
    pub started_at: String,
    pub fresh_seeds: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    /// The project root the run was given (the results' `root`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// Every (case, target) trial the run planned, in order.
    pub planned: Vec<UnfinishedTrial>,
}

/// What a recovered run's `interrupted` field says: the journal cannot tell which signal (or
/// crash) ended it.
pub const RECOVERED_INTERRUPT: &str = "SIGKILL or a crash (recovered from its journal)";

/// The journal path of a results file.
pub fn path_for(results: &Path) -> PathBuf {
    let mut s = results.as_os_str().to_owned();
    s.push(".journal");
    PathBuf::from(s)
}

/// The journal path of results output `path`: beside it (beside a symbolic link's regular
/// target), or None when `path` is a device or FIFO, beside which nothing is created.
pub fn path_for_output(path: &Path) -> Option<PathBuf> {
    crate::atomic_file::sidecar_base(path).map(|p| path_for(&p))
}

impl Journal {
    /// Starts an empty journal at `path` (None if it cannot be created: the run goes on, and
    /// the results file is still written at the end).
    pub fn create(path: &Path, header: &JournalHeader) -> Option<Journal> {
        // Only a regular file (or nothing) at the journal's path is replaced.
        if let Ok(m) = std::fs::symlink_metadata(path)
            && !m.is_file()
        {
            return None;
        }
        let mut j = std::fs::File::create(path)
            .ok()
            .map(|file| Journal { file })?;
        j.append_line(header);
        Some(j)
    }

    fn append_line<T: Serialize>(&mut self, value: &T) {
        if let Ok(mut line) = serde_json::to_string(value) {
            line.push('\n');
            let _ = self.file.write_all(line.as_bytes());
            let _ = self.file.flush();
        }
    }

    /// Appends one result line and flushes it to the file.
    pub fn append(&mut self, r: &CaseResult) {
        self.append_line(r);
    }
}

/// Why a text is not a results journal.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// A line (not the torn last one) that is neither the header nor a case result.
    #[error("line {line}: not a journal line: {error}")]
    NotALine {
        line: usize,
        error: serde_json::Error,
    },
    /// Nothing to recover.
    #[error("holds no journal header and no finished case")]
    Empty,
}

/// Turns the text of a journal back into a results file (see the module documentation), or
/// says why it is not a journal.
pub fn recover(text: &str) -> Result<RunResults, JournalError> {
    let mut header: Option<JournalHeader> = None;
    let mut cases: Vec<CaseResult> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if i == 0
            && let Ok(h) = serde_json::from_str::<JournalHeader>(line)
        {
            header = Some(h);
            continue;
        }
        match serde_json::from_str::<CaseResult>(line) {
            Ok(c) => cases.push(c),
            // A torn last line (the process died while writing it) is expected; anything else
            // is not a journal.
            Err(_) if i + 1 == text.lines().count() && !text.ends_with('\n') => {}
            Err(error) => return Err(JournalError::NotALine { line: i + 1, error }),
        }
    }
    let Some(h) = header else {
        if cases.is_empty() {
            return Err(JournalError::Empty);
        }
        // A journal written before headers existed: the cases, nothing about the plan.
        return Ok(RunResults {
            schema_version: RESULTS_SCHEMA_VERSION,
            conform_version: String::new(),
            started_at: String::new(),
            fresh_seeds: false,
            hardware: None,
            cases,
            interrupted: Some(RECOVERED_INTERRUPT.to_string()),
            unfinished: Vec::new(),
            ab: None,
            targets: Vec::new(),
            root: None,
        });
    };
    let done: std::collections::BTreeSet<(&str, &str)> = cases
        .iter()
        .map(|c| (c.id.as_str(), c.target.as_str()))
        .collect();
    let unfinished = h
        .planned
        .iter()
        .filter(|t| !done.contains(&(t.id.as_str(), t.target.as_str())))
        .cloned()
        .collect();
    Ok(RunResults {
        schema_version: RESULTS_SCHEMA_VERSION,
        conform_version: h.conform_version,
        started_at: h.started_at,
        fresh_seeds: h.fresh_seeds,
        hardware: h.hardware,
        cases,
        interrupted: Some(RECOVERED_INTERRUPT.to_string()),
        unfinished,
        ab: None,
        targets: Vec::new(),
        root: h.root,
    })
}

/// Reads a journal back: every complete result line (a torn last line is ignored).
pub fn read(path: &Path) -> std::io::Result<Vec<CaseResult>> {
    let text = crate::input_file::read_text(path, crate::input_file::Limit::RESULTS)?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(id: &str, target: &str) -> CaseResult {
        serde_json::from_value(serde_json::json!({
            "id": id, "suite": "s", "op": "o", "target": target, "status": "passed",
            "message": "", "seed": 7, "metrics": {}, "duration_ms": 1.0, "notes": []
        }))
        .unwrap()
    }

    #[test]
    fn a_journal_recovers_into_results_with_the_unfinished_trials() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json.journal");
        let header = JournalHeader {
            journal: 1,
            conform_version: "x".into(),
            started_at: "t".into(),
            fresh_seeds: true,
            hardware: None,
            root: None,
            planned: ["a", "b", "c"]
                .iter()
                .map(|id| UnfinishedTrial {
                    id: id.to_string(),
                    target: "reference".into(),
                })
                .collect(),
        };
        let mut j = Journal::create(&p, &header).unwrap();
        j.append(&case("a", "reference"));
        j.append(&case("b", "reference"));
        drop(j);
        // A torn last line, as a SIGKILL mid-write leaves it.
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str("{\"id\": \"c\", \"sui");
        let r = recover(&text).unwrap();
        assert_eq!(r.cases.len(), 2);
        assert!(r.fresh_seeds);
        assert_eq!(r.interrupted.as_deref(), Some(RECOVERED_INTERRUPT));
        assert_eq!(r.unfinished.len(), 1);
        assert_eq!(r.unfinished[0].id, "c");
        assert_eq!(read(&p).unwrap().len(), 2);
        assert!(recover("{\"schema_version\": 1}\n{}\n").is_err());
        assert!(recover("").is_err());
    }
}
