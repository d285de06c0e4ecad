//! A run's progress on stderr: a bar on a terminal (with the failures printed above it), a
//! line per finished trial otherwise. Skips are not listed one by one: the run's summary sums
//! them up per target and reason (`messages::skip_summary`).

use conform_harness::messages;
use conform_harness::results::{CaseResult, Status};
use conform_harness::runner::RunProgress;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// The console's view of a run.
#[derive(Default)]
pub struct ConsoleProgress {
    bar: Option<ProgressBar>,
}

impl ConsoleProgress {
    pub fn new() -> ConsoleProgress {
        ConsoleProgress::default()
    }
}

impl RunProgress for ConsoleProgress {
    fn start(&mut self, trials: u64) {
        self.bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new(trials);
            b.set_style(
                ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed_precise} {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b
        });
    }

    fn trial_started(&mut self, case: &str, target: &str) {
        if let Some(b) = &self.bar {
            b.set_message(format!("{case} [{target}]"));
        }
    }

    fn trial_finished(&mut self, r: &CaseResult) {
        let line = messages::case_line(r.status, &r.id, &r.target, r.duration_ms, &r.message);
        match &self.bar {
            Some(b) => {
                if r.status.is_failure() {
                    b.println(line);
                }
                b.inc(1);
            }
            None if r.status == Status::Skipped => {}
            None => conform_harness::errln!("{line}"),
        }
    }

    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}
