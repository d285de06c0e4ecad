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
mod attention;
mod dynamic_quant;
mod fp4;
pub mod margins;
mod mc2;
mod mla_decode;
mod moe;
mod pa_decode_int8;
mod paged_kv;
mod quant_matmul;
mod range;
mod tensors;

use crate::ops::{OpError, OpFamily, TensorMap, ORACLE};
use crate::parallel::Threads;

/// Which tier must kill a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Requirement {
    /// The quick tier must kill it on every seed set (`conform adequacy` exits 1 otherwise).
    Quick,
    /// Only the full tier is expected to kill it (large shapes).
    Full,
    /// Reported, never gated: the fault is invisible to the checks by design (for example a
    /// difference far below every tolerance of a tolerance-checked output).
    Advisory,
}

impl Requirement {
    pub fn name(self) -> &'static str {
        match self {
            Requirement::Quick => "quick",
            Requirement::Full => "full",
            Requirement::Advisory => "advisory",
        }
    }
}

/// A change of the case's parameters; `false` when it changes nothing for these parameters.
pub type ParamsEdit = fn(&mut serde_json::Value) -> bool;
/// A change of the inputs (with the case's parameters); `Ok(false)` when nothing changed.
pub type InputsEdit = fn(&serde_json::Value, &mut TensorMap) -> Result<bool, OpError>;
/// A change of the outputs (with the case's parameters and the unedited inputs).
pub type OutputsEdit = fn(&serde_json::Value, &TensorMap, &mut TensorMap) -> Result<bool, OpError>;

/// A change of a family's recipe: the op family's own type ([`crate::ops::RecipeEdit`]), so an
/// op applies an edit without knowing the catalogue.
pub use crate::ops::RecipeEdit;

/// A behaviour of a whole target rather than of one computation: the runner's anti-cheat and
/// poison checks are what must catch these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetBehaviour {
    /// Returns the outputs of the previous call whose output shapes were the same.
    StaleOutputByShape,
    /// Computes the first input set of a case and returns those outputs for every later set.
    FirstInputSetOnly,
    /// Leaves the last row (innermost axis run) of every output unwritten.
    LastRowUnwritten,
    /// Nondeterministic last-ULP jitter (atomics, a scheduling-dependent reduction order):
    /// every call of a case after its first flips the lowest bit of one element of its largest
    /// floating-point output, a different element per call.
    LastUlpJitter,
}

/// What a fault changes. At most one of the computation edits is usually set; a params edit
/// may come with an outputs edit that maps the outputs back (a head permutation).
#[derive(Clone, Copy, Debug, Default)]
pub struct Edit {
    pub params: Option<ParamsEdit>,
    pub inputs: Option<InputsEdit>,
    pub recipe: Option<RecipeEdit>,
    pub outputs: Option<OutputsEdit>,
    pub target: Option<TargetBehaviour>,
}

impl Edit {
    /// No edit (the base for struct-update syntax).
    pub const EMPTY: Edit = Edit {
        params: None,
        inputs: None,
        recipe: None,
        outputs: None,
        target: None,
    };
    pub const fn params(f: ParamsEdit) -> Edit {
        Edit {
            params: Some(f),
            inputs: None,
            recipe: None,
            outputs: None,
            target: None,
        }
    }
    pub const fn inputs(f: InputsEdit) -> Edit {
        Edit {
            params: None,
            inputs: Some(f),
            recipe: None,
            outputs: None,
            target: None,
        }
    }
    pub const fn recipe(r: RecipeEdit) -> Edit {
        Edit {
            params: None,
            inputs: None,
            recipe: Some(r),
            outputs: None,
            target: None,
        }
    }
    pub const fn outputs(f: OutputsEdit) -> Edit {
        Edit {
            params: None,
            inputs: None,
            recipe: None,
            outputs: Some(f),
            target: None,
        }
    }
    pub const fn target(b: TargetBehaviour) -> Edit {
        Edit {
            params: None,
            inputs: None,
            recipe: None,
            outputs: None,
            target: Some(b),
        }
    }
}

/// One named fault.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    /// Stable name (`attn-o-not-rescaled`), used on the command line and in suites.
    pub name: &'static str,
    /// The group it belongs to, for reports: `fp4`, `w4a16`, `attention`, `paged_attention`,
    /// `paged_kv`, `mc2`, `dynamic_quant`, `pa_decode_int8`, `quant_matmul`, `moe`, `mla_decode`, `range`,
    /// `any`.
    pub family: &'static str,
    /// The ops it applies to; empty means every op.
    pub ops: &'static [&'static str],
    pub requirement: Requirement,
    /// What a kernel with this bug does, in one sentence.
    pub description: &'static str,
    pub edit: Edit,
}

impl Fault {
    /// Whether the fault is defined for op `op`.
    pub fn applies_to(&self, op: &str) -> bool {
        self.ops.is_empty() || self.ops.contains(&op)
    }
}

/// The result of running the reference with a fault injected.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultRun {
    Outputs(TensorMap),
    /// The fault does not apply to this case; the reason says why.
    NotApplicable(String),
}

/// Every fault of the catalogue, grouped by family.
pub fn catalogue() -> Vec<&'static Fault> {
    fp4::FAULTS
        .iter()
        .chain(attention::FAULTS)
        .chain(paged_kv::FAULTS)
        .chain(mc2::FAULTS)
        .chain(dynamic_quant::FAULTS)
        .chain(pa_decode_int8::FAULTS)
        .chain(quant_matmul::FAULTS)
        .chain(moe::FAULTS)
        .chain(mla_decode::FAULTS)
        .chain(range::FAULTS)
        .chain(any::FAULTS)
        .collect()
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
