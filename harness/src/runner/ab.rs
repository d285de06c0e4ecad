//! A/B timing: is a kernel at least as fast as the one it replaces, on the same device, now?
//!
//! The comparison runs in rounds. Each round starts both targets afresh (a worker gets a new
//! process, the in-process reference new threads: [`Target::renew`]), lets each run the
//! round's first case once untimed (a fresh process is slow beyond a case's warm-up), and
//! times every case the candidate passed in one short A B B A block (B A A B in the next
//! round): the outer side's two halves around the inner side's whole, each request starting
//! with its warm-up, all on the same inputs (the candidate's input seed). A round gives one paired ratio per
//! case (candidate median over baseline median), and the verdict is judged on those ratios
//! ([`crate::perf::rounds::judge_rounds`]): where the scheduler placed a process, its memory
//! layout and its clock hold for every sample of that side in that round, so the samples of a
//! round are not independent, and a verdict on the pooled samples would take one unlucky
//! placement for a regression. Load spread evenly over time moves both sides of a round
//! alike; a linear drift within a round cancels in A B B A.

use conform_targets::target::{ExecRequest, Target, TargetError, TimingRequest};

use super::trial::REFERENCE_TARGET;
use crate::perf::compare::CaseComparison;
use crate::perf::confirmation::judge_and_confirm;
use crate::perf::rounds::{judge_rounds, Round, DEFAULT_ROUNDS_RANK_ALPHA};
use crate::perf::{Comparison, GateConfig, SampleComparison};
use crate::results::{RunResults, Status};
use crate::suite::Case;

/// Rounds of the A/B comparison unless asked otherwise: the choice of the calibration in
/// `harness/tests/harness/perf_nightly_simulation.rs` (docs/perf.md, "The same-night
/// control").
pub const DEFAULT_ROUNDS: u32 = 16;

/// Untimed runs before each request's timed ones unless `--warmup` says otherwise: the other
/// side ran in between, so the caches need one run; a fresh process is warmed by the round's
/// priming request (with the case's own warm-up).
pub const WARMUP_PER_REQUEST: u32 = 1;

/// Fewest samples a side in one round: the round's median then holds against one spike.
pub const MIN_SAMPLES_PER_ROUND: u32 = 4;

/// How the A/B session runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AbSettings {
    /// Rounds, each in fresh processes of both targets.
    pub rounds: u32,
    /// The verdict's threshold, interval level (`ci_alpha`), the rounds' signed-rank level
    /// (`rank_alpha`) and the fences that set an outlier round aside (`fence_k`).
    pub gate: GateConfig,
    /// Overrides of the cases' warm-up and iteration counts (`--warmup`, `--iterations`):
    /// the iterations are the samples a side, spread over the rounds.
    pub warmup: Option<u32>,
    pub iterations: Option<u32>,
}

/// The gate of an A/B comparison in rounds: the default gate with the rounds' signed-rank
/// level.
pub fn rounds_gate(threshold: GateConfig) -> GateConfig {
    GateConfig {
        rank_alpha: DEFAULT_ROUNDS_RANK_ALPHA,
        ..threshold
    }
}

impl Default for AbSettings {
    fn default() -> Self {
        AbSettings {
            rounds: DEFAULT_ROUNDS,
            gate: rounds_gate(GateConfig::default()),
            warmup: None,
            iterations: None,
        }
    }
}

/// Samples a side in each round for `iterations` samples a side in all over `rounds` rounds:
/// at least [`MIN_SAMPLES_PER_ROUND`], and even (the outer side's two halves are equal).
pub fn samples_per_round(iterations: u32, rounds: u32) -> u32 {
    let n = iterations
        .div_ceil(rounds.max(1))
        .max(MIN_SAMPLES_PER_ROUND);
    n + n % 2
}

/// The comparison, and the cases that could not be timed on both sides (with the reason).
#[derive(Debug, Clone, PartialEq)]
pub struct AbOutcome {
    pub against: String,
    pub comparison: Comparison,
    pub not_timed: Vec<(String, String)>,
}

/// The recipe a target is asked for: the case's own where the target implements it (the
/// reference implements every recipe), else the target's own numerics.
fn recipe_for(case: &Case, target: &mut dyn Target) -> Option<String> {
    let declared = target.name() == REFERENCE_TARGET
        || target
            .capabilities()
            .ops
            .get(&case.op)
            .is_some_and(|o| o.recipes.iter().any(|r| r == &case.recipe));
    declared.then(|| case.recipe.clone())
}

