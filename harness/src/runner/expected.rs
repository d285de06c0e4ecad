//! What a target's outputs are judged against, for one case and one input set: the inputs, the
//! reference's outputs with the case's recipe (from the golden file when it holds exactly this
//! input set), and the oracle when a policy needs it.

use crate::golden::compute::{generate_inputs, reference_outputs, split_golden};
use crate::golden::{GoldenError, GoldenStore};
use crate::suite::{Case, Tier};
use conform_reference::ops::{TensorMap, ORACLE};
use conform_reference::parallel::Threads;

/// The expectations of one input set.
#[derive(Clone, Debug)]
pub struct Expectation {
    pub seed: u64,
    pub inputs: TensorMap,
    /// The reference's outputs with the case's recipe.
    pub expected: TensorMap,
    /// Whether `expected` came from the golden store.
    pub from_golden: bool,
    /// The exact oracle's outputs (F64), when asked for.
    pub oracle: Option<TensorMap>,
}

/// Builds the expectation of `case` for `seed`. With `golden` set and the case's own seed on a
/// quick-tier case, the golden file's inputs must equal the regenerated ones (else the input
/// generator drifted) and its outputs become `expected`.
pub fn expectation(
    case: &Case,
    seed: u64,
    golden: Option<&GoldenStore>,
    want_oracle: bool,
    threads: Threads,
) -> Result<Expectation, GoldenError> {
    let inputs = generate_inputs(case, seed)?;
    let mut from_golden = false;
    let mut expected = None;
    if let Some(store) = golden {
        if seed == case.seed && case.tier == Tier::Quick {
            let path = store.dir.join(case.golden_relpath());
            let (g_inputs, g_outputs) = split_golden(&store.read_case(case)?);
            if g_inputs != inputs {
                return Err(GoldenError::Compute {
                    id: case.id.clone(),
                    message: format!(
                        "the regenerated inputs differ from those stored in {} (input generator drift; see `conform golden verify`)",
                        path.display()
                    ),
                });
            }
            expected = Some(g_outputs);
            from_golden = true;
        }
    }
    let expected = match expected {
        Some(e) => e,
        None => reference_outputs(case, &case.recipe, &inputs, threads)?,
    };
    let oracle = if want_oracle {
        Some(reference_outputs(case, ORACLE, &inputs, threads)?)
    } else {
        None
    };
    Ok(Expectation {
        seed,
        inputs,
        expected,
        from_golden,
        oracle,
    })
}

/// Expectations by (case id, input seed, with oracle), shared across the targets and faults of
/// one run. Only expectations computed from scratch are kept (not those read from the golden
/// store, which the reference target's trial verifies separately).
#[derive(Debug, Default)]
pub struct ExpectationCache {
    map: std::sync::Mutex<
        std::collections::HashMap<(String, u64, bool), std::sync::Arc<Expectation>>,
    >,
}

impl ExpectationCache {
    /// The cached expectation of `case` for `seed`, computing it on first use.
    pub fn get(
        &self,
        case: &Case,
        seed: u64,
        want_oracle: bool,
        threads: Threads,
    ) -> Result<std::sync::Arc<Expectation>, GoldenError> {
        let key = (case.id.clone(), seed, want_oracle);
        if let Some(e) = self.map.lock().expect("cache lock").get(&key) {
            return Ok(e.clone());
        }
        let e = std::sync::Arc::new(expectation(case, seed, None, want_oracle, threads)?);
        self.map.lock().expect("cache lock").insert(key, e.clone());
        Ok(e)
    }

    /// Forgets everything (between seed sets, to bound memory).
    pub fn clear(&self) {
        self.map.lock().expect("cache lock").clear();
    }
}
