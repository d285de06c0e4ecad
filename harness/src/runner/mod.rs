//! The runner: every selected case on every selected target, its progress told to the caller
//! ([`RunProgress`]).

pub mod ab;
pub mod anti_cheat;
mod determinism;
pub mod device;
pub mod expected;
pub mod journal;
pub mod junit;
pub mod keep;
pub mod keep_text;
mod kernel_variant;
pub mod memory;
pub mod options;
pub mod prefetch;
pub mod progress;
pub mod trial;

pub use options::RunOptions;
pub use progress::{Quiet, RunProgress};
pub use trial::{capability_params, run_trial, skip_reason, REFERENCE_TARGET};

use crate::results::{CaseResult, RunResults, UnfinishedTrial, RESULTS_SCHEMA_VERSION};
use crate::suite::Case;
use conform_targets::target::Target;

/// The seed of each case for this run: `--seed`, a fresh one, or the case's own.
pub fn seed_for(case: &Case, opts: &RunOptions) -> u64 {
    opts.seeds.seed_for(case.seed)
}

/// Runs `cases` on `targets`, telling `progress` as it goes. Each case gets one seed shared by
/// all targets.
pub fn run_all(
    cases: &[&Case],
    targets: &mut [Box<dyn Target>],
    opts: &RunOptions,
    progress: &mut dyn RunProgress,
) -> RunResults {
    // With several targets, each case's inputs, recipe outputs and oracle are computed once per
    // input set and shared; the cache holds one case at a time, so memory stays bounded.
    let shared;
    let per_case_cache = opts.expectations.is_none() && targets.len() > 1;
    let opts = if per_case_cache {
        let mut o = opts.clone();
        o.expectations = Some(std::sync::Arc::new(expected::ExpectationCache::default()));
        shared = o;
        &shared
    } else {
        opts
    };
    // With one target (and nothing timed), the coming cases' inputs are drawn while this one
    // runs, on as many threads as the reference may use (`--threads`; one thread: no drawing
    // ahead): same bits, less wall time.
    let seeds: Vec<u64> = cases.iter().map(|c| seed_for(c, opts)).collect();
    let drawers = opts.threads.0;
    let ahead: Vec<(&Case, u64)> = if targets.len() == 1 && !opts.perf && drawers > 1 {
        cases
            .iter()
            .zip(&seeds)
            .filter(|(c, _)| trial::worth_drawing_ahead(c, targets[0].as_mut(), opts))
            .map(|(c, &s)| (*c, s))
            .collect()
    } else {
        Vec::new()
    };
    let prefetched;
    let opts = if ahead.is_empty() {
        opts
    } else {
        let plan = ahead.iter().map(|(c, s)| (c.id.clone(), *s)).collect();
        let mut o = opts.clone();
        o.prefetch = Some(std::sync::Arc::new(prefetch::InputPrefetch::new(
            plan, drawers,
        )));
        prefetched = o;
        &prefetched
    };
    std::thread::scope(|scope| {
        let _stop = opts.prefetch.as_deref().map(prefetch::StopOnDrop);
        if let Some(p) = opts.prefetch.as_deref() {
            for _ in 0..drawers {
                let ahead = &ahead;
                scope.spawn(move || p.produce(|i| prefetch::draw(ahead[i].0, ahead[i].1)));
            }
        }
        run_cases(cases, &seeds, targets, opts, per_case_cache, progress)
    })
}

/// The runner's loop over `cases` (with their `seeds`) and `targets`; `per_case_cache`: the
/// expectation cache is this run's own, emptied after each case.
fn run_cases(
    cases: &[&Case],
    seeds: &[u64],
    targets: &mut [Box<dyn Target>],
    opts: &RunOptions,
    per_case_cache: bool,
    progress: &mut dyn RunProgress,
) -> RunResults {
    let total = (cases.len() * targets.len()) as u64;
    progress.start(total);
    let mut results: Vec<CaseResult> = Vec::with_capacity(total as usize);
    let mut unfinished: Vec<UnfinishedTrial> = Vec::new();
    let started_at = crate::perf::perf_file::utc_now_rfc3339();
    let mut journal = opts.journal.as_deref().and_then(|p| {
        let header = journal::JournalHeader {
            journal: 1,
            conform_version: env!("CARGO_PKG_VERSION").to_string(),
            started_at: started_at.clone(),
            fresh_seeds: opts.seeds.is_fresh(),
            hardware: opts.hardware.as_ref().map(|h| h.id.clone()),
            root: opts.root.clone(),
            planned: cases
                .iter()
                .flat_map(|c| {
                    targets.iter().map(|t| UnfinishedTrial {
                        id: c.id.clone(),
                        target: t.name().to_string(),
                    })
                })
                .collect(),
        };
        journal::Journal::create(p, &header)
    });
    for (case, &seed) in cases.iter().zip(seeds) {
        for target in targets.iter_mut() {
            if crate::interrupt::received().is_some() {
                unfinished.push(UnfinishedTrial {
                    id: case.id.clone(),
                    target: target.name().to_string(),
                });
                continue;
            }
            progress.trial_started(&case.id, target.name());
            let r = run_trial(case, target.as_mut(), seed, opts);
            if crate::interrupt::received().is_some() {
                // Cut short by the interrupt (its worker was killed): not a verdict.
                unfinished.push(UnfinishedTrial {
                    id: r.id,
                    target: r.target,
                });
                continue;
            }
            if let Some(j) = &mut journal {
                j.append(&r);
            }
            progress.trial_finished(&r);
            results.push(r);
        }
        if per_case_cache && let Some(cache) = &opts.expectations {
            cache.clear();
        }
    }
    progress.finish();
    let targets = targets
        .iter_mut()
        .map(|t| {
            let name = t.name().to_string();
            match t.availability() {
                conform_targets::Availability::Available {
                    description,
                    versions,
                } => crate::results::TargetInfo {
                    name,
                    available: true,
                    description: Some(description),
                    versions,
                    reason: None,
                    worker: None,
                },
                conform_targets::Availability::Unavailable { reason } => {
                    crate::results::TargetInfo {
                        name,
                        available: false,
                        description: None,
                        versions: Default::default(),
                        reason: Some(reason),
                        worker: None,
                    }
                }
            }
        })
        .map(|mut info: crate::results::TargetInfo| {
            info.worker = opts
                .worker_declarations
                .get(&info.name)
                .map(|p| p.display().to_string());
            info
        })
        .collect();
    RunResults {
        schema_version: RESULTS_SCHEMA_VERSION,
        conform_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at,
        fresh_seeds: opts.seeds.is_fresh(),
        hardware: opts.hardware.as_ref().map(|h| h.id.clone()),
        cases: results,
        interrupted: crate::interrupt::received().map(crate::interrupt::signal_name),
        unfinished,
        ab: None,
        targets,
        root: opts.root.clone(),
    }
}
