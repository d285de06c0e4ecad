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
use crate::parallel::Threads;

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
