//! Why a `conform` command stopped, as one type: each variant's `Display` is the message the
//! user reads and [`CliError::exit_code`] is the code the exit-code table (README.md,
//! docs/results.md, `conform_metadata::exit_code`) gives it. Commands return
//! `Result<i32, CliError>`: `Ok` holds the code their work earned (passed, failed, nothing
//! judged, interrupted), `Err` why they could not do or deliver it. [`report`] is the one
//! place an error is printed and turned into the process's code.

use conform_harness::atomic_file::OutputPathError;
use conform_harness::exit_code;
use conform_harness::golden::review::ReviewError;
use conform_harness::golden::GoldenError;
use conform_harness::perf::history::HistoryError;
use conform_harness::perf::PerfError;
use conform_harness::project::{ProjectError, SelectError};
use conform_harness::report::ReportError;
use conform_harness::session::{OpenTargetError, OutputCheckError, RunError};
use conform_harness::suite::SuiteError;

/// A command that could not run, or whose outcome could not be written.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// No project around the working directory, or `--root` names none. Exit 2.
    #[error("{0}")]
    Project(String),
    /// A bad argument or value (a `--filter` that is no regex, an unknown fault or suite, a
    /// target that cannot be opened, a hardware profile that does not load). Exit 2.
    #[error("{0}")]
    Usage(String),
    /// A suite file that does not load. Exit 2.
    #[error(transparent)]
    Suite(#[from] SuiteError),
    /// The golden store: missing or malformed MANIFEST, damaged files, stale staged data. Exit 2.
    #[error(transparent)]
    Golden(#[from] GoldenError),
    /// `golden review` refused (CI set, a pattern matching nothing, no terminal). Exit 2.
    #[error(transparent)]
    Review(#[from] ReviewError),
    /// A perf file, gate setting or comparison input that cannot be used. Exit 2.
    #[error(transparent)]
    Perf(#[from] PerfError),
    /// A history store that cannot be opened or used. Exit 2.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// `report`: an input that cannot be read, or a report that cannot be written. Exit 2.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// `mc2 plan`: its own codes (2 for its inputs, 1 when the plan cannot be printed).
    #[error(transparent)]
    Mc2(#[from] super::mc2::Mc2CliError),
    /// An output path that cannot be written, found before any work was done. Exit 2.
    #[error("{0}")]
    OutputPath(String),
    /// Nothing to judge: the selection matched no case. Exit 4.
    #[error("{0}")]
    NothingJudged(String),
    /// The work was done but an output could not be written. `verdict` is the code the work
    /// itself earned: exit 1 when that was a success or "nothing judged", else the verdict (a
    /// failure stays 1, an interrupt 130 / 143).
    #[error("{message}")]
    OutputAfterWork { message: String, verdict: i32 },
}

impl CliError {
    /// The process exit code of this error (the table in README.md and docs/results.md).
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Project(_)
            | CliError::Usage(_)
            | CliError::Suite(_)
            | CliError::Golden(_)
            | CliError::Review(_)
            | CliError::Perf(_)
            | CliError::History(_)
            | CliError::Report(_)
            | CliError::OutputPath(_) => exit_code::USAGE,
            CliError::Mc2(e) => e.exit_code(),
            CliError::NothingJudged(_) => exit_code::NOTHING_JUDGED,
            CliError::OutputAfterWork { verdict, .. } => after_work(*verdict),
        }
    }

    /// An output of finished work that could not be written, the work having earned `verdict`.
    pub fn after_work(message: impl std::fmt::Display, verdict: i32) -> CliError {
        CliError::OutputAfterWork {
            message: message.to_string(),
            verdict,
        }
    }
}

/// The code of finished work whose output could not be written: a success, "nothing
/// judged" or "inconclusive" becomes a failure (the output is lost); a worse verdict is kept.
fn after_work(verdict: i32) -> i32 {
    if matches!(
        verdict,
        exit_code::SUCCESS | exit_code::NOTHING_JUDGED | exit_code::INCONCLUSIVE
    ) {
        exit_code::FAILURE
    } else {
        verdict
    }
}

/// Prints `e` as the user's error line on stderr and returns its exit code: the one place the
/// command line turns an error into what the user sees.
pub fn report(e: &CliError) -> i32 {
    print(e);
    e.exit_code()
}

/// Prints `e` as an error line without ending the command: a second output that failed while
/// the first failure is the one the command returns.
pub fn print(e: &dyn std::fmt::Display) {
    conform_harness::errln!("{}", conform_harness::messages::error_line(e));
}

impl From<ProjectError> for CliError {
    fn from(e: ProjectError) -> CliError {
        CliError::Project(e.to_string())
    }
}

impl From<SelectError> for CliError {
    fn from(e: SelectError) -> CliError {
        match e {
            SelectError::Suite(e) => CliError::Suite(e),
            SelectError::Filter(_) | SelectError::UnknownSuites(_) => {
                CliError::Usage(e.to_string())
            }
        }
    }
}

impl From<RunError> for CliError {
    fn from(e: RunError) -> CliError {
        match e {
            RunError::Select(e) => e.into(),
            RunError::NoCases => CliError::NothingJudged(e.to_string()),
            RunError::Targets(_) | RunError::AbSettings(_) => CliError::Usage(e.to_string()),
            RunError::Hardware(e) => CliError::Perf(e),
            RunError::Golden(e) => CliError::Golden(e),
            RunError::KeepOutputs(_) => CliError::OutputPath(e.to_string()),
        }
    }
}

impl From<OpenTargetError> for CliError {
    fn from(e: OpenTargetError) -> CliError {
        CliError::Usage(e.to_string())
    }
}

impl From<OutputPathError> for CliError {
    fn from(e: OutputPathError) -> CliError {
        CliError::OutputPath(e.to_string())
    }
}

impl From<OutputCheckError> for CliError {
    fn from(e: OutputCheckError) -> CliError {
        CliError::OutputPath(e.to_string())
    }
}

impl From<String> for CliError {
    fn from(message: String) -> CliError {
        CliError::Usage(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_error_carries_the_code_of_its_table_row() {
        let usage = [
            CliError::Project("p".into()),
            CliError::Usage("u".into()),
            CliError::OutputPath("o".into()),
            CliError::Review(ReviewError::OnCi),
            CliError::Golden(GoldenError::BlessOnCi),
        ];
        for e in &usage {
            assert_eq!(e.exit_code(), exit_code::USAGE, "{e}");
        }
        assert_eq!(
            CliError::NothingJudged("n".into()).exit_code(),
            exit_code::NOTHING_JUDGED
        );
        for (verdict, code) in [
            (exit_code::SUCCESS, exit_code::FAILURE),
            (exit_code::NOTHING_JUDGED, exit_code::FAILURE),
            (exit_code::INCONCLUSIVE, exit_code::FAILURE),
            (exit_code::FAILURE, exit_code::FAILURE),
            (exit_code::INTERRUPTED_SIGINT, exit_code::INTERRUPTED_SIGINT),
            (
                exit_code::INTERRUPTED_SIGTERM,
                exit_code::INTERRUPTED_SIGTERM,
            ),
        ] {
            let e = CliError::after_work("x: cannot write", verdict);
            assert_eq!(e.exit_code(), code, "after work with verdict {verdict}");
            assert_eq!(e.to_string(), "x: cannot write");
        }
    }
}
