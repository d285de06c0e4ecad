//! Knob identity for the fidelity ledger (`docs/ascend.md`).
//!
//! conform judges Ascend kernels against its own model of what the CANN kernel computes. Every
//! part of that model is a *knob* here: a recipe field of an Ascend preset (attention, FP4
//! dequant, W4A16, MC2), or a fixed claim the code makes outside any preset (the MC2 planner's
//! constants, the paged KV cache layouts, what the CANN cast supports). Each knob has a stable
//! dotted id, the id of its row in the ledger, where that claim's public source (or the word
//! "assumed") is recorded. A harness test keeps the two in step: a knob without a row, or a row
//! naming no knob, fails it.
//!
//! The ids of a preset's fields come from the preset's own `knobs` method (attention
//! [`Recipe::knobs`], dequant [`Fp4DequantRecipe::knobs`], MC2 [`crate::mc2::Mc2Numerics::knobs`]), each of
//! which destructures its struct, so a new field does not compile until it has a knob (and then
//! the ledger test asks for its row).
//!
//! A claim fixed in the code (each family's `CLAIMS` list) is named there by its id only: its
//! text is its ledger row's, the one place it is written, which `conform explain` and the
//! report both print ([`Knob::claim`]).
//!
//! Nothing here names an op: each family declares its knob prefix, its kernel variants and
//! how a case dispatches to them, its presets' knobs and its knob ids through
//! [`OpFamily`](crate::ops::OpFamily); the functions below look the op up in the registry.

use crate::formats::DType;
use crate::ops::{find, registry, RecipeEdit};
use crate::variant::{Dispatch, KernelVariant, Platform};

pub use crate::knob::{rounding_name, Knob};

/// What a case judged against a recipe that models a CANN kernel rests on.
#[derive(Clone, Debug)]
pub struct AscendModel {
    /// The kernel variant the case's shape lands on, where the op's host tiling dispatch is
    /// modelled ([`crate::variant`]).
    pub dispatch: Option<Dispatch>,
    /// The preset the case is computed with (the variant's, for a dispatching recipe).
    pub preset: String,
    /// Its knobs, the variant's own row first.
    pub knobs: Vec<Knob>,
}

/// The dtype a case's parameters name (`dtype`), or bf16 (the knob values of the dequant
/// presets do not depend on it; the other families name it).
pub fn params_dtype(params: &serde_json::Value) -> DType {
    params
        .get("dtype")
        .and_then(|v| v.as_str())
        .and_then(|s| s.parse().ok())
        .unwrap_or(DType::Bf16)
}

/// The kernel variant a case of `op` with `params`, judged against `recipe`, lands on: on
/// `platform`, or on the platform the recipe describes when `None`. `None` when the recipe
/// models no CANN kernel, the op's dispatch is not modelled, or the parameters are invalid.
pub fn dispatch(
    op: &str,
    recipe: &str,
    params: &serde_json::Value,
    platform: Option<&Platform>,
) -> Option<Dispatch> {
    find(op).ok()?.dispatch(recipe, params, platform)
}

/// The knob id prefix of an op family's presets (`kv` for an op the registry does not know).
pub fn knob_family(op: &str) -> &'static str {
    find(op).map_or("kv", |f| f.knob_family())
}

/// Every kernel variant of every op whose dispatch is modelled, with the first op that
/// declares it (the three FP4 ops share theirs).
pub fn kernel_variants() -> Vec<(&'static str, &'static KernelVariant)> {
    let mut v: Vec<(&'static str, &'static KernelVariant)> = Vec::new();
    for f in registry() {
        for &k in f.kernel_variants() {
            if !v
                .iter()
                .any(|(op, seen)| std::ptr::eq(*seen, k) && knob_family(op) == f.knob_family())
            {
                v.push((f.name(), k));
            }
        }
    }
    v
}

/// The ledger id of the row of `op`'s variant `id`: `<family>.<id>.variant`.
pub fn variant_knob_id(op: &str, id: &str) -> String {
    format!("{}.{id}.variant", knob_family(op))
}

/// The ledger knob of a variant, its value the variant in words.
pub fn variant_knob(op: &str, v: &KernelVariant) -> Knob {
    Knob::new(variant_knob_id(op, v.id), v.to_string())
}

