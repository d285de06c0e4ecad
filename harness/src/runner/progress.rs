//! What the runner says while it runs. The library prints nothing of its own: the caller
//! decides (the CLI draws a bar on a terminal and prints a line per trial otherwise; a program
//! that only wants the typed results passes [`Quiet`]).

use crate::results::CaseResult;

/// Events of a run, in order: [`RunProgress::start`], then for each trial
/// [`RunProgress::trial_started`] and, unless an interrupt cut it short,
/// [`RunProgress::trial_finished`]; then [`RunProgress::finish`].
pub trait RunProgress {
    /// The run is about to start this many trials (cases times targets).
    fn start(&mut self, _trials: u64) {}
    /// `case` begins on `target`.
    fn trial_started(&mut self, _case: &str, _target: &str) {}
    /// A trial ended with a result.
    fn trial_finished(&mut self, _result: &CaseResult) {}
    /// Every trial has ended (or was left unfinished by an interrupt).
    fn finish(&mut self) {}
}

/// Says nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl RunProgress for Quiet {}
