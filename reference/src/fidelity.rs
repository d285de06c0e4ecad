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
//! A claim fixed in the code (the `*_CLAIMS` lists below) is named here by its id only: its
//! text is its ledger row's, the one place it is written, which `conform explain` and the
//! report both print ([`Knob::claim`]).

use crate::attention::recipe::KvTiling;
use crate::attention::Recipe;
use crate::dequant::Fp4DequantRecipe;
use crate::formats::DType;
use crate::ops::RecipeEdit;
use crate::variant::{Dispatch, KernelVariant, Platform};

pub use crate::knob::{rounding_name, Knob};

/// The attention presets that model a CANN kernel (ops-transformer prompt / incre flash
/// attention, reached through FIA).
pub const ASCEND_ATTENTION_PRESETS: [&str; 3] = [
    "ascend_pfa_bf16",
    "ascend_ifa_bf16",
    "ascend_pfa_f16_high_perf",
];

/// The FP4 presets an Ascend kernel is judged against: the two QingCheng Ascend kernels, and
/// the OCP MXFP4 recipe the torch_npu worker's `npu_dtype_cast` path is judged against.
pub const ASCEND_DEQUANT_PRESETS: [&str; 3] = [
    "mx_ocp",
    "ascend_qingcheng_fp4_dequant",
    "ascend_qingcheng_w4a16",
];

/// The MC2 MatmulAllReduce recipes (every one models the CANN kernel or CANN's own test
/// golden).
pub const MC2_RECIPES: [&str; 4] = [
    "kernel_rank_order",
    "kernel_ring",
    "kernel_binary_tree",
    "high_precision_golden",
];

/// Claims about the paged KV cache (the `paged_kv` op and the PagedAttention path), fixed in
/// the code rather than a recipe field.
pub const PAGED_KV_CLAIMS: [&str; 6] = [
    "kv.layout.bnbsh",
    "kv.layout.bnnbsd",
    "kv.block_size.range",
    "kv.slot_mapping.dtype",
    "kv.slot_mapping.padding",
    "kv.cache.untouched",
];

/// Claims about the CANN cast used for FP4 (`npu_dtype_cast` / aclnnCast), fixed in the code.
pub const CAST_CLAIMS: [&str; 2] = ["dq.cann_cast.fp4_exact", "dq.cann_cast.devices"];

/// Claims about `dynamic_quant` (the A2 kernel's arithmetic) fixed in the code rather than a
/// recipe field.
pub const DYNAMIC_QUANT_CLAIMS: [&str; 7] = [
    "dynq.claim.widening",
    "dynq.claim.int_chain",
    "dynq.claim.f32_subnormals",
    "dynq.claim.tiny_rows",
    "dynq.claim.non_finite",
    "dynq.claim.ub_size",
    "dynq.claim.division",
];

/// Claims about `mla_decode` (the A2 MLA decode kernel and its cache write) fixed in the code
/// rather than a recipe field.
pub const MLA_CLAIMS: [&str; 7] = [
    "mla.claim.chunk_inner_order",
    "mla.claim.pv_order",
    "mla.claim.rowsum",
    "mla.claim.exp",
    "mla.claim.amla_constants",
    "mla.claim.widths",
    "mla.claim.flash_decode",
];

/// Claims about the decode kernel's arithmetic (the `ascend_ifa_bf16` attention, under
/// `pa_decode` and `pa_decode_int8`) fixed in the code rather than a recipe field.
pub const IFA_CLAIMS: [&str; 1] = ["fa.claim.ifa_combine_order"];

/// Claims about `pa_decode_int8` (the INT8 KV cache write and FIA's antiquant decode) fixed in
/// the code rather than a recipe field.
pub const C8_CLAIMS: [&str; 7] = [
    "c8.claim.param_shapes",
    "c8.claim.modes",
    "c8.claim.block_size",
    "c8.claim.inverse_scale",
    "c8.claim.write_precision",
    "c8.claim.msd",
    "c8.claim.offset_fold",
];