/// A case ready to be timed: its requests (one per side) and what its rounds gave so far.
struct Timed<'a> {
    case: &'a Case,
    requests: [ExecRequest; 2],
    rounds: Vec<Round>,
    lost: Vec<String>,
    /// Why it cannot be timed at all (a side that does not support it, is unavailable).
    not_timed: Option<String>,
}

/// Which side a request times.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Baseline,
    Candidate,
}

/// Times `candidate` against `against` on every case of `cases` that the candidate passed in
/// `results`, in `settings.rounds` rounds of fresh processes.
pub fn ab_compare(
    cases: &[&Case],
    results: &RunResults,
    candidate: &mut dyn Target,
    against: &mut dyn Target,
    settings: &AbSettings,
) -> AbOutcome {
    let mut out = AbOutcome {
        against: against.name().to_string(),
        comparison: Comparison {
            config: settings.gate,
            cases: Vec::new(),
        },
        not_timed: Vec::new(),
    };
    let rounds = settings.rounds.max(1);
    let mut timed: Vec<Timed> = Vec::new();
    for case in cases {
        let Some(done) = results
            .cases
            .iter()
            .find(|r| r.id == case.id && r.target == candidate.name())
        else {
            continue;
        };
        if done.status != Status::Passed {
            continue;
        }
        match prepare(case, done.seed, settings, rounds, candidate, against) {
            Ok(requests) => timed.push(Timed {
                case,
                requests,
                rounds: Vec::new(),
                lost: Vec::new(),
                not_timed: None,
            }),
            Err(e) => out.not_timed.push((case.id.clone(), e.to_string())),
        }
    }
    let all: Vec<usize> = (0..timed.len()).collect();
    run_rounds(&mut timed, &all, rounds, candidate, against);
    // The cases judged (indices into `timed`), and their judgements in the same order.
    let live: Vec<usize> = (0..timed.len())
        .filter(|&i| timed[i].not_timed.is_none())
        .collect();
    let judged: Vec<SampleComparison> = live
        .iter()
        .map(|&i| {
            judge_rounds(
                &timed[i].rounds,
                rounds,
                timed[i].lost.clone(),
                &settings.gate,
            )
        })
        .collect();
    // The cases still flagged are timed again, alone, in as many fresh rounds (none when
    // interrupted: `run_rounds` stops at once, and the case is INCONCLUSIVE for too few).
    let judged = judge_and_confirm(judged, &settings.gate, |flagged| {
        let again: Vec<usize> = flagged.iter().map(|&k| live[k]).collect();
        for &i in &again {
            timed[i].rounds.clear();
            timed[i].lost.clear();
        }
        run_rounds(&mut timed, &again, rounds, candidate, against);
        again
            .iter()
            .map(|&i| {
                let t = &mut timed[i];
                // A side that could no longer run the case loses the confirmation's rounds.
                if let Some(why) = t.not_timed.take() {
                    t.lost.push(crate::messages::perf::confirmation_lost(&why));
                }
                judge_rounds(&t.rounds, rounds, t.lost.clone(), &settings.gate)
            })
            .collect()
    });
    let mut judged = judged.into_iter();
    for (i, t) in timed.into_iter().enumerate() {
        if live.binary_search(&i).is_err() {
            let why = t.not_timed.unwrap_or_default();
            out.not_timed.push((t.case.id.clone(), why));
            continue;
        }
        let mut result = judged.next().expect("one judgement per case judged");
        result.reason = crate::messages::perf::ab_reason(&result.reason, against.name());
        out.comparison.cases.push(CaseComparison {
            id: t.case.id.clone(),
            target: candidate.name().to_string(),
            hardware: results.hardware.clone(),
            result,
        });
    }
    out
}

/// Times the cases `which` (indices into `timed`) in `rounds` rounds, each in fresh processes
/// of both targets, adding each case's rounds (and the rounds it lost) to its record.
fn run_rounds(
    timed: &mut [Timed],
    which: &[usize],
    rounds: u32,
    candidate: &mut dyn Target,
    against: &mut dyn Target,
) {
    for round in 0..rounds {
        if crate::interrupt::received().is_some()
            || which.iter().all(|&i| timed[i].not_timed.is_some())
        {
            break;
        }
        candidate.renew();
        against.renew();
        // Forward on even rounds, backward on odd ones: no case always runs first.
        let order: Vec<usize> = if round % 2 == 0 {
            which.to_vec()
        } else {
            which.iter().rev().copied().collect()
        };
        // A fresh process is slower for a while beyond any case's warm-up (measured: the
        // round's first case 14-27% slower on the side whose samples all came from its
        // first requests): each side first runs the round's first case once, untimed.
        if let Some(first) = order
            .iter()
            .map(|&i| &timed[i])
            .find(|t| t.not_timed.is_none())
        {
            let _ = candidate.execute(&priming(first, 0));
            let _ = against.execute(&priming(first, 1));
        }
        for i in order {
            if crate::interrupt::received().is_some() {
                break;
            }
            time_round(&mut timed[i], round, candidate, against);
        }
    }
}

