//! The fidelity-ledger knobs of the attention presets that model a CANN kernel: what the
//! attention families (`fa_prefill`, `pa_decode`, and the attention half of `pa_decode_int8`)
//! declare to [`crate::fidelity`] through their `OpFamily` methods. One place for the three
//! families, below them.

use super::recipe::KvTiling;
use super::Recipe;
use crate::formats::DType;
use crate::knob::Knob;
use crate::recipe_edit::{edited, RecipeEdit};

/// The attention presets that model a CANN kernel (ops-transformer prompt / incre flash
/// attention, reached through FIA).
pub const ASCEND_PRESETS: [&str; 3] = [
    "ascend_pfa_bf16",
    "ascend_ifa_bf16",
    "ascend_pfa_f16_high_perf",
];

/// Claims about the decode kernel's arithmetic (the `ascend_ifa_bf16` attention, under
/// `pa_decode` and `pa_decode_int8`) fixed in the code rather than a recipe field.
pub const IFA_CLAIMS: [&str; 1] = ["fa.claim.ifa_combine_order"];

/// The knobs of attention recipe `r`: its fields, and the decode kernel's claims when it tiles
/// (and splits) as the decode kernel does.
pub fn knobs(r: &Recipe) -> Vec<Knob> {
    let mut k = r.knobs();
    if matches!(r.kv_tiling, KvTiling::AscendIfa { .. }) {
        k.extend(IFA_CLAIMS.iter().map(|&id| Knob::claim(id)));
    }
    k
}

/// The knobs of Ascend preset `preset` with element type `dtype`, changed by `edit` first when
/// it is an attention edit; `None` for a preset that models no CANN kernel.
pub fn preset_knobs(preset: &str, dtype: DType, edit: Option<&RecipeEdit>) -> Option<Vec<Knob>> {
    if !ASCEND_PRESETS.contains(&preset) {
        return None;
    }
    Recipe::preset(preset, dtype).map(|r| knobs(&edited(r, edit)))
}

/// Every knob id the attention presets define (bf16 stands for the dtype: the ids do not
/// depend on it), and the decode kernel's claims.
pub fn knob_ids() -> Vec<String> {
    let mut ids: Vec<String> = ASCEND_PRESETS
        .iter()
        .filter_map(|p| Recipe::preset(p, DType::Bf16))
        .flat_map(|r| r.knobs().into_iter().map(|k| k.id))
        .collect();
    ids.extend(IFA_CLAIMS.iter().map(|id| id.to_string()));
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ascend_preset_is_an_attention_preset() {
        for p in ASCEND_PRESETS {
            assert!(super::super::PRESETS.contains(&p), "{p}");
        }
    }
}
