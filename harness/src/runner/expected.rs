//! What a target's outputs are judged against, for one case and one input set: the inputs, the
//! reference's outputs with the case's recipe (from the golden file when it holds exactly this
//! input set), and the oracle when a policy needs it.

use crate::case_data::{generate_inputs, reference_outputs};
use crate::golden::format::split_golden;
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

/// Builds the expectation of `case` for `seed`, on the inputs `drawn` for it when they were
/// drawn ahead (the runner's prefetch; else drawn here). With `golden` set and the case's own
/// seed on a quick-tier case, the golden file's inputs must equal the regenerated ones (else
/// the input generator drifted) and its outputs become `expected`.
pub fn expectation(
    case: &Case,
    seed: u64,
    drawn: Option<TensorMap>,
    golden: Option<&GoldenStore>,
    want_oracle: bool,
    threads: Threads,
) -> Result<Expectation, GoldenError> {
    let inputs = match drawn {
        Some(inputs) => inputs,
        None => generate_inputs(case, seed)?,
    };
    let mut from_golden = false;
    let mut expected = None;
    if let Some(store) = golden
        && seed == case.seed
        && case.tier == Tier::Quick
    {
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

/// Expectations by (case id, input seed), shared across the targets and faults of one run: the
/// inputs, the recipe's outputs and (once a target's policy asks for it) the oracle are each
/// computed once. Only expectations computed from scratch are kept (not those read from the
/// golden store, which the reference target's trial verifies separately).
#[derive(Debug, Default)]
pub struct ExpectationCache {
    map: std::sync::Mutex<std::collections::HashMap<(String, u64), std::sync::Arc<Expectation>>>,
    computed: std::sync::atomic::AtomicUsize,
}

impl ExpectationCache {
    /// The cached expectation of `case` for `seed`, computing it on first use; an entry
    /// without the oracle gains it (and only it) when `want_oracle` first asks.
    pub fn get(
        &self,
        case: &Case,
        seed: u64,
        want_oracle: bool,
        threads: Threads,
    ) -> Result<std::sync::Arc<Expectation>, GoldenError> {
        use std::sync::atomic::Ordering::Relaxed;
        let key = (case.id.clone(), seed);
        let cached = self.map.lock().expect("cache lock").get(&key).cloned();
        let e = match cached {
            Some(e) if !want_oracle || e.oracle.is_some() => return Ok(e),
            Some(e) => {
                let oracle = reference_outputs(case, ORACLE, &e.inputs, threads)?;
                self.computed.fetch_add(1, Relaxed);
                std::sync::Arc::new(Expectation {
                    oracle: Some(oracle),
                    ..(*e).clone()
                })
            }
            None => {
                let e = expectation(case, seed, None, None, want_oracle, threads)?;
                self.computed
                    .fetch_add(1 + usize::from(want_oracle), Relaxed);
                std::sync::Arc::new(e)
            }
        };
        self.map.lock().expect("cache lock").insert(key, e.clone());
        Ok(e)
    }

    /// How many reference computations (recipe outputs or oracles) the cache has made.
    pub fn computations(&self) -> usize {
        self.computed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Forgets everything (between cases or seed sets, to bound memory).
    pub fn clear(&self) {
        self.map.lock().expect("cache lock").clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a_case() -> Case {
        let suites = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites");
        crate::suite::select::load_all(&suites)
            .expect("the shipped suites load")
            .into_iter()
            .find(|c| c.id.starts_with("mc2_matmul_allreduce/"))
            .expect("an MC2 case")
    }

    #[test]
    fn each_expectation_and_oracle_is_computed_once() {
        let case = a_case();
        let cache = ExpectationCache::default();
        let first = cache.get(&case, 7, false, Threads::ONE).unwrap();
        assert!(first.oracle.is_none());
        let again = cache.get(&case, 7, false, Threads::ONE).unwrap();
        assert!(std::sync::Arc::ptr_eq(&first, &again));
        assert_eq!(cache.computations(), 1);
        // A target that needs the oracle adds it without recomputing the rest.
        let with_oracle = cache.get(&case, 7, true, Threads::ONE).unwrap();
        assert_eq!(cache.computations(), 2);
        assert_eq!(with_oracle.expected, first.expected);
        assert!(with_oracle.oracle.is_some());
        // ... and an entry with the oracle serves those that do not need it.
        let plain = cache.get(&case, 7, false, Threads::ONE).unwrap();
        assert!(std::sync::Arc::ptr_eq(&plain, &with_oracle));
        // Another seed is another input set.
        cache.get(&case, 8, true, Threads::ONE).unwrap();
        assert_eq!(cache.computations(), 4);
        cache.clear();
        cache.get(&case, 7, false, Threads::ONE).unwrap();
        assert_eq!(cache.computations(), 5);
    }
}
