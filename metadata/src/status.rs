//! The outcome of one (case, target) trial, as every results file, report and exit code
//! sees it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The outcome of one (case, target) trial.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every output met its check policy.
    Passed,
    /// An output broke its check policy.
    Failed,
    /// Not run: outside the target's capabilities, or the target is unavailable here.
    Skipped,
    /// The trial could not be judged (bad worker answer, missing output, harness problem).
    Error,
    /// The target gave no answer in time and was killed.
    Timeout,
    /// The target's process died.
    Crashed,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Passed,
        Status::Failed,
        Status::Skipped,
        Status::Error,
        Status::Timeout,
        Status::Crashed,
    ];

    /// The name written in results files (`passed`, `failed`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
            Status::Error => "error",
            Status::Timeout => "timeout",
            Status::Crashed => "crashed",
        }
    }

    /// Whether this status makes a run fail (exit code [`crate::exit_code::FAILURE`]).
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Status::Failed | Status::Error | Status::Timeout | Status::Crashed
        )
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_serialised_form() {
        for s in Status::ALL {
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.name())
            );
        }
    }
}
