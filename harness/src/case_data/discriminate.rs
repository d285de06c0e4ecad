//! Inputs that discriminate by construction: a case that lists faults in `discriminates`
//! gets, for every seed, an input set on which each of those faults fails the case's own
//! checks. The generator tries the seed's own inputs first, then inputs from seeds derived
//! from it (attempt 1, 2, ...), and keeps the first set that pins every fault — a bounded,
//! deterministic search over the seed's stream, so the same seed always yields the same
//! inputs and any seed yields sharp ones. A rounding-mode fault, for example, changes an output
//! only where a value lands exactly on a tie; the search finds an input set that has such a
//! tie where it shows, instead of hoping the seed does.

use super::CaseDataError;
use crate::suite::Case;
use crate::verdict::judge;
use conform_reference::faults::{self, FaultRun};
use conform_reference::ops::{self, TensorMap, ORACLE};
use conform_reference::parallel::Threads;

/// How many input sets the search tries before it gives up with an error.
pub const MAX_ATTEMPTS: u32 = 2000;

/// The seed of search attempt `attempt` (> 0) from the case's seed.
pub fn attempt_seed(seed: u64, attempt: u32) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(b"conform-discriminate-v1\0");
    h.update(&seed.to_le_bytes());
    h.update(&attempt.to_le_bytes());
    u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().expect("8 bytes"))
}

fn err(case: &Case, message: String) -> CaseDataError {
    CaseDataError::Compute {
        id: case.id.clone(),
        message,
    }
}

/// The faults of `case.discriminates` that `inputs` do not make fail the case's checks.
pub fn unpinned(case: &Case, inputs: &TensorMap) -> Result<Vec<String>, CaseDataError> {
    let family = ops::find(&case.op).map_err(|e| err(case, e.to_string()))?;
    let desc = family
        .describe(&case.params)
        .map_err(|e| err(case, e.to_string()))?;
    let policies = case
        .output_policies(&desc, false)
        .map_err(|e| err(case, e.to_string()))?;
    let threads = Threads::ONE;
    let expected = family
        .run(&case.params, &case.recipe, inputs, threads)
        .map_err(|e| err(case, e.to_string()))?;
    let oracle = if policies.values().any(|p| p.needs().oracle) {
        Some(
            family
                .run(&case.params, ORACLE, inputs, threads)
                .map_err(|e| err(case, e.to_string()))?,
        )
    } else {
        None
    };
    let mut left = Vec::new();
    for name in &case.discriminates {
        let fault = faults::find(name)
            .ok_or_else(|| err(case, format!("`discriminates`: no fault `{name}`")))?;
        let run = faults::run(fault, family, &case.params, &case.recipe, inputs, threads)
            .map_err(|e| err(case, format!("fault `{name}`: {e}")))?;
        let outputs = match run {
            FaultRun::Outputs(o) => o,
            FaultRun::NotApplicable(why) => {
                return Err(err(
                    case,
                    format!("`discriminates`: fault `{name}` does not apply to this case: {why}"),
                ))
            }
        };
        let metrics = judge(
            &desc,
            &policies,
            &expected,
            oracle.as_ref(),
            &outputs,
            None,
            threads,
        )
        .map_err(|e| err(case, e.to_string()))?;
        if metrics.values().all(|m| m.passed) {
            left.push(name.clone());
        }
    }
    Ok(left)
}

/// The inputs of `case` for `seed`: `generate(seed)` when it pins every listed fault, else the
/// first attempt that does.
pub fn search(
    case: &Case,
    seed: u64,
    generate: impl Fn(u64) -> Result<TensorMap, CaseDataError>,
) -> Result<TensorMap, CaseDataError> {
    let mut left = Vec::new();
    for attempt in 0..MAX_ATTEMPTS {
        let s = if attempt == 0 {
            seed
        } else {
            attempt_seed(seed, attempt)
        };
        let inputs = generate(s)?;
        left = unpinned(case, &inputs)?;
        if left.is_empty() {
            return Ok(inputs);
        }
    }
    Err(err(
        case,
        format!(
            "`discriminates`: no input set within {MAX_ATTEMPTS} attempts from seed {seed} makes {} fail this case's checks (the case cannot show this fault: change its shape, inputs or checks, or drop it from `discriminates`)",
            left.join(", ")
        ),
    ))
}