/// Claims about `quant_matmul` (the A2 kernel and `npu_trans_quant_param`) fixed in the code
/// rather than a recipe field.
pub const QUANT_MATMUL_CLAIMS: [&str; 6] = [
    "qmm.claim.k_limit",
    "qmm.claim.bias_wrap",
    "qmm.claim.widening",
    "qmm.claim.packed_offset",
    "qmm.claim.opt_bound",
    "qmm.claim.f16_fixpipe",
];

/// Claims about `moe_dispatch_combine` (the dispatch/combine v2 kernels) fixed in the code
/// rather than a recipe field.
pub const MOE_CLAIMS: [&str; 8] = [
    "moe.claim.send_order",
    "moe.claim.opaque_metadata",
    "moe.claim.quant_per_destination",
    "moe.claim.shared_placement",
    "moe.claim.shared_unweighted",
    "moe.claim.no_fma",
    "moe.claim.mask_1d",
    "moe.claim.expert_step",
];

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
    use crate::ops::dynamic_quant as dq;
    match op {
        "dynamic_quant" if recipe == dq::DISPATCHING => dq::dispatch(params, platform).ok(),
        "dynamic_quant" => named(crate::ops::dynamic_quant_variants::by_preset(recipe)),
        "quant_matmul" if recipe == crate::ops::quant_matmul::DISPATCHING => {
            crate::ops::quant_matmul::dispatch(params, platform).ok()
        }
        "quant_matmul" => named(crate::ops::quant_matmul_variants::by_preset(recipe)),
        "fa_prefill" => crate::ops::fa_prefill::dispatch(params, recipe, platform)
            .ok()
            .flatten(),
        "pa_decode" => crate::ops::pa_decode::dispatch(params, recipe, platform)
            .ok()
            .flatten(),
        "pa_decode_int8" => crate::ops::pa_decode_int8::dispatch(params, recipe)
            .ok()
            .flatten(),
        "mla_decode" if recipe == "ascend_mla" => {
            Some(crate::ops::attention_variants::dispatch_mla())
        }
        _ => named(crate::ops::preset_variants::by_preset(op, recipe)),
    }
}

/// The variant a case names directly by its preset.
fn named(v: Option<&'static KernelVariant>) -> Option<Dispatch> {
    v.map(|variant| Dispatch {
        variant,
        detail: "the case names this variant's preset".to_string(),
    })
}

/// The knob id prefix of an op family's presets.
pub fn knob_family(op: &str) -> &'static str {
    match op {
        "fa_prefill" | "pa_decode" => "fa",
        "mxfp4_dequant" | "nvfp4_dequant" | "w4a16_matmul" => "dq",
        "mc2_matmul_allreduce" => "mc2",
        "dynamic_quant" => "dynq",
        "pa_decode_int8" => "c8",
        "quant_matmul" => "qmm",
        "moe_dispatch_combine" => "moe",
        "mla_decode" => "mla",
        _ => "kv",
    }
}