/// The untimed first request of a side (`0` candidate, `1` baseline) in a round: the case's
/// request with the case's own warm-up (at least the request's).
fn priming(t: &Timed, side: usize) -> ExecRequest {
    let mut r = t.requests[side].clone();
    if let Some(timing) = r.timing.as_mut() {
        timing.warmup = t.case.perf.warmup.max(timing.warmup);
    }
    r
}

/// Why a case cannot be timed A/B: its inputs or its op's outputs cannot be had.
#[derive(Debug, thiserror::Error)]
enum PrepareError {
    #[error(transparent)]
    Inputs(#[from] crate::case_data::CaseDataError),
    #[error(transparent)]
    Op(#[from] conform_reference::ops::OpError),
}

/// The two requests of a case (candidate's, then baseline's): its inputs of `seed`, its
/// outputs, each side's recipe, [`WARMUP_PER_REQUEST`] and half a round's samples; or why it
/// cannot be.
fn prepare(
    case: &Case,
    seed: u64,
    settings: &AbSettings,
    rounds: u32,
    candidate: &mut dyn Target,
    against: &mut dyn Target,
) -> Result<[ExecRequest; 2], PrepareError> {
    let inputs = crate::case_data::generate_inputs(case, seed)?;
    let outputs = conform_reference::ops::find(&case.op)
        .and_then(|f| f.describe(&case.params))
        .map(|d| d.outputs)?;
    let per_round = samples_per_round(settings.iterations.unwrap_or(case.perf.iterations), rounds);
    let timing = TimingRequest {
        warmup: settings.warmup.unwrap_or(WARMUP_PER_REQUEST),
        iterations: per_round / 2,
    };
    let request = |recipe: Option<String>| ExecRequest {
        case_id: case.id.clone(),
        input_set: 0,
        op: case.op.clone(),
        params: case.params.clone(),
        recipe,
        inputs: inputs.clone(),
        expected_outputs: outputs.clone(),
        poison: Default::default(),
        timing: Some(timing),
    };
    Ok([
        request(recipe_for(case, candidate)),
        request(recipe_for(case, against)),
    ])
}

/// One round of a case: A B B A on even rounds (the baseline outside), B A A B on odd ones:
/// the outer side's two halves around one request of the inner side's two halves (each request
/// starts with its warm-up, so every sample of either side follows the same untimed runs, and
/// a drift that is linear over the block moves both sides' means alike). A side that fails
/// loses the round (named in `lost`); one that cannot run the case at all stops its timing.
fn time_round(t: &mut Timed, round: u32, candidate: &mut dyn Target, against: &mut dyn Target) {
    if t.not_timed.is_some() {
        return;
    }
    let (outer, inner) = if round.is_multiple_of(2) {
        (Side::Baseline, Side::Candidate)
    } else {
        (Side::Candidate, Side::Baseline)
    };
    let mut r = Round::default();
    for (side, halves) in [(outer, 1), (inner, 2), (outer, 1)] {
        let (target, request): (&mut dyn Target, &ExecRequest) = match side {
            Side::Candidate => (&mut *candidate, &t.requests[0]),
            Side::Baseline => (&mut *against, &t.requests[1]),
        };
        let mut req = request.clone();
        if let Some(timing) = req.timing.as_mut() {
            timing.iterations *= halves;
        }
        match target.execute(&req) {
            Ok(x) if !x.timings_us.is_empty() => match side {
                Side::Candidate => r.candidate.extend(x.timings_us),
                Side::Baseline => r.baseline.extend(x.timings_us),
            },
            Ok(_) => {
                t.lost.push(crate::messages::perf::round_lost(
                    round,
                    target.name(),
                    "returned no timings",
                ));
                return;
            }
            Err(e @ (TargetError::Unsupported(_) | TargetError::Unavailable(_))) => {
                t.not_timed = Some(format!("`{}`: {e}", target.name()));
                return;
            }
            Err(e) => {
                t.lost.push(crate::messages::perf::round_lost(
                    round,
                    target.name(),
                    &e.to_string(),
                ));
                return;
            }
        }
    }
    t.rounds.push(r);
}
