//! The wiring shared by the op families. Every family whose recipes a catalogue edit can change
//! runs through [`EditableRun`] (one `run_edited` that takes an optional edit of its own recipe
//! type; [`editable_family_methods!`] writes its `run` and `run_with_recipe_edit` from it).
//!
//! The wiring shared by the families built as "a case, an exact oracle, and named recipe
//! presets that a catalogue edit can change" (dynamic_quant, quant_matmul, pa_decode_int8,
//! moe_dispatch_combine, mla_decode, and every family written the same way after them).
//!
//! Such a family says what is its own ([`PresetFamily`]: how a case is read, how the oracle and
//! a recipe compute it, how the regimes are imposed, which catalogue edit is its kind), and
//! its [`OpFamily`] methods call the functions below for what every such family does alike:
//! pick the oracle or a preset by name, apply a catalogue edit to a preset, impose the
//! declared regimes after the plain generation, and refuse a regime that belongs to another op.

use super::{GenContext, OpError, OpFamily, RecipeEdit, Regime, TensorMap, ORACLE};
use crate::knob::Knob;
use crate::parallel::Threads;
use crate::variant::KernelVariant;

/// What a preset family defines for itself; the shared steps are the functions of this module.
pub(crate) trait PresetFamily: OpFamily {
    /// The family's parsed and validated case.
    type Case;
    /// The family's recipe: the knobs a preset fixes and a catalogue edit changes.
    type Recipe: 'static;
    /// The names [`PresetFamily::recipe_preset`] knows (the family's `recipes()`).
    const PRESETS: &'static [&'static str];

    /// Parses and validates a case's parameters.
    fn case(&self, params: &serde_json::Value) -> Result<Self::Case, OpError>;
    /// The preset called `name` for case `c` (a preset may depend on the case's dtype), if
    /// there is one.
    fn recipe_preset(c: &Self::Case, name: &str) -> Option<Self::Recipe>;
    /// The exact oracle.
    fn run_oracle(
        &self,
        c: &Self::Case,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError>;
    /// The emulation with recipe `r`.
    fn run_recipe(
        &self,
        c: &Self::Case,
        r: &Self::Recipe,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError>;
    /// Makes every regime of `regimes` true in the generated inputs `m`.
    fn impose(
        &self,
        c: &Self::Case,
        regimes: &[Regime],
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError>;
    /// Whether the recipe `edited` (a catalogue edit of `kernel`, the preset it was made from)
    /// changes anything case `c` reaches. An edit a case cannot reach is reported as not
    /// applying rather than run to identical outputs. Every edit reaches every case unless a
    /// family says otherwise.
    fn edit_reaches(&self, c: &Self::Case, edited: &Self::Recipe, kernel: &Self::Recipe) -> bool {
        let _ = (c, edited, kernel);
        true
    }
    /// Runs `edit`, an edit of another family's kind, where this family's recipe holds that
    /// family's recipe (the C8 decode runs the attention recipe on its dequantised cache);
    /// `None` where it does not (every family unless it says otherwise).
    fn run_other_edit(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        edit: &RecipeEdit,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<Option<TensorMap>, OpError> {
        let _ = (params, recipe, edit, inputs, threads);
        Ok(None)
    }
}

/// A family whose reference run takes an optional edit of its recipe type (a family that builds
/// its recipe inside its run: the attention ops, the FP4 ops, MC2).
pub(crate) trait EditableRun: OpFamily {
    /// The recipe type a catalogue edit of this family changes.
    type Recipe: 'static;
    /// [`OpFamily::run`] with the recipe changed by `edit` first: `None` when the edit leaves
    /// the recipe as it was (never `None` without an edit).
    fn run_edited(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        edit: Option<fn(&mut Self::Recipe) -> bool>,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<Option<TensorMap>, OpError>;
}

/// [`OpFamily::run`] of an [`EditableRun`] family: its run without an edit.
pub(crate) fn run_unedited<F: EditableRun>(
    f: &F,
    params: &serde_json::Value,
    recipe: &str,
    inputs: &TensorMap,
    threads: Threads,
) -> Result<TensorMap, OpError> {
    f.run_edited(params, recipe, None, inputs, threads)?
        .ok_or_else(|| OpError::failed(f.name(), "a run without an edit gave no outputs"))
}

/// [`OpFamily::run_with_recipe_edit`] of an [`EditableRun`] family: `None` for an edit of
/// another recipe type or for the oracle.
pub(crate) fn run_with_edit<F: EditableRun>(
    f: &F,
    params: &serde_json::Value,
    recipe: &str,
    edit: &RecipeEdit,
    inputs: &TensorMap,
    threads: Threads,
) -> Result<Option<TensorMap>, OpError> {
    match edit.of::<F::Recipe>() {
        Some(e) if recipe != ORACLE => f.run_edited(params, recipe, Some(e), inputs, threads),
        _ => Ok(None),
    }
}

/// The knobs of `preset` for a family whose Ascend presets are its kernel variants'
/// (`variants`): the recipe `recipe(preset)` changed by `edit` first, its fields (`knobs`),
/// then the family's `claims`; `None` for a preset that is no variant's.
pub(crate) fn variant_preset_knobs<R: 'static>(
    variants: &[&KernelVariant],
    preset: &str,
    edit: Option<&RecipeEdit>,
    recipe: impl Fn(&str) -> Option<R>,
    knobs: impl Fn(&R, &str) -> Vec<Knob>,
    claims: &[&str],
) -> Option<Vec<Knob>> {
    variants.iter().find(|v| v.preset == preset)?;
    let r = crate::recipe_edit::edited(recipe(preset)?, edit);
    let mut k = knobs(&r, preset);
    k.extend(claims.iter().map(|&id| Knob::claim(id)));
    Some(k)
}

/// Every knob id of [`variant_preset_knobs`]: each variant's preset's fields, then the claims.
pub(crate) fn variant_knob_ids<R>(
    variants: &[&KernelVariant],
    recipe: impl Fn(&str) -> Option<R>,
    knobs: impl Fn(&R, &str) -> Vec<Knob>,
    claims: &[&str],
) -> Vec<String> {
    let fields = variants
        .iter()
        .filter_map(|v| recipe(v.preset).map(|r| knobs(&r, v.preset)))
        .flat_map(|k| k.into_iter().map(|k| k.id));
    fields
        .chain(claims.iter().map(|id| id.to_string()))
        .collect()
}

/// The preset called `name` for case `c`, or the error that lists the known ones.
pub(crate) fn preset<F: PresetFamily>(
    f: &F,
    c: &F::Case,
    name: &str,
) -> Result<F::Recipe, OpError> {
    F::recipe_preset(c, name).ok_or_else(|| OpError::UnknownRecipe {
        op: f.name().into(),
        recipe: name.into(),
        known: F::PRESETS.join(", "),
    })
}

/// [`OpFamily::run`]: the oracle, or the preset called `recipe`.
pub(crate) fn run<F: PresetFamily>(
    f: &F,
    params: &serde_json::Value,
    recipe: &str,
    inputs: &TensorMap,
    threads: Threads,
) -> Result<TensorMap, OpError> {
    let c = f.case(params)?;
    if recipe == ORACLE {
        return f.run_oracle(&c, inputs, threads);
    }
    let r = preset(f, &c, recipe)?;
    f.run_recipe(&c, &r, inputs, threads)
}

/// [`OpFamily::run_with_recipe_edit`]: `None` when the edit is another family's (unless
/// [`PresetFamily::run_other_edit`] runs it), the recipe is the oracle, the preset already
/// has the edited value, or the case does not reach it.
pub(crate) fn run_edited<F: PresetFamily>(
    f: &F,
    params: &serde_json::Value,
    recipe: &str,
    edit: &RecipeEdit,
    inputs: &TensorMap,
    threads: Threads,
) -> Result<Option<TensorMap>, OpError> {
    let Some(apply) = edit.of::<F::Recipe>() else {
        return f.run_other_edit(params, recipe, edit, inputs, threads);
    };
    if recipe == ORACLE {
        return Ok(None);
    }
    let c = f.case(params)?;
    let kernel = preset(f, &c, recipe)?;
    let mut r = preset(f, &c, recipe)?;
    if !apply(&mut r) || !f.edit_reaches(&c, &r, &kernel) {
        return Ok(None);
    }
    f.run_recipe(&c, &r, inputs, threads).map(Some)
}

/// [`OpFamily::generate_with_regimes`]: the plain generation, then the regimes imposed (the
/// same inputs as [`OpFamily::generate`] when there are none).
pub(crate) fn generate_imposed<F: PresetFamily>(
    f: &F,
    params: &serde_json::Value,
    regimes: &[Regime],
    ctx: &mut GenContext,
) -> Result<TensorMap, OpError> {
    f.check_regimes(params, regimes)?;
    let mut m = f.generate(params, ctx)?;
    if regimes.is_empty() {
        return Ok(m);
    }
    let c = f.case(params)?;
    f.impose(&c, regimes, &mut m, ctx)?;
    Ok(m)
}

/// The first regime of `regimes` that is not `op`'s, as the error [`OpFamily::check_regimes`]
/// gives for it.
pub(crate) fn only_own_regimes(op: &str, regimes: &[Regime]) -> Result<(), OpError> {
    match regimes.iter().find(|r| !r.applies_to(op)) {
        None => Ok(()),
        Some(&r) => Err(OpError::regime_not_for(op, r)),
    }
}

/// The three [`OpFamily`] methods every preset family writes alike
/// (`generate_with_regimes`, `run`, `run_with_recipe_edit`), for its `impl OpFamily` block.
macro_rules! preset_family_methods {
    () => {
        fn generate_with_regimes(
            &self,
            params: &serde_json::Value,
            regimes: &[$crate::ops::Regime],
            ctx: &mut $crate::ops::GenContext,
        ) -> Result<$crate::ops::TensorMap, $crate::ops::OpError> {
            $crate::ops::preset_family::generate_imposed(self, params, regimes, ctx)
        }

        fn run(
            &self,
            params: &serde_json::Value,
            recipe: &str,
            inputs: &$crate::ops::TensorMap,
            threads: $crate::parallel::Threads,
        ) -> Result<$crate::ops::TensorMap, $crate::ops::OpError> {
            $crate::ops::preset_family::run(self, params, recipe, inputs, threads)
        }

        fn run_with_recipe_edit(
            &self,
            params: &serde_json::Value,
            recipe: &str,
            edit: &$crate::ops::RecipeEdit,
            inputs: &$crate::ops::TensorMap,
            threads: $crate::parallel::Threads,
        ) -> Result<Option<$crate::ops::TensorMap>, $crate::ops::OpError> {
            $crate::ops::preset_family::run_edited(self, params, recipe, edit, inputs, threads)
        }
    };
}
pub(crate) use preset_family_methods;

/// The two [`OpFamily`] methods of an [`EditableRun`] family (`run`, `run_with_recipe_edit`),
/// for its `impl OpFamily` block.
macro_rules! editable_family_methods {
    () => {
        fn run(
            &self,
            params: &serde_json::Value,
            recipe: &str,
            inputs: &$crate::ops::TensorMap,
            threads: $crate::parallel::Threads,
        ) -> Result<$crate::ops::TensorMap, $crate::ops::OpError> {
            $crate::ops::preset_family::run_unedited(self, params, recipe, inputs, threads)
        }

        fn run_with_recipe_edit(
            &self,
            params: &serde_json::Value,
            recipe: &str,
            edit: &$crate::ops::RecipeEdit,
            inputs: &$crate::ops::TensorMap,
            threads: $crate::parallel::Threads,
        ) -> Result<Option<$crate::ops::TensorMap>, $crate::ops::OpError> {
            $crate::ops::preset_family::run_with_edit(self, params, recipe, edit, inputs, threads)
        }
    };
}
pub(crate) use editable_family_methods;
