//! Suite loading errors: each names the file and the line and column, or the case id.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SuiteError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {location}: {message}")]
    Invalid {
        path: PathBuf,
        location: String,
        message: String,
    },
    #[error("duplicate case id `{id}` (in {first} and {second})")]
    DuplicateId {
        id: String,
        first: PathBuf,
        second: PathBuf,
    },
    /// The suites would hold more cases than a project may (counted before expanding).
    #[error(
        "{path}: its cases and grids make {planned} cases, and the suites read before it {loaded}: \
         more than the {limit} cases a project's suites may hold (nothing was expanded)"
    )]
    TooManyCases {
        path: PathBuf,
        planned: u64,
        loaded: u64,
        limit: u64,
    },
    #[error("{path}: case `{id}`: {message}")]
    Case {
        path: PathBuf,
        id: String,
        message: String,
    },
}

impl SuiteError {
    /// A TOML syntax or schema error at a byte span of `text`.
    pub fn at_span(
        path: &std::path::Path,
        text: &str,
        span: Option<std::ops::Range<usize>>,
        message: &str,
    ) -> SuiteError {
        let (line, column) = match span {
            Some(s) => line_col(text, s.start),
            None => (1, 1),
        };
        SuiteError::Parse {
            path: path.to_path_buf(),
            line,
            column,
            message: message.to_string(),
        }
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    #[test]
    fn line_col_counts_from_one() {
        let t = "a = 1\nbb = 2\n";
        assert_eq!(super::line_col(t, 0), (1, 1));
        assert_eq!(super::line_col(t, 6), (2, 1));
        assert_eq!(super::line_col(t, 8), (2, 3));
    }
}
