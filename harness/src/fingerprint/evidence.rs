//! One case's evidence: the target's outputs on the case's inputs, and the reference's on the
//! same inputs with the claimed recipe and with each alternative of the case's knobs.

use super::bits;
use super::candidates::{Alternative, CaseAlternatives};
use crate::case_data::{generate_inputs, CaseDataError};
use crate::suite::Case;
use conform_reference::ops::{self, ElemType, OpError, RecipeEdit, TensorMap};
use conform_reference::parallel::Threads;
use conform_targets::{ExecRequest, Target, TargetError};

/// Why a case's evidence could not be gathered: each variant's `Display` is the reason the
/// fingerprint report gives.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    /// The case's op or parameters are not the reference's.
    #[error("{0}")]
    Op(OpError),
    /// The target failed to run the case.
    #[error("the target failed on seed {seed}: {error}")]
    Target { seed: u64, error: TargetError },
    /// The reference failed to run the case.
    #[error("the reference failed: {0}")]
    Reference(OpError),
    /// The reference's claimed recipe gave nothing to compare with.
    #[error("the reference gave no outputs")]
    NoReferenceOutputs,
    /// The case's inputs cannot be drawn.
    #[error("its inputs (seed {seed}): {error}")]
    Inputs { seed: u64, error: CaseDataError },
    /// The target did not write an output the reference has.
    #[error("the target wrote no output `{0}`")]
    MissingOutput(String),
    /// The target wrote an output of another type or size than the reference's.
    #[error(
        "output `{name}`: the target wrote {got:?} x {got_len}, the recipe {want:?} x {want_len}"
    )]
    Mismatch {
        name: String,
        got: ElemType,
        got_len: usize,
        want: ElemType,
        want_len: usize,
    },
}

/// The outputs of one case.
pub struct CaseRun {
    pub case: String,
    /// The case's knobs at their claimed values (a knob id's claimed value can differ between
    /// cases: an element type's rounding).
    pub claimed: Vec<conform_reference::fidelity::Knob>,
    pub target: TensorMap,
    pub claim: TensorMap,
    /// Each alternative that applies to the case, with its outputs.
    pub alternatives: Vec<(Alternative, TensorMap)>,
}

/// The recipe the target is asked for: the case's when it declares it, else none (its own).
pub fn requested_recipe(target: &mut dyn Target, case: &Case) -> Option<String> {
    let caps = target.capabilities();
    caps.ops
        .get(&case.op)
        .is_some_and(|o| o.recipes.iter().any(|r| r == &case.recipe))
        .then(|| case.recipe.clone())
}

/// Runs the target on `case`'s inputs of `seed`; or why it could not.
pub fn run_target(
    target: &mut dyn Target,
    case: &Case,
    seed: u64,
    inputs: &TensorMap,
) -> Result<TensorMap, EvidenceError> {
    let desc = ops::find(&case.op)
        .and_then(|f| f.describe(&case.params))
        .map_err(EvidenceError::Op)?;
    let request = ExecRequest {
        case_id: case.id.clone(),
        input_set: 0,
        op: case.op.clone(),
        params: case.params.clone(),
        recipe: requested_recipe(target, case),
        inputs: inputs.clone(),
        expected_outputs: desc.outputs.clone(),
        poison: conform_targets::poison::Fill::Primary,
        timing: None,
    };
    let out = target
        .execute(&request)
        .map_err(|error| EvidenceError::Target { seed, error })?;
    Ok(out.outputs)
}

/// The reference's outputs for `case` with its recipe changed by `edit` (none: as claimed);
/// `Ok(None)` when the edit does not apply to the case.
pub fn run_reference(
    case: &Case,
    edit: Option<&RecipeEdit>,
    inputs: &TensorMap,
    threads: Threads,
) -> Result<Option<TensorMap>, EvidenceError> {
    let family = ops::find(&case.op).map_err(EvidenceError::Op)?;
    let r = match edit {
        None => family
            .run(&case.params, &case.recipe, inputs, threads)
            .map(Some),
        Some(e) => family.run_with_recipe_edit(&case.params, &case.recipe, e, inputs, threads),
    };
    r.map_err(EvidenceError::Reference)
}

/// The inputs of `case` for `seed`; or why they cannot be drawn.
pub fn inputs(case: &Case, seed: u64) -> Result<TensorMap, EvidenceError> {
    generate_inputs(case, seed).map_err(|error| EvidenceError::Inputs { seed, error })
}

/// Checks that the target wrote every output of `expected` with its type and size.
pub fn comparable(target: &TensorMap, expected: &TensorMap) -> Result<(), EvidenceError> {
    for (name, want) in expected {
        let Some(got) = target.get(name) else {
            return Err(EvidenceError::MissingOutput(name.clone()));
        };
        if got.dtype != want.dtype || got.numel() != want.numel() {
            return Err(EvidenceError::Mismatch {
                name: name.clone(),
                got: got.dtype,
                got_len: got.numel(),
                want: want.dtype,
                want_len: want.numel(),
            });
        }
    }
    Ok(())
}

/// Runs the target and the reference (claimed and every alternative) on `case`'s inputs.
pub fn run_case(
    target: &mut dyn Target,
    case: &Case,
    alts: &CaseAlternatives,
    seed: u64,
    threads: Threads,
) -> Result<CaseRun, EvidenceError> {
    let ins = inputs(case, seed)?;
    let out = run_target(target, case, seed, &ins)?;
    let claim =
        run_reference(case, None, &ins, threads)?.ok_or(EvidenceError::NoReferenceOutputs)?;
    comparable(&out, &claim)?;
    let mut alternatives = Vec::new();
    for a in &alts.alternatives {
        if let Some(o) = run_reference(case, Some(&a.edit), &ins, threads)? {
            alternatives.push((a.clone(), o));
        }
    }
    Ok(CaseRun {
        case: case.id.clone(),
        claimed: alts.claimed.clone(),
        target: out,
        claim,
        alternatives,
    })
}

impl CaseRun {
    /// The claimed value of knob `id` in this case.
    pub fn claimed_value(&self, id: &str) -> Option<&str> {
        self.claimed
            .iter()
            .find(|k| k.id == id)
            .map(|k| k.value.as_str())
    }
}

/// Elements (output, index) where `a` and `b` differ under the NaN rule, with their count.
pub fn differences(a: &TensorMap, b: &TensorMap) -> (u64, Option<(String, usize)>, u64) {
    let mut n = 0;
    let mut total = 0;
    let mut first = None;
    for (name, ta) in a {
        let Some(tb) = b.get(name) else { continue };
        for i in 0..ta.numel() {
            total += 1;
            if !bits::same(ta.dtype, bits::element(ta, i), bits::element(tb, i)) {
                n += 1;
                first.get_or_insert((name.clone(), i));
            }
        }
    }
    (n, first, total)
}
