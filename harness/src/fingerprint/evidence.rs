//! One case's evidence: the target's outputs on the case's inputs, and the reference's on the
//! same inputs with the claimed recipe and with each alternative of the case's knobs.

use super::bits;
use super::candidates::{Alternative, CaseAlternatives};
use crate::case_data::generate_inputs;
use crate::suite::Case;
use conform_reference::ops::{self, RecipeEdit, TensorMap};
use conform_reference::parallel::Threads;
use conform_targets::{ExecRequest, Target};

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

/// Runs the target on `case`'s inputs of `seed`; the error is the reason, in words.
pub fn run_target(
    target: &mut dyn Target,
    case: &Case,
    seed: u64,
    inputs: &TensorMap,
) -> Result<TensorMap, String> {
    let desc = ops::find(&case.op)
        .and_then(|f| f.describe(&case.params))
        .map_err(|e| e.to_string())?;
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
        .map_err(|e| format!("the target failed on seed {seed}: {e}"))?;
    Ok(out.outputs)
}

/// The reference's outputs for `case` with its recipe changed by `edit` (none: as claimed);
/// `Ok(None)` when the edit does not apply to the case.
pub fn run_reference(
    case: &Case,
    edit: Option<&RecipeEdit>,
    inputs: &TensorMap,
    threads: Threads,
) -> Result<Option<TensorMap>, String> {
    let family = ops::find(&case.op).map_err(|e| e.to_string())?;
    let r = match edit {
        None => family
            .run(&case.params, &case.recipe, inputs, threads)
            .map(Some),
        Some(e) => family.run_with_recipe_edit(&case.params, &case.recipe, e, inputs, threads),
    };
    r.map_err(|e| format!("the reference failed: {e}"))
}

/// The inputs of `case` for `seed`, in words when they cannot be drawn.
pub fn inputs(case: &Case, seed: u64) -> Result<TensorMap, String> {
    generate_inputs(case, seed).map_err(|e| format!("its inputs (seed {seed}): {e}"))
}

/// Checks that the target wrote every output of `expected` with its type and size.
pub fn comparable(target: &TensorMap, expected: &TensorMap) -> Result<(), String> {
    for (name, want) in expected {
        let Some(got) = target.get(name) else {
            return Err(format!("the target wrote no output `{name}`"));
        };
        if got.dtype != want.dtype || got.numel() != want.numel() {
            return Err(format!(
                "output `{name}`: the target wrote {:?} x {}, the recipe {:?} x {}",
                got.dtype,
                got.numel(),
                want.dtype,
                want.numel()
            ));
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
) -> Result<CaseRun, String> {
    let ins = inputs(case, seed)?;
    let out = run_target(target, case, seed, &ins)?;
    let claim = run_reference(case, None, &ins, threads)?
        .ok_or_else(|| "the reference gave no outputs".to_string())?;
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
