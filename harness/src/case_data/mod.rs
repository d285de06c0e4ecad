//! Case data: the deterministic inputs of a case for a seed (from the stream of (case id,
//! seed), searched for a set that pins the case's `discriminates` faults), and the reference's
//! outputs for them. One home for every user: the golden store (bless, verify), the runner's
//! expectations (and through them adequacy), A/B timing and `conform explain`.

pub mod discriminate;

use crate::seed;
use crate::suite::Case;
use conform_reference::ops::{self, GenContext, TensorMap};
use conform_reference::parallel::Threads;
use thiserror::Error;

/// Why a case's data could not be computed (the op is unknown, its generator or the reference
/// refused the parameters, or no input set pins the listed faults).
#[derive(Debug, Error)]
pub enum CaseDataError {
    #[error("case `{id}`: {message}")]
    Compute { id: String, message: String },
}

/// A case's inputs for a given seed.
///
/// A case that lists faults in `discriminates` gets the first input set of the seed's search
/// that makes each of them fail its checks ([`discriminate`]).
pub fn generate_inputs(case: &Case, seed: u64) -> Result<TensorMap, CaseDataError> {
    if case.discriminates.is_empty() {
        generate_from_stream(case, seed)
    } else {
        discriminate::search(case, seed, |s| generate_from_stream(case, s))
    }
}

/// The inputs the op's generator draws from the stream of (case id, `seed`), holding every
/// regime the case declares.
fn generate_from_stream(case: &Case, seed: u64) -> Result<TensorMap, CaseDataError> {
    let family = ops::find(&case.op).map_err(|e| compute_err(case, e))?;
    let mut rng = seed::input_stream(&case.id, seed);
    let mut words = seed::words(&mut rng);
    let mut ctx = GenContext::new(&mut words, case.inputs.clone()).with_recipe(&case.recipe);
    family
        .generate_with_regimes(&case.params, &case.regimes, &mut ctx)
        .map_err(|e| compute_err(case, e))
}

/// The reference's outputs for `inputs` with `recipe`.
pub fn reference_outputs(
    case: &Case,
    recipe: &str,
    inputs: &TensorMap,
    threads: Threads,
) -> Result<TensorMap, CaseDataError> {
    let family = ops::find(&case.op).map_err(|e| compute_err(case, e))?;
    family
        .run(&case.params, recipe, inputs, threads)
        .map_err(|e| compute_err(case, e))
}

fn compute_err(case: &Case, e: impl std::fmt::Display) -> CaseDataError {
    CaseDataError::Compute {
        id: case.id.clone(),
        message: e.to_string(),
    }
}
