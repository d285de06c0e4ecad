//! The kill matrix and its summaries: the JSON document `conform adequacy --json` writes
//! (format `conform-adequacy-v1`, described in docs/adequacy.md).

use super::AdequacyOptions;
use conform_reference::faults::Fault;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The format tag of the JSON document.
pub const FORMAT: &str = "conform-adequacy-v1";

/// One seed set: index 0 is the cases' own seeds; the others one fresh seed for every case
/// (replay one with `conform adequacy --seed-sets 0 --seed SEED` or `conform run --seed SEED`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedSet {
    pub index: u32,
    pub seed: Option<u64>,
}

/// What one fault did in one suite under one seed set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SetOutcome {
    /// A case failed: which one, with which input seed, and by which check.
    Killed { case: String, seed: u64, by: String },
    /// Every case it applies to passed.
    Survived { cases: usize },
    /// No case of the suite is one it changes.
    NotApplicable,
    /// The harness could not build a case's expectation (its inputs or reference outputs):
    /// nothing was measured. Never a kill; it fails the run.
    Error {
        case: String,
        seed: u64,
        message: String,
    },
}

/// One fault x suite cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    pub fault: String,
    pub suite: String,
    /// Killed sets / applicable sets; `None` when never applicable.
    pub kill_rate: Option<f64>,
    /// One per seed set, in order.
    pub outcomes: Vec<SetOutcome>,
}

/// One fault over every suite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FaultSummary {
    pub name: String,
    pub family: String,
    /// `quick` (gated), `full` or `advisory`.
    pub requirement: String,
    pub description: String,
    /// Seed sets in which some suite applies it.
    pub applicable_sets: usize,
    /// Seed sets in which some suite killed it.
    pub killed_sets: usize,
    pub kill_rate: Option<f64>,
    /// Every case that killed it at least once.
    pub killed_by: Vec<String>,
    /// The seed sets (indices) in which it survived.
    pub survived_sets: Vec<u32>,
    /// Whether this run gates it, and whether it passes that gate.
    pub gated: bool,
    pub passes: bool,
}

/// One suite's score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SuiteScore {
    pub suite: String,
    /// Faults that apply to at least one of its cases.
    pub applicable_faults: usize,
    /// Of those, the ones it killed on every seed set.
    pub always_killed: usize,
    /// The mean kill rate over the applicable faults.
    pub score: Option<f64>,
}

/// Everything `conform adequacy` measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdequacyReport {
    pub format: String,
    pub seed_sets: Vec<SeedSet>,
    pub faults: Vec<FaultSummary>,
    pub matrix: Vec<Cell>,
    pub suites: Vec<SuiteScore>,
    /// The mean kill rate over every applicable fault.
    pub score: Option<f64>,
    /// Gated faults that survived some seed set, or that no selected case exercises although
    /// the selection holds cases of an op they are defined for.
    pub required_survivors: Vec<String>,
    /// Cases whose expectation could not be built (inputs or reference outputs), with why.
    pub errors: Vec<String>,
    pub duration_s: f64,
}

impl AdequacyReport {
    /// Whether every gated fault was killed on every seed set.
    pub fn passes(&self) -> bool {
        self.required_survivors.is_empty() && self.errors.is_empty()
    }
}

fn rate(killed: usize, applicable: usize) -> Option<f64> {
    (applicable > 0).then(|| killed as f64 / applicable as f64)
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

/// Builds the report from the outcomes (`outcomes[fault][suite][set]`).
pub(super) fn summarise(
    faults: &[&'static Fault],
    ops: &[&str],
    suites: &[&str],
    sets: Vec<SeedSet>,
    outcomes: BTreeMap<&str, BTreeMap<&str, Vec<SetOutcome>>>,
    opts: &AdequacyOptions,
    duration_s: f64,
) -> AdequacyReport {
    let empty = BTreeMap::new();
    let mut matrix = Vec::new();
    let mut summaries = Vec::new();
    for fault in faults {
        let by_suite = outcomes.get(fault.name).unwrap_or(&empty);
        let (mut applicable_sets, mut killed_sets) = (0, 0);
        let mut survived_sets = Vec::new();
        let mut killed_by: Vec<String> = Vec::new();
        for set in &sets {
            let i = set.index as usize;
            let here: Vec<&SetOutcome> = by_suite.values().filter_map(|v| v.get(i)).collect();
            if here.iter().all(|o| **o == SetOutcome::NotApplicable) {
                continue;
            }
            applicable_sets += 1;
            let killers: Vec<&String> = here
                .iter()
                .filter_map(|o| match o {
                    SetOutcome::Killed { case, .. } => Some(case),
                    _ => None,
                })
                .collect();
            if killers.is_empty() {
                survived_sets.push(set.index);
            } else {
                killed_sets += 1;
            }
            for k in killers {
                if !killed_by.contains(k) {
                    killed_by.push(k.clone());
                }
            }
        }
        let gated = super::gated(fault.requirement, opts);
        // A gated fault defined for an op of the selection that no case exercises is a gap.
        let never_applies = applicable_sets == 0 && ops.iter().any(|op| fault.applies_to(op));
        let passes = !gated || (killed_sets == applicable_sets && !never_applies);
        summaries.push(FaultSummary {
            name: fault.name.to_string(),
            family: fault.family.to_string(),
            requirement: fault.requirement.name().to_string(),
            description: fault.description.to_string(),
            applicable_sets,
            killed_sets,
            kill_rate: rate(killed_sets, applicable_sets),
            killed_by,
            survived_sets,
            gated,
            passes,
        });
        for suite in suites {
            let v = by_suite.get(suite).cloned().unwrap_or_default();
            let applicable = v
                .iter()
                .filter(|o| **o != SetOutcome::NotApplicable)
                .count();
            let killed = v
                .iter()
                .filter(|o| matches!(o, SetOutcome::Killed { .. }))
                .count();
            matrix.push(Cell {
                fault: fault.name.to_string(),
                suite: suite.to_string(),
                kill_rate: rate(killed, applicable),
                outcomes: v,
            });
        }
    }
    let suite_scores = suites
        .iter()
        .map(|s| {
            let cells: Vec<&Cell> = matrix
                .iter()
                .filter(|c| c.suite == *s && c.kill_rate.is_some())
                .collect();
            SuiteScore {
                suite: s.to_string(),
                applicable_faults: cells.len(),
                always_killed: cells.iter().filter(|c| c.kill_rate == Some(1.0)).count(),
                score: mean(cells.iter().filter_map(|c| c.kill_rate)),
            }
        })
        .collect();
    let required_survivors = summaries
        .iter()
        .filter(|f| !f.passes)
        .map(|f| f.name.clone())
        .collect();
    let mut errors: Vec<String> = Vec::new();
    for cell in &matrix {
        for o in &cell.outcomes {
            if let SetOutcome::Error {
                case,
                seed,
                message,
            } = o
            {
                let line = format!("{case} (seed {seed}): {message}");
                if !errors.contains(&line) {
                    errors.push(line);
                }
            }
        }
    }
    AdequacyReport {
        errors,
        format: FORMAT.to_string(),
        seed_sets: sets,
        score: mean(summaries.iter().filter_map(|f| f.kill_rate)),
        faults: summaries,
        matrix,
        suites: suite_scores,
        required_survivors,
        duration_s,
    }
}
