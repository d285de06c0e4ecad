//! The fault catalogue: named, small deviations of an op family's computation that model
//! what kernel authors really get wrong (a rounding mode, an operation order, a head mapping,
//! an off-by-one in a block table...). A fault is a value, like a recipe: it edits the case's
//! parameters, inputs, recipe or outputs around an ordinary reference run, never a fork of a
//! kernel. `conform adequacy` runs the suites against the reference with each fault injected
//! and reports which faults the suites catch ("kill").
//!
//! A fault applies to the ops it names; on a case where its edit changes nothing (a recipe
//! field already at the faulty value, a GQA fault on a case without GQA) it is *not
//! applicable* ([`FaultRun::NotApplicable`]), which is different from surviving.

mod any;
pub mod margins;
mod range;

use crate::ops::fault::tensors;
use crate::ops::{registry, OpError, OpFamily, TensorMap, ORACLE};
use crate::parallel::Threads;

pub use crate::ops::fault::{
    Edit, Fault, InputsEdit, OutputsEdit, ParamsEdit, Requirement, TargetBehaviour,
};
/// A change of a family's recipe, typed by the recipe it changes ([`crate::recipe_edit`]), so an
/// op applies an edit without knowing the catalogue.
pub use crate::ops::RecipeEdit;

/// The result of running the reference with a fault injected.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultRun {
    Outputs(TensorMap),
    /// The fault does not apply to this case; the reason says why.
    NotApplicable(String),
}

/// Every fault of the catalogue: each family's own ([`OpFamily::faults`], in registry order;
/// a group that several families declare, once), then the faults of every op (the range faults
/// and the whole-target behaviours).
pub fn catalogue() -> Vec<&'static Fault> {
    let mut all: Vec<&'static Fault> = Vec::new();
    let declared = registry().into_iter().flat_map(|f| f.faults());
    for f in declared.chain(range::FAULTS).chain(any::FAULTS) {
        if !all.iter().any(|g| std::ptr::eq(*g, f)) {
            all.push(f);
        }
    }
    all
}

/// The fault called `name`.
pub fn find(name: &str) -> Option<&'static Fault> {
    catalogue().into_iter().find(|f| f.name == name)
}

fn not_applicable(why: impl Into<String>) -> Result<FaultRun, OpError> {
    Ok(FaultRun::NotApplicable(why.into()))
}

/// Runs `family` with `recipe` on `inputs` with `fault` injected. Target behaviours
/// ([`Edit::target`]) are left to the caller: the outputs are then the unedited ones.
pub fn run(
    fault: &Fault,
    family: &dyn OpFamily,
    params: &serde_json::Value,
    recipe: &str,
    inputs: &TensorMap,
    threads: Threads,
) -> Result<FaultRun, OpError> {
    let op = family.name();
    if !fault.applies_to(op) {
        return not_applicable(format!("defined for {}, not `{op}`", fault.ops.join(", ")));
    }
    let desc = family.describe(params)?;
    let edit = &fault.edit;
    let mut changed = edit.target.is_some();
    let mut p = params.clone();
    if let Some(f) = edit.params {
        if !f(&mut p) {
            return not_applicable("the parameter it changes has no faulty value in this case");
        }
        changed = true;
    }
    let mut ins = inputs.clone();
    if let Some(f) = edit.inputs {
        if !f(params, &mut ins)? {
            return not_applicable("this case's inputs have nothing it changes");
        }
        changed = true;
    }
    // A parameter change that reinterprets a layout keeps every buffer: the same bytes,
    // read with the edited parameters' shapes.
    let edited_desc = match family.describe(&p) {
        Ok(d) => d,
        Err(e) => return not_applicable(format!("the faulty parameters are invalid here: {e}")),
    };
    for spec in &edited_desc.inputs {
        if let Some(t) = ins.get_mut(&spec.name) {
            tensors::reinterpret(t, &spec.shape);
        }
    }
    let mut outputs = match edit.recipe {
        Some(r) => {
            if recipe == ORACLE {
                return not_applicable("a recipe fault needs a recipe, not the oracle");
            }
            match family.run_with_recipe_edit(&p, recipe, &r, &ins, threads)? {
                Some(o) => {
                    changed = true;
                    o
                }
                None => return not_applicable("the recipe already has this value"),
            }
        }
        None => family.run(&p, recipe, &ins, threads)?,
    };
    for spec in &desc.outputs {
        if let Some(t) = outputs.get_mut(&spec.name) {
            tensors::reinterpret(t, &spec.shape);
        }
    }
    if let Some(f) = edit.outputs {
        if !f(params, inputs, &mut outputs)? {
            if !changed {
                return not_applicable("this case's outputs have nothing it changes");
            }
        } else {
            changed = true;
        }
    }
    if !changed {
        return not_applicable("it changes nothing in this case");
    }
    Ok(FaultRun::Outputs(outputs))
}

#[cfg(test)]
mod tests;
