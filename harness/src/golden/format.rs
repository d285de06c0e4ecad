//! Computing a case's golden tensors with the reference: deterministic inputs from
//! (case id, seed), outputs with the case's recipe.

use super::error::GoldenError;
use crate::seed;
use crate::suite::Case;
use conform_reference::ops::{self, GenContext, TensorMap};
use conform_reference::parallel::Threads;
use conform_targets::tensor_file::Metadata;

/// The format version of golden files' metadata.
pub const GOLDEN_FILE_FORMAT: &str = "1";

/// A case's inputs for a given seed.
///
/// A case that lists faults in `discriminates` gets the first input set of the seed's search
/// that makes each of them fail its checks ([`super::discriminate`]).
pub fn generate_inputs(case: &Case, seed: u64) -> Result<TensorMap, GoldenError> {
    if case.discriminates.is_empty() {
        generate_from_stream(case, seed)
    } else {
        super::discriminate::search(case, seed, |s| generate_from_stream(case, s))
    }
}

/// The inputs the op's generator draws from the stream of (case id, `seed`).
fn generate_from_stream(case: &Case, seed: u64) -> Result<TensorMap, GoldenError> {
    let family = ops::find(&case.op).map_err(|e| compute_err(case, e))?;
    let mut rng = seed::input_stream(&case.id, seed);
    let mut words = seed::words(&mut rng);
    let mut ctx = GenContext::new(&mut words, case.inputs.clone());
    family
        .generate(&case.params, &mut ctx)
        .map_err(|e| compute_err(case, e))
}

/// The reference's outputs for `inputs` with `recipe`.
pub fn reference_outputs(
    case: &Case,
    recipe: &str,
    inputs: &TensorMap,
    threads: Threads,
) -> Result<TensorMap, GoldenError> {
    let family = ops::find(&case.op).map_err(|e| compute_err(case, e))?;
    family
        .run(&case.params, recipe, inputs, threads)
        .map_err(|e| compute_err(case, e))
}

/// Inputs as `in.<name>` and outputs as `out.<name>`, the layout of a golden file.
pub fn golden_tensors(inputs: &TensorMap, outputs: &TensorMap) -> TensorMap {
    let mut all = TensorMap::new();
    for (k, v) in inputs {
        all.insert(format!("in.{k}"), v.clone());
    }
    for (k, v) in outputs {
        all.insert(format!("out.{k}"), v.clone());
    }
    all
}

/// Splits a golden file's tensors back into inputs and outputs.
pub fn split_golden(all: &TensorMap) -> (TensorMap, TensorMap) {
    let mut inputs = TensorMap::new();
    let mut outputs = TensorMap::new();
    for (k, v) in all {
        if let Some(n) = k.strip_prefix("in.") {
            inputs.insert(n.to_string(), v.clone());
        } else if let Some(n) = k.strip_prefix("out.") {
            outputs.insert(n.to_string(), v.clone());
        }
    }
    (inputs, outputs)
}

/// The canonical description of a case definition: what, if changed, invalidates its golden.
pub fn definition_json(case: &Case) -> String {
    serde_json::json!({
        "id": case.id,
        "op": case.op,
        "params": case.params,
        "recipe": case.recipe,
        "generator": case.inputs,
        "seed": case.seed,
    })
    .to_string()
}

/// BLAKE3 of [`definition_json`].
pub fn definition_digest(case: &Case) -> String {
    blake3::hash(definition_json(case).as_bytes())
        .to_hex()
        .to_string()
}

/// The metadata stored in a golden file.
pub fn golden_metadata(case: &Case) -> Metadata {
    let mut m = Metadata::new();
    m.insert("conform_golden_format".into(), GOLDEN_FILE_FORMAT.into());
    m.insert("case_id".into(), case.id.clone());
    m.insert("op".into(), case.op.clone());
    m.insert("params".into(), case.params.to_string());
    m.insert("recipe".into(), case.recipe.clone());
    m.insert(
        "generator".into(),
        serde_json::to_string(&case.inputs).unwrap_or_default(),
    );
    m.insert("seed".into(), case.seed.to_string());
    m.insert("definition".into(), definition_digest(case));
    m.insert("reference_version".into(), env!("CARGO_PKG_VERSION").into());
    m
}

fn compute_err(case: &Case, e: impl std::fmt::Display) -> GoldenError {
    GoldenError::Compute {
        id: case.id.clone(),
        message: e.to_string(),
    }
}
