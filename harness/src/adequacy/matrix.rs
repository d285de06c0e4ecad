//! The kill matrix and its summaries: the JSON document `conform adequacy --json` writes
//! (format `conform-adequacy-v1`, described in docs/adequacy.md).

use super::AdequacyOptions;
use conform_reference::faults::Fault;
use std::collections::BTreeMap;

pub use conform_metadata::adequacy::{
    AdequacyReport, Cell, FaultSummary, SeedSet, SetOutcome, SuiteScore, UnfinishedCell, FORMAT,
};

/// What stopped a matrix before its end (nothing, for a complete one).
#[derive(Clone, Debug, Default)]
pub struct Partial {
    /// The signal, or what a recovered journal says.
    pub interrupted: Option<String>,
    /// The cells never measured.
    pub unfinished: Vec<UnfinishedCell>,
}

fn rate(killed: usize, applicable: usize) -> Option<f64> {
    (applicable > 0).then(|| killed as f64 / applicable as f64)
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

/// One fault's outcomes, by suite, each a list by seed set.
type BySuite<'a> = BTreeMap<&'a str, Vec<SetOutcome>>;

/// Builds the report from the outcomes (`outcomes[fault][suite][set]`). A fault with an
/// unfinished cell is not measured to the end: it never passes a gate, and it counts among the
/// required survivors only when it did survive a seed set that was measured.
#[allow(clippy::too_many_arguments)]
pub(super) fn summarise(
    faults: &[&'static Fault],
    ops: &[&str],
    suites: &[&str],
    sets: Vec<SeedSet>,
    outcomes: BTreeMap<&str, BTreeMap<&str, Vec<SetOutcome>>>,
    opts: &AdequacyOptions,
    duration_s: f64,
    partial: Partial,
) -> AdequacyReport {
    let empty = BTreeMap::new();
    let mut matrix = Vec::new();
    let mut summaries = Vec::new();
    for fault in faults {
        let by_suite = outcomes.get(fault.name).unwrap_or(&empty);
        let complete = !partial.unfinished.iter().any(|u| u.fault == fault.name);
        summaries.push(fault_summary(fault, by_suite, &sets, ops, opts, complete));
        matrix.extend(fault_cells(fault, by_suite, suites));
    }
    let suite_scores = suite_scores(suites, &matrix);
    let thin = |f: &FaultSummary| f.gated && !f.thin_sets.is_empty();
    let required_survivors = summaries
        .iter()
        .filter(|f| {
            !f.passes
                && (!f.survived_sets.is_empty()
                    || (!thin(f) && !partial.unfinished.iter().any(|u| u.fault == f.name)))
        })
        .map(|f| f.name.clone())
        .collect();
    let thin_kills = summaries
        .iter()
        .filter(|f| thin(f) && f.survived_sets.is_empty())
        .map(|f| f.name.clone())
        .collect();
    AdequacyReport {
        errors: set_errors(&matrix),
        format: FORMAT.to_string(),
        seed_sets: sets,
        score: mean(summaries.iter().filter_map(|f| f.kill_rate)),
        faults: summaries,
        matrix,
        suites: suite_scores,
        required_survivors,
        duration_s,
        interrupted: partial.interrupted,
        unfinished: partial.unfinished,
        regimes: Vec::new(),
        thin_kills,
    }
}

/// A fault's row of the summary: over the seed sets where some suite applies it, how many
/// sets killed it, by which cases, which survived, and whether it passes its gate (never when
/// it was not `complete`ly measured).
fn fault_summary(
    fault: &Fault,
    by_suite: &BySuite,
    sets: &[SeedSet],
    ops: &[&str],
    opts: &AdequacyOptions,
    complete: bool,
) -> FaultSummary {
    let (mut applicable_sets, mut killed_sets) = (0, 0);
    let mut survived_sets = Vec::new();
    let mut thin_sets = Vec::new();
    let mut min_margin: Option<u64> = None;
    let floor = fault.margin_floor();
    let mut killed_by: Vec<String> = Vec::new();
    for set in sets {
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
        // The set's margin: the widest of its suites' kills; a kill not measured in elements
        // (an aggregate check, a crash, poison) leaves the set without one.
        let margins: Vec<Option<u64>> = here
            .iter()
            .filter_map(|o| match o {
                SetOutcome::Killed { margin, .. } => Some(*margin),
                _ => None,
            })
            .collect();
        let margin = if margins.iter().any(Option::is_none) {
            None
        } else {
            margins.iter().flatten().max().copied()
        };
        if killers.is_empty() {
            survived_sets.push(set.index);
        } else {
            killed_sets += 1;
            if let Some(m) = margin {
                min_margin = Some(min_margin.map_or(m, |x| x.min(m)));
                if m < floor {
                    thin_sets.push(set.index);
                }
            }
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
    let passes = !gated
        || (complete && killed_sets == applicable_sets && !never_applies && thin_sets.is_empty());
    FaultSummary {
        name: fault.name.to_string(),
        family: fault.family.to_string(),
        requirement: fault.requirement.name().to_string(),
        description: fault.description.to_string(),
        applicable_sets,
        killed_sets,
        kill_rate: rate(killed_sets, applicable_sets),
        killed_by,
        survived_sets,
        min_margin,
        margin_floor: floor,
        thin_sets,
        gated,
        passes,
    }
}

/// A fault's cells of the matrix, one per suite, in the suites' order.
fn fault_cells<'a>(
    fault: &'a Fault,
    by_suite: &'a BySuite,
    suites: &'a [&str],
) -> impl Iterator<Item = Cell> + 'a {
    suites.iter().map(move |suite| {
        let v = by_suite.get(suite).cloned().unwrap_or_default();
        let applicable = v
            .iter()
            .filter(|o| **o != SetOutcome::NotApplicable)
            .count();
        let killed = v
            .iter()
            .filter(|o| matches!(o, SetOutcome::Killed { .. }))
            .count();
        Cell {
            fault: fault.name.to_string(),
            suite: suite.to_string(),
            kill_rate: rate(killed, applicable),
            outcomes: v,
        }
    })
}

/// Each suite's score: the mean kill rate over the faults it applies.
fn suite_scores(suites: &[&str], matrix: &[Cell]) -> Vec<SuiteScore> {
    suites
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
        .collect()
}

/// The distinct errors of the matrix's seed sets, in the order first met.
fn set_errors(matrix: &[Cell]) -> Vec<String> {
    let mut errors: Vec<String> = Vec::new();
    for cell in matrix {
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
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::RunOptions;
    use conform_reference::faults;

    fn opts() -> AdequacyOptions {
        AdequacyOptions {
            seed_sets: 1,
            base_seed: Some(1),
            gates_quick: true,
            run: RunOptions::default(),
            journal: None,
        }
    }

    fn kill(margin: Option<u64>) -> SetOutcome {
        SetOutcome::Killed {
            case: "s/c".into(),
            seed: 1,
            by: "out: bitwise".into(),
            margin,
        }
    }

    fn report(fault: &'static Fault, outcomes: Vec<SetOutcome>) -> AdequacyReport {
        let sets = (0..outcomes.len() as u32)
            .map(|i| SeedSet {
                index: i,
                seed: (i > 0).then_some(7),
            })
            .collect();
        let mut by_suite = BTreeMap::new();
        by_suite.insert("s", outcomes);
        let mut all = BTreeMap::new();
        all.insert(fault.name, by_suite);
        summarise(
            &[fault],
            &["pa_decode"],
            &["s"],
            sets,
            all,
            &opts(),
            0.0,
            Partial::default(),
        )
    }

    #[test]
    fn a_required_kill_below_its_margin_floor_fails_the_gate_and_says_so() {
        let f = faults::find("pa-v2-combine-swapped").unwrap();
        assert_eq!(f.margin_floor(), faults::margins::DEFAULT_MARGIN_FLOOR);
        // Killed on both sets, once by 3 elements: thin, not a survivor, not a pass.
        let r = report(f, vec![kill(Some(40)), kill(Some(3))]);
        let s = &r.faults[0];
        assert_eq!(
            (s.killed_sets, s.min_margin, s.margin_floor),
            (2, Some(3), 8)
        );
        assert_eq!(s.thin_sets, vec![1]);
        assert!(!s.passes && !r.passes());
        assert_eq!(r.thin_kills, vec![f.name.to_string()]);
        assert!(r.required_survivors.is_empty());
        // At the floor, and a kill not counted in elements: a pass.
        let r = report(f, vec![kill(Some(8)), kill(None)]);
        assert!(r.passes(), "{r:?}");
        assert_eq!(r.faults[0].min_margin, Some(8));
        // A lower floor with its reason: one element is enough.
        let nan = faults::find("any-nan-in-largest-output").unwrap();
        assert!(nan.margin_floor_reason().is_some());
        assert!(report(nan, vec![kill(Some(1)), kill(Some(1))]).passes());
    }
}