/// What a case of `op` with `params` judged against `recipe` rests on, when that recipe
/// models a CANN kernel; `None` for every other recipe (and for the oracle).
pub fn ascend_model(op: &str, recipe: &str, params: &serde_json::Value) -> Option<AscendModel> {
    let dtype = params_dtype(params);
    let dispatch = dispatch(op, recipe, params, None);
    let preset = dispatch
        .as_ref()
        .filter(|d| d.variant.modelled())
        .map_or(recipe, |d| d.variant.preset)
        .to_string();
    let mut knobs = preset_knobs(op, &preset, dtype)?;
    if let Some(d) = &dispatch {
        knobs.insert(0, variant_knob(op, d.variant));
    }
    Some(AscendModel {
        dispatch,
        preset,
        knobs,
    })
}

/// The knobs of `op`'s preset `preset` (a fixed preset, not a dispatching recipe) with element
/// type `dtype`, when that preset models a CANN kernel; `None` for every other recipe.
pub fn preset_knobs(op: &str, preset: &str, dtype: DType) -> Option<Vec<Knob>> {
    edited_preset_knobs(op, preset, dtype, None)
}

/// [`preset_knobs`] of the preset changed by `edit` (a catalogue edit or a knob flip) first,
/// when `edit` is of a kind the preset holds; the unchanged preset's knobs otherwise. Diffing
/// the two lists says which knob an edit changes, and to what: the fingerprint's map from a
/// fault to a knob value, with no table written by hand.
pub fn edited_preset_knobs(
    op: &str,
    preset: &str,
    dtype: DType,
    edit: Option<&RecipeEdit>,
) -> Option<Vec<Knob>> {
    find(op).ok()?.preset_knobs(preset, dtype, edit)
}

/// Every knob id the reference crate defines: what each family declares (its presets' fields,
/// its claims, its variants' rows), each id once.
pub fn knob_ids() -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let declared = registry().into_iter().flat_map(|f| f.knob_ids());
    let variants = kernel_variants()
        .into_iter()
        .map(|(op, v)| variant_knob(op, v).id);
    for id in declared.chain(variants) {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ascend_preset_exists_and_ids_are_unique() {
        let ids = knob_ids();
        // Each family's own ids are distinct, and every id is under its family's prefix.
        for f in registry() {
            let own = f.knob_ids();
            let mut sorted = own.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(
                sorted.len(),
                own.len(),
                "duplicate knob ids in {}",
                f.name()
            );
            for id in &own {
                assert!(
                    id.starts_with(&format!("{}.", f.knob_family())),
                    "{}: {id} is not under `{}.`",
                    f.name(),
                    f.knob_family()
                );
            }
        }
        for p in crate::ops::fp4::ASCEND_DEQUANT_PRESETS {
            assert!(crate::dequant::recipe::PRESET_NAMES.contains(&p), "{p}");
        }
        for id in &ids {
            assert!(
                id.split('.').count() >= 3
                    && id
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._".contains(c)),
                "{id} is not a dotted lower-case id"
            );
        }
    }

    #[test]
    fn a_case_knob_list_is_its_presets() {
        let k = preset_knobs("pa_decode", "ascend_ifa_bf16", DType::Bf16).unwrap();
        let out = k
            .iter()
            .find(|k| k.id == "fa.ascend_ifa_bf16.output_rounding")
            .unwrap();
        assert_eq!(out.value, "RNE (CAST_RINT)");
        let k = preset_knobs("pa_decode", "ascend_ifa_bf16", DType::F16).unwrap();
        let out = k
            .iter()
            .find(|k| k.id == "fa.ascend_ifa_bf16.output_rounding")
            .unwrap();
        assert_eq!(out.value, "RNA (CAST_ROUND)");
        assert!(preset_knobs("pa_decode", "vllm_pa_v1", DType::Bf16).is_none());
        assert!(preset_knobs("nvfp4_dequant", "vllm_nvfp4", DType::Bf16).is_none());
        assert!(preset_knobs("mc2_matmul_allreduce", "kernel_ring", DType::F16).is_some());
        assert!(preset_knobs("mc2_matmul_allreduce", "oracle", DType::F16).is_none());
        // The C8 case rests on its own knobs and on the IFA attention recipe's.
        let k = preset_knobs("pa_decode_int8", "ascend_ifa_c8", DType::Bf16).unwrap();
        assert!(k.iter().any(|k| k.id == "c8.ascend_ifa_c8.dequant"));
        assert!(k
            .iter()
            .any(|k| k.id == "fa.ascend_ifa_bf16.output_rounding"));
        assert!(preset_knobs("pa_decode_int8", "c8_dequant_in_dtype", DType::Bf16).is_none());
    }
}
