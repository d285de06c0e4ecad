//! The alternatives of a case's knobs: every knob flip ([`conform_reference::knob_flips`]) and
//! every recipe fault of the catalogue, each mapped to the knob it changes by applying its edit
//! to the case's preset and diffing the knob lists before and after (no table written by
//! hand). An edit that changes exactly one knob is an alternative value of that knob; one that
//! changes none, or several at once, or that also edits the parameters, inputs or outputs,
//! maps to no knob and is listed with the reason.

use crate::suite::Case;
use conform_reference::faults::{self, Fault};
use conform_reference::fidelity::{self, Knob};
use conform_reference::knob_flips::KNOB_FLIPS;
use conform_reference::ops::RecipeEdit;

/// One alternative value of one knob, and the edits that give it.
#[derive(Clone, Debug)]
pub struct Alternative {
    pub knob: String,
    pub value: String,
    /// `flip` and/or `fault:<name>`.
    pub sources: Vec<String>,
    /// The edit the reference runs it with (the first source's).
    pub edit: RecipeEdit,
}

/// A case's model and the alternatives of its knobs.
#[derive(Clone, Debug)]
pub struct CaseAlternatives {
    /// The preset its knobs belong to.
    pub preset: String,
    /// Its knobs at the claimed values (fixed claims left out: they have no alternative).
    pub claimed: Vec<Knob>,
    pub alternatives: Vec<Alternative>,
}

/// Where an edit lands among a case's knobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// It changes this knob to this value, and nothing else the knobs show.
    Knob { knob: String, value: String },
    /// It changes no knob, or several: the reason.
    NoKnob(String),
}

/// Where `edit` lands for `case` (its preset and dtype).
pub fn map_edit(case: &Case, edit: &RecipeEdit) -> Mapping {
    let Some(model) = fidelity::ascend_model(&case.op, &case.recipe, &case.params) else {
        return Mapping::NoKnob(format!(
            "recipe `{}` of `{}` models no kernel with knobs",
            case.recipe, case.op
        ));
    };
    let dtype = fidelity::params_dtype(&case.params);
    let before = fidelity::edited_preset_knobs(&case.op, &model.preset, dtype, None);
    let after = fidelity::edited_preset_knobs(&case.op, &model.preset, dtype, Some(edit));
    let (Some(before), Some(after)) = (before, after) else {
        return Mapping::NoKnob(format!("preset `{}` has no knob list", model.preset));
    };
    let changed: Vec<&Knob> = after
        .iter()
        .filter(|k| !before.contains(k) && !k.is_claim())
        .collect();
    match changed.as_slice() {
        [] => Mapping::NoKnob(format!(
            "its recipe edit changes no knob of preset `{}`",
            model.preset
        )),
        [k] => Mapping::Knob {
            knob: k.id.clone(),
            value: k.value.clone(),
        },
        many => Mapping::NoKnob(format!(
            "its recipe edit changes {} knobs at once ({})",
            many.len(),
            many.iter()
                .map(|k| k.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Where fault `f` lands for `case`: through its recipe edit when that is all it changes.
pub fn map_fault(case: &Case, f: &Fault) -> Mapping {
    let e = &f.edit;
    let Some(recipe) = e.recipe else {
        return Mapping::NoKnob(
            "it changes the parameters, inputs, outputs or target behaviour, not the recipe".into(),
        );
    };
    if e.params.is_some() || e.inputs.is_some() || e.outputs.is_some() || e.target.is_some() {
        return Mapping::NoKnob(
            "its recipe edit comes with a parameter, input or output edit".into(),
        );
    }
    map_edit(case, &recipe)
}

/// The knobs and alternatives of `case`; `None` when its recipe models no kernel with knobs.
pub fn of_case(case: &Case) -> Option<CaseAlternatives> {
    let model = fidelity::ascend_model(&case.op, &case.recipe, &case.params)?;
    let dtype = fidelity::params_dtype(&case.params);
    let claimed: Vec<Knob> = fidelity::edited_preset_knobs(&case.op, &model.preset, dtype, None)?
        .into_iter()
        .filter(|k| !k.is_claim())
        .collect();
    let mut alternatives: Vec<Alternative> = Vec::new();
    let mut add = |m: Mapping, source: String, edit: RecipeEdit| {
        let Mapping::Knob { knob, value } = m else {
            return;
        };
        match alternatives
            .iter_mut()
            .find(|a| a.knob == knob && a.value == value)
        {
            Some(a) => a.sources.push(source),
            None => alternatives.push(Alternative {
                knob,
                value,
                sources: vec![source],
                edit,
            }),
        }
    };
    for flip in KNOB_FLIPS {
        add(map_edit(case, &flip.edit), "flip".to_string(), flip.edit);
    }
    for f in faults::catalogue() {
        if let (true, Some(edit)) = (f.applies_to(&case.op), f.edit.recipe) {
            add(map_fault(case, f), format!("fault:{}", f.name), edit);
        }
    }
    Some(CaseAlternatives {
        preset: model.preset,
        claimed,
        alternatives,
    })
}
