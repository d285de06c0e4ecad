//! `conform adequacy`: how sharp the suites are. Every selected case runs against the
//! reference with one fault of the catalogue injected ([`conform_targets::FaultTarget`]),
//! through the ordinary runner (the same checks, poison detection and two-input-set
//! anti-cheat as any kernel), over the cases' own seeds and N fresh seed sets. A fault is
//! *killed* in a suite and seed set when at least one case fails; the kill matrix, the kill
//! rates and a score per suite are the result. What it means and how to read it:
//! docs/adequacy.md.
//!
//! Each finished cell is journaled as it completes ([`journal`]); on SIGINT / SIGTERM the
//! matrix stops at the next case and returns what it measured, marked interrupted, with the
//! cells it never measured.

pub mod html;
pub mod journal;
pub mod matrix;
pub mod outputs;
pub mod regimes;
pub mod text;

pub use matrix::{
    AdequacyReport, Cell, FaultSummary, SeedSet, SetOutcome, SuiteScore, UnfinishedCell,
};

use crate::results::Status;
use crate::runner::expected::ExpectationCache;
use crate::runner::{trial::run_trial, RunOptions};
use crate::suite::Case;
use conform_reference::faults::{Fault, Requirement};
use conform_targets::FaultTarget;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// What to measure.
#[derive(Clone, Debug)]
pub struct AdequacyOptions {
    /// Fresh seed sets besides the cases' own seeds.
    pub seed_sets: u32,
    /// The seed of fresh set k is derived from this one (`None`: drawn from the clock).
    pub base_seed: Option<u64>,
    /// Whether the quick tier is part of the selection (required faults are gated then).
    pub gates_quick: bool,
    pub run: RunOptions,
    /// Journal each finished cell here (see [`journal`]); None: no journal.
    pub journal: Option<std::path::PathBuf>,
}

/// The seed of fresh seed set `k` (1-based) from the base seed.
pub fn set_seed(base: u64, k: u32) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(b"conform-adequacy-set-v1\0");
    h.update(&base.to_le_bytes());
    h.update(&k.to_le_bytes());
    u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().expect("8 bytes"))
}

/// Why a failed trial counts as a kill: the failing outputs and their checks, or the
/// runner's message (poison, anti-cheat, an error).
fn kill_reason(r: &crate::results::CaseResult) -> String {
    let outputs: Vec<String> = r
        .metrics
        .iter()
        .filter(|(_, m)| !m.passed)
        .map(|(k, m)| format!("{k}: {}", m.policy))
        .collect();
    if !outputs.is_empty() && r.status == Status::Failed {
        return outputs.join(", ");
    }
    let mut msg = format!("{}: {}", r.status.name(), r.message);
    if msg.len() > 160 {
        let cut = (0..=160)
            .rev()
            .find(|&i| msg.is_char_boundary(i))
            .unwrap_or(0);
        msg.truncate(cut);
        msg.push('…');
    }
    msg
}

/// A kill's margin: the output elements its exact checks (bitwise, ULP: the checks that pin a
/// recipe's knobs) judged wrong. None when no exact check failed: an aggregate check (an error
/// ratio, a CANN standard) measures the whole tensor, and a crash, poison or a
/// nondeterministic repeat is not counted in elements.
fn kill_margin(case: &Case, r: &crate::results::CaseResult) -> Option<u64> {
    if r.status != Status::Failed {
        return None;
    }
    let wrong: u64 = r
        .metrics
        .iter()
        .filter(|(name, m)| !m.passed && case.policies.get(*name).is_some_and(|p| p.is_exact()))
        .map(|(_, m)| m.mismatches.max(m.non_finite + m.unwritten))
        .sum();
    (wrong > 0).then_some(wrong)
}

/// Runs `fault` over the cases of one suite with seed `seed` (`None`: each case's own), the
/// case that killed it last time first. None when an interrupt (SIGINT, SIGTERM) stopped it
/// before it could conclude: the cell is unfinished.
fn run_cell(
    cases: &[&Case],
    target: &mut FaultTarget,
    floor: u64,
    seed: Option<u64>,
    hint: Option<&str>,
    opts: &RunOptions,
) -> Option<SetOutcome> {
    let mut order: Vec<&Case> = cases.to_vec();
    if let Some(h) = hint
        && let Some(i) = order.iter().position(|c| c.id == h)
    {
        let c = order.remove(i);
        order.insert(0, c);
    }
    let mut applicable = 0;
    // A kill below the margin floor keeps looking for a wider one among the other cases; the
    // widest is the cell's kill.
    let mut thin: Option<SetOutcome> = None;
    let margin_of = |o: &Option<SetOutcome>| match o {
        Some(SetOutcome::Killed { margin, .. }) => margin.unwrap_or(0),
        _ => 0,
    };
    for case in order {
        if crate::interrupt::received().is_some() {
            return None;
        }
        let s = seed.unwrap_or(case.seed);
        // An expectation the harness cannot build is the suite's problem, not a kill.
        if let Some(cache) = &opts.expectations
            && let Err(e) = cache.get(case, s, true, opts.threads)
        {
            return Some(SetOutcome::Error {
                case: case.id.clone(),
                seed: s,
                message: e.to_string(),
            });
        }
        let r = run_trial(case, target, s, opts);
        match r.status {
            Status::Passed => applicable += 1,
            Status::Skipped => {}
            _ => {
                let margin = kill_margin(case, &r);
                let kill = Some(SetOutcome::Killed {
                    case: case.id.clone(),
                    seed: s,
                    by: kill_reason(&r),
                    margin,
                });
                if margin.is_none_or(|m| m >= floor) {
                    return kill;
                }
                if margin_of(&kill) > margin_of(&thin) {
                    thin = kill;
                }
            }
        }
    }
    if thin.is_some() {
        return thin;
    }
    Some(if applicable == 0 {
        SetOutcome::NotApplicable
    } else {
        SetOutcome::Survived { cases: applicable }
    })
}

