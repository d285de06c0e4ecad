//! The arguments every perf gate command takes (`perf compare`, `perf history gate`): the
//! regression threshold and where the comparison's JSON goes.

use std::path::PathBuf;

use clap::Args;

use conform_harness::messages::perf as messages;
use conform_harness::perf::{GateConfig, PerfError};

/// What every gate command takes: the threshold and where to write its JSON.
#[derive(Debug, Args)]
pub struct GateOutputArgs {
    /// Relative slowdown that counts as a regression (0.03 = 3%).
    #[arg(long, default_value_t = 0.03, allow_negative_numbers = true)]
    pub threshold: f64,
    /// Also write the comparison as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

impl GateOutputArgs {
    /// Checks, before anything is computed, that the JSON output can be written.
    pub fn check(&self) -> Result<GateConfig, PerfError> {
        if let Some(out) = &self.json {
            conform_harness::atomic_file::check_writable(out).map_err(|problem| {
                PerfError::InvalidArgument {
                    field: "--json",
                    problem: problem.to_string(),
                }
            })?;
        }
        Ok(GateConfig::with_threshold(self.threshold)?)
    }

    /// Writes `value` as pretty JSON to `--json` (when given); returns the line to print.
    pub fn write_json<T: serde::Serialize>(&self, value: &T) -> Result<Option<String>, PerfError> {
        let Some(out) = &self.json else {
            return Ok(None);
        };
        let mut text = serde_json::to_string_pretty(value).map_err(PerfError::Serialise)?;
        text.push('\n');
        conform_harness::atomic_file::write(out, text.as_bytes()).map_err(|source| {
            PerfError::Write {
                path: out.clone(),
                source,
            }
        })?;
        Ok(Some(messages::wrote_json(out)))
    }
}
