//! The results journal: while a run with `--json PATH` goes on, each finished trial's result is
//! appended to `PATH.journal` as one JSON line and flushed, so a run killed with SIGKILL (which
//! no handler can catch) still leaves its finished cases readable. The journal is removed once
//! the results file itself has been written.

use crate::results::CaseResult;
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct Journal {
    file: std::fs::File,
}

/// The journal path of a results file.
pub fn path_for(results: &Path) -> PathBuf {
    let mut s = results.as_os_str().to_owned();
    s.push(".journal");
    PathBuf::from(s)
}

impl Journal {
    /// Starts an empty journal at `path` (None if it cannot be created: the run goes on, and
    /// the results file is still written at the end).
    pub fn create(path: &Path) -> Option<Journal> {
        std::fs::File::create(path)
            .ok()
            .map(|file| Journal { file })
    }

    /// Appends one result line and flushes it to the file.
    pub fn append(&mut self, r: &CaseResult) {
        if let Ok(mut line) = serde_json::to_string(r) {
            line.push('\n');
            let _ = self.file.write_all(line.as_bytes());
            let _ = self.file.flush();
        }
    }
}

/// Reads a journal back: every complete line (a torn last line is ignored).
pub fn read(path: &Path) -> std::io::Result<Vec<CaseResult>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}