/// Every kernel variant of every op whose dispatch is modelled, with its op.
pub fn kernel_variants() -> Vec<(&'static str, &'static KernelVariant)> {
    let mut v: Vec<(&'static str, &'static KernelVariant)> = Vec::new();
    v.extend(
        crate::ops::dynamic_quant_variants::VARIANTS
            .iter()
            .map(|k| ("dynamic_quant", *k)),
    );
    v.extend(
        crate::ops::quant_matmul_variants::VARIANTS
            .iter()
            .map(|k| ("quant_matmul", *k)),
    );
    use crate::ops::attention_variants as av;
    v.extend([
        ("fa_prefill", &av::PFA),
        ("fa_prefill", &av::PFA_HIGH_PERF),
        ("fa_prefill", &av::FIA_V3_GQA),
        ("pa_decode", &av::IFA),
        ("pa_decode", &av::FIA_V3_GQA_DECODE),
        ("pa_decode_int8", &av::IFA_C8),
        ("mla_decode", &av::MLA),
    ]);
    v.extend(crate::ops::preset_variants::variants());
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

/// Applies `edit` to `r` when it is `Some` (a catalogue edit of this recipe's kind); `r` as it
/// was otherwise.
fn apply<T>(mut r: T, edit: Option<fn(&mut T) -> bool>) -> T {
    if let Some(f) = edit {
        f(&mut r);
    }
    r
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
    let recipe = preset;
    let attention_edit = match edit {
        Some(RecipeEdit::Attention(f)) => Some(*f),
        _ => None,
    };
    match op {
        "fa_prefill" | "pa_decode" if ASCEND_ATTENTION_PRESETS.contains(&recipe) => {
            Recipe::preset(recipe, dtype).map(|r| attention_knobs(&apply(r, attention_edit)))
        }
        "mxfp4_dequant" | "nvfp4_dequant" | "w4a16_matmul"
            if ASCEND_DEQUANT_PRESETS.contains(&recipe) =>
        {
            let e = match edit {
                Some(RecipeEdit::Fp4(f)) => Some(*f),
                _ => None,
            };
            Fp4DequantRecipe::preset(recipe).map(|r| apply(r, e).knobs(recipe))
        }
        "mc2_matmul_allreduce" => {
            let e = match edit {
                Some(RecipeEdit::Mc2(f)) => Some(*f),
                _ => None,
            };
            crate::ops::mc2_matmul_allreduce::recipe_numerics(recipe, dtype)
                .map(|n| apply(n, e).knobs(recipe))
        }
        "dynamic_quant" if crate::ops::dynamic_quant_variants::by_preset(recipe).is_some() => {
            let e = match edit {
                Some(RecipeEdit::DynamicQuant(f)) => Some(*f),
                _ => None,
            };
            crate::ops::dynamic_quant::DqRecipe::preset(recipe).map(|r| {
                let mut k = apply(r, e).knobs(recipe);
                k.extend(DYNAMIC_QUANT_CLAIMS.iter().map(|&id| Knob::claim(id)));
                k
            })
        }
        "pa_decode_int8" if recipe == "ascend_ifa_c8" => {
            let e = match edit {
                Some(RecipeEdit::C8(f)) => Some(*f),
                _ => None,
            };
            crate::ops::pa_decode_int8::C8Recipe::preset(recipe).map(|r| {
                let r = apply(r, e);
                let mut k = r.knobs(recipe);
                k.extend(C8_CLAIMS.iter().map(|&id| Knob::claim(id)));
                if let Some(a) = Recipe::preset(r.attention, dtype) {
                    k.extend(attention_knobs(&apply(a, attention_edit)));
                }
                k
            })
        }
        "quant_matmul" if crate::ops::quant_matmul_variants::by_preset(recipe).is_some() => {
            let e = match edit {
                Some(RecipeEdit::QuantMatmul(f)) => Some(*f),
                _ => None,
            };
            crate::ops::quant_matmul::QmmRecipe::preset(recipe).map(|r| {
                let mut k = apply(r, e).knobs(recipe);
                k.extend(QUANT_MATMUL_CLAIMS.iter().map(|&id| Knob::claim(id)));
                k
            })
        }
        "moe_dispatch_combine" if recipe == "ascend_v2" => {
            let e = match edit {
                Some(RecipeEdit::Moe(f)) => Some(*f),
                _ => None,
            };
            crate::ops::moe_dispatch_combine::MoeRecipe::preset(recipe).map(|r| {
                let mut k = apply(r, e).knobs(recipe);
                k.extend(MOE_CLAIMS.iter().map(|&id| Knob::claim(id)));
                k.extend(DYNAMIC_QUANT_CLAIMS.iter().map(|&id| Knob::claim(id)));
                k
            })
        }
        "mla_decode" if recipe == "ascend_mla" => {
            let e = match edit {
                Some(RecipeEdit::Mla(f)) => Some(*f),
                _ => None,
            };
            crate::ops::mla_decode::MlaRecipe::preset(recipe, dtype).map(|r| {
                let mut k = apply(r, e).knobs(recipe);
                k.extend(MLA_CLAIMS.iter().map(|&id| Knob::claim(id)));
                k
            })
        }
        "paged_kv" if recipe == "reference" => {
            Some(PAGED_KV_CLAIMS.iter().map(|&id| Knob::claim(id)).collect())
        }
        _ => None,
    }
}

/// The knobs of attention recipe `r`: its fields, and the decode kernel's claims when it tiles
/// (and splits) as the decode kernel does.
fn attention_knobs(r: &Recipe) -> Vec<Knob> {
    let mut k = r.knobs();
    if matches!(r.kv_tiling, KvTiling::AscendIfa { .. }) {
        k.extend(IFA_CLAIMS.iter().map(|&id| Knob::claim(id)));
    }
    k
}

/// Every knob id the reference crate defines: every field of every Ascend preset (the values do
/// not matter here, so bf16 stands for the dtype), plus the fixed claims of the paged KV cache,
/// the CANN cast and the MC2 planner and cost model.
pub fn knob_ids() -> Vec<String> {
    let mut ids = Vec::new();
    for p in ASCEND_ATTENTION_PRESETS {
        if let Some(r) = Recipe::preset(p, DType::Bf16) {
            ids.extend(r.knobs().into_iter().map(|k| k.id));
        }
    }
    for p in ASCEND_DEQUANT_PRESETS {
        if let Some(r) = Fp4DequantRecipe::preset(p) {
            ids.extend(r.knobs(p).into_iter().map(|k| k.id));
        }
    }
    for p in MC2_RECIPES {
        if let Some(n) = crate::ops::mc2_matmul_allreduce::recipe_numerics(p, DType::Bf16) {
            ids.extend(n.knobs(p).into_iter().map(|k| k.id));
        }
    }
    for (op, v) in kernel_variants() {
        ids.push(variant_knob(op, v).id);
    }
    for v in crate::ops::dynamic_quant_variants::VARIANTS {
        if let Some(r) = crate::ops::dynamic_quant::DqRecipe::preset(v.preset) {
            ids.extend(r.knobs(v.preset).into_iter().map(|k| k.id));
        }
    }
    ids.extend(IFA_CLAIMS.iter().map(|id| id.to_string()));
    ids.extend(DYNAMIC_QUANT_CLAIMS.iter().map(|id| id.to_string()));
    if let Some(r) = crate::ops::pa_decode_int8::C8Recipe::preset("ascend_ifa_c8") {
        ids.extend(r.knobs("ascend_ifa_c8").into_iter().map(|k| k.id));
    }
    ids.extend(C8_CLAIMS.iter().map(|id| id.to_string()));
    for v in crate::ops::quant_matmul_variants::VARIANTS {
        if let Some(r) = crate::ops::quant_matmul::QmmRecipe::preset(v.preset) {
            ids.extend(r.knobs(v.preset).into_iter().map(|k| k.id));
        }
    }
    ids.extend(QUANT_MATMUL_CLAIMS.iter().map(|id| id.to_string()));
    if let Some(r) = crate::ops::moe_dispatch_combine::MoeRecipe::preset("ascend_v2") {
        // The quantisation's knobs are dynamic_quant's own, listed above.
        ids.extend(
            r.knobs("ascend_v2")
                .into_iter()
                .map(|k| k.id)
                .filter(|id| id.starts_with("moe.")),
        );
    }
    ids.extend(MOE_CLAIMS.iter().map(|id| id.to_string()));
    if let Some(r) = crate::ops::mla_decode::MlaRecipe::preset("ascend_mla", DType::Bf16) {
        ids.extend(r.knobs("ascend_mla").into_iter().map(|k| k.id));
    }
    ids.extend(MLA_CLAIMS.iter().map(|id| id.to_string()));
    ids.extend(PAGED_KV_CLAIMS.iter().map(|id| id.to_string()));
    ids.extend(CAST_CLAIMS.iter().map(|id| id.to_string()));
    ids.extend(
        crate::mc2::planner::PlannerConfig::default()
            .knobs()
            .into_iter()
            .map(|k| k.id),
    );
    ids.extend(
        crate::mc2::planner::PLANNER_CLAIMS
            .iter()
            .map(|(id, _)| id.to_string()),
    );
    ids.extend(
        crate::mc2::cost_model::COST_MODEL_CLAIMS
            .iter()
            .map(|(id, _)| id.to_string()),
    );
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ascend_preset_exists_and_ids_are_unique() {
        let ids = knob_ids();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len(), "duplicate knob ids");
        for p in ASCEND_ATTENTION_PRESETS {
            assert!(crate::attention::PRESETS.contains(&p), "{p}");
        }
        for p in ASCEND_DEQUANT_PRESETS {
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
