//! A/B timing: is a kernel at least as fast as the one it replaces, on the same device, now?
//!
//! For every case the candidate passed, both targets run the same inputs (the candidate's
//! input seed) in alternating blocks of timed iterations — A B, B A, A B, ... — so drift,
//! thermal state and other load on the machine hit both alike; each block starts with the
//! case's warm-up, since the other target ran in between. The samples of each side are then
//! judged by the same gate as `conform perf compare`, the replaced kernel as the baseline: a
//! REGRESSION means the candidate is slower beyond the threshold.

use conform_targets::target::{ExecRequest, Target, TimingRequest};

use super::trial::REFERENCE_TARGET;
use crate::perf::compare::{CaseComparison, SampleComparison};
use crate::perf::{compare_samples, Comparison, GateConfig};
use crate::results::{RunResults, Status};
use crate::suite::Case;

/// How the A/B session runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AbSettings {
    /// Blocks per side (alternating, the order flipped every round).
    pub rounds: u32,
    pub gate: GateConfig,
    /// Overrides of the cases' warm-up and iteration counts (`--warmup`, `--iterations`):
    /// the iterations are spread over the rounds.
    pub warmup: Option<u32>,
    pub iterations: Option<u32>,
}

impl Default for AbSettings {
    fn default() -> Self {
        AbSettings {
            rounds: 6,
            gate: GateConfig::default(),
            warmup: None,
            iterations: None,
        }
    }
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

/// Times `candidate` against `against` on every case of `cases` that the candidate passed in
/// `results`.
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
        let prepared = crate::case_data::generate_inputs(case, done.seed)
            .map_err(|e| e.to_string())
            .and_then(|inputs| {
                conform_reference::ops::find(&case.op)
                    .and_then(|f| f.describe(&case.params))
                    .map(|d| (inputs, d.outputs))
                    .map_err(|e| e.to_string())
            });
        let (inputs, outputs) = match prepared {
            Ok(p) => p,
            Err(e) => {
                out.not_timed.push((case.id.clone(), e));
                continue;
            }
        };
        let per_block = settings
            .iterations
            .unwrap_or(case.perf.iterations)
            .div_ceil(rounds)
            .max(1);
        let warmup = settings.warmup.unwrap_or(case.perf.warmup);
        let recipes = (recipe_for(case, candidate), recipe_for(case, against));
        let request = |recipe: &Option<String>| ExecRequest {
            case_id: case.id.clone(),
            input_set: 0,
            op: case.op.clone(),
            params: case.params.clone(),
            recipe: recipe.clone(),
            inputs: inputs.clone(),
            expected_outputs: outputs.clone(),
            timing: Some(TimingRequest {
                warmup,
                iterations: per_block,
            }),
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut failed = None;
        'rounds: for round in 0..rounds {
            for side in [round % 2 == 0, round % 2 == 1] {
                let (t, samples, recipe): (&mut dyn Target, &mut Vec<f64>, _) = if side {
                    (&mut *candidate, &mut a, &recipes.0)
                } else {
                    (&mut *against, &mut b, &recipes.1)
                };
                let req = request(recipe);
                match t.execute(&req) {
                    Ok(x) if !x.timings_us.is_empty() => samples.extend(x.timings_us),
                    Ok(_) => {
                        failed = Some(format!("`{}` returned no timings", t.name()));
                        break 'rounds;
                    }
                    Err(e) => {
                        failed = Some(format!("`{}`: {e}", t.name()));
                        break 'rounds;
                    }
                }
            }
        }
        if let Some(why) = failed {
            out.not_timed.push((case.id.clone(), why));
            continue;
        }
        let mut result: SampleComparison = compare_samples(&b, &a, &settings.gate);
        result.reason =
            crate::messages::perf::ab_reason(&result.reason, against.name(), rounds, per_block);
        out.comparison.cases.push(CaseComparison {
            id: case.id.clone(),
            target: candidate.name().to_string(),
            hardware: results.hardware.clone(),
            result,
        });
    }
    out
}