/// Measures `faults` against `cases`; `progress` is called after each (fault, seed set). Each
/// finished cell goes to the journal `opts.journal` names; after SIGINT / SIGTERM no further
/// cell starts, and the report is partial (`interrupted`, `unfinished`).
pub fn measure(
    cases: &[&Case],
    faults: &[&'static Fault],
    opts: &AdequacyOptions,
    mut progress: impl FnMut(&str, usize, usize),
) -> AdequacyReport {
    let start = Instant::now();
    let cache = Arc::new(ExpectationCache::default());
    let mut run = opts.run.clone();
    run.expectations = Some(cache.clone());
    run.golden = None;
    let base = opts.base_seed.unwrap_or_else(crate::seed::fresh_seed);
    let mut sets = vec![SeedSet {
        index: 0,
        seed: None,
    }];
    sets.extend((1..=opts.seed_sets).map(|k| SeedSet {
        index: k,
        seed: Some(set_seed(base, k)),
    }));
    let mut suites: BTreeMap<&str, Vec<&Case>> = BTreeMap::new();
    for c in cases {
        suites.entry(c.suite.as_str()).or_default().push(c);
    }
    let ops: Vec<&str> = cases.iter().map(|c| c.op.as_str()).collect();
    let mut journal = opts.journal.as_deref().and_then(|p| {
        let mut distinct = ops.clone();
        distinct.sort_unstable();
        distinct.dedup();
        journal::Journal::create(
            p,
            &journal::Header {
                adequacy_journal: 1,
                conform_version: env!("CARGO_PKG_VERSION").to_string(),
                started_at: crate::perf::perf_file::utc_now_rfc3339(),
                seed_sets: sets.clone(),
                faults: faults.iter().map(|f| f.name.to_string()).collect(),
                suites: suites.keys().map(|s| s.to_string()).collect(),
                ops: distinct.iter().map(|s| s.to_string()).collect(),
                gates_quick: opts.gates_quick,
            },
        )
    });
    // outcomes[fault][suite] = one outcome per seed set
    let mut outcomes: BTreeMap<&str, BTreeMap<&str, Vec<SetOutcome>>> = BTreeMap::new();
    let mut hints: BTreeMap<(&str, &str), String> = BTreeMap::new();
    let mut unfinished: Vec<UnfinishedCell> = Vec::new();
    for set in &sets {
        cache.clear();
        for (fi, fault) in faults.iter().enumerate() {
            let mut target = FaultTarget::new(fault, run.threads);
            for (suite, suite_cases) in &suites {
                let relevant: Vec<&Case> = suite_cases
                    .iter()
                    .copied()
                    .filter(|c| fault.applies_to(&c.op))
                    .collect();
                let outcome = if crate::interrupt::received().is_some() {
                    None
                } else if relevant.is_empty() {
                    Some(SetOutcome::NotApplicable)
                } else {
                    let hint = hints.get(&(fault.name, *suite)).map(String::as_str);
                    run_cell(
                        &relevant,
                        &mut target,
                        fault.margin_floor(),
                        set.seed,
                        hint,
                        &run,
                    )
                };
                let Some(outcome) = outcome else {
                    unfinished.push(UnfinishedCell {
                        fault: fault.name.to_string(),
                        suite: suite.to_string(),
                        set: set.index,
                    });
                    continue;
                };
                if let SetOutcome::Killed { case, .. } = &outcome {
                    hints.insert((fault.name, suite), case.clone());
                }
                if let Some(j) = &mut journal {
                    j.append(&journal::CellLine {
                        fault: fault.name.to_string(),
                        suite: suite.to_string(),
                        set: set.index,
                        result: outcome.clone(),
                        elapsed_s: start.elapsed().as_secs_f64(),
                    });
                }
                outcomes
                    .entry(fault.name)
                    .or_default()
                    .entry(suite)
                    .or_default()
                    .push(outcome);
            }
            if crate::interrupt::received().is_none() {
                progress(fault.name, set.index as usize, fi);
            }
        }
    }
    let partial = matrix::Partial {
        interrupted: crate::interrupt::received()
            .filter(|_| !unfinished.is_empty())
            .map(crate::interrupt::signal_name),
        unfinished,
    };
    let ops: Vec<&str> = cases.iter().map(|c| c.op.as_str()).collect();
    let mut report = matrix::summarise(
        faults,
        &ops,
        &suites.keys().copied().collect::<Vec<_>>(),
        sets,
        outcomes,
        opts,
        start.elapsed().as_secs_f64(),
        partial,
    );
    report.regimes = regimes::map(cases, opts.gates_quick);
    report
}

/// Whether a fault's requirement is gated by this selection.
pub fn gated(requirement: Requirement, opts: &AdequacyOptions) -> bool {
    requirement == Requirement::Quick && opts.gates_quick
}
