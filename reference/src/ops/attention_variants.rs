//! The attention ops' kernel variants on A2/A3 and the host tilings' dispatch among them
//! (hicann/ops-transformer `attention/`; docs/ascend.md, "Attention presets" and
//! "Kernel variants").
//!
//! `npu_fused_infer_attention_score` routes by the query length: one row to the incre (decode)
//! flash attention tiling, longer queries to the prompt flash attention tiling. Both call
//! `RouteToFia` first (`fused_infer_attention_score_tiling_v3.cpp`): up to the 8.5.0 alpha
//! builds of November 2025 it sends only MLA (query and key rope given, f16/bf16) to the FIA V3
//! kernels; from the commit "GQA non quant and MLA non quant merge" (2025-12-02, released with
//! 8.5.0-beta.1) it also sends non-quantised f16/bf16 attention to FIA V3, prefill and decode
//! alike. The snapshots read disagree on the exceptions (one keeps head dims other than 64 and
//! 128 and some layouts on the old kernels, a later one only NSD and a few TND shapes), so
//! conform sends every non-quantised f16/bf16 case on such a release to FIA V3: conform has no
//! recipe for its GQA kernels, and a device there is judged by error ratio, never against a
//! kernel it may not run.
//!
//! On the older routing, the prompt kernel's CV-diff template (`prompt_flash_attention_s1s2_
//! bns1_x910.h`, with `_base.h`) tiles KV by the block `AdjustCVTilingCVDiff` picks
//! ([`crate::attention::pfa_tiling`]); the decode kernel (`incre_flash_attention_split_
//! Bbn2s2_Us2.h`) by `CalcInnerSize` and `IsFlashDecode` ([`crate::attention::ifa_tiling`]);
//! with an int8 (antiquant) cache the same decode kernel runs its antiquant path
//! (`pa_decode_int8`). MLA decode runs FIA V3's MLA kernels on every release read.

use crate::attention::ifa_tiling::{ifa_tiling, IfaShape};
use crate::attention::pfa_tiling::{pfa_kv_tile, PfaShape};
use crate::variant::{Dispatch, KernelVariant, Platform, Release, ReleaseRange, Soc, Stage};

const SOCS: &[Soc] = &[Soc::A2, Soc::A3];
/// The oldest release of the open source (ops-transformer's first commit, the 8.3 line).
const OPEN_SOURCE: Release = Release::new(8, 3, 0).at(Stage::Candidate(1));
/// The first release whose `RouteToFia` sends non-quantised GQA attention to FIA V3.
pub const GQA_TO_FIA: Release = Release::new(8, 5, 0).at(Stage::Beta(1));
const LEGACY: ReleaseRange = ReleaseRange::new(OPEN_SOURCE, Some(GQA_TO_FIA));
const ALL: ReleaseRange = ReleaseRange::new(OPEN_SOURCE, None);

/// The platform the prompt and decode presets describe: an A2 on the 8.5.0 alpha build of the
/// hicann/ops-transformer snapshot c29bc10 (2025-11-15), before the GQA route.
pub const MODELLED: Platform = Platform {
    soc: Soc::A2,
    release: Release::new(8, 5, 0).at(Stage::Alpha(1)),
};

/// The conventions of conform's own that the attention recipes' bits rest on and no device is
/// known to share (docs/ascend.md): the Q.K reduction tree, the row sum's tree, the P V order,
/// the exp and ln implementations.
macro_rules! conventions {
    ($preset:literal) => {
        &[
            concat!("fa.", $preset, ".qk_order"),
            concat!("fa.", $preset, ".rowsum_order"),
            concat!("fa.", $preset, ".pv_order"),
            concat!("fa.", $preset, ".exp_impl"),
            concat!("fa.", $preset, ".ln_impl"),
        ]
    };
}

pub static PFA: KernelVariant = KernelVariant {
    id: "ascend_pfa_bf16",
    preset: "ascend_pfa_bf16",
    tiling: "attention/prompt_flash_attention/op_host/prompt_flash_attention_tiling.cpp AdjustCVTilingCVDiff",
    key: "the CV-diff template, high precision (bf16, or f16 with inner_precise 0)",
    kernel: "attention/prompt_flash_attention/op_kernel/prompt_flash_attention_s1s2_bns1_x910.h",
    socs: SOCS,
    releases: LEGACY,
    conventions: conventions!("ascend_pfa_bf16"),
};

pub static PFA_HIGH_PERF: KernelVariant = KernelVariant {
    id: "ascend_pfa_f16_high_perf",
    preset: "ascend_pfa_f16_high_perf",
    tiling: "attention/prompt_flash_attention/op_host/prompt_flash_attention_tiling.cpp AdjustCVTilingCVDiff",
    key: "the CV-diff template, f16 high performance (inner_precise 1)",
    kernel: "attention/prompt_flash_attention/op_kernel/prompt_flash_attention_s1s2_bns1_x910.h",
    socs: SOCS,
    releases: LEGACY,
    conventions: conventions!("ascend_pfa_f16_high_perf"),
};

pub static IFA: KernelVariant = KernelVariant {
    id: "ascend_ifa_bf16",
    preset: "ascend_ifa_bf16",
    tiling:
        "attention/incre_flash_attention/op_host/incre_flash_attention_tiling.cpp CalcInnerSize",
    key: "the general split template (no antiquant, no rope, no shared prefix)",
    kernel: "attention/incre_flash_attention/op_kernel/incre_flash_attention_split_Bbn2s2_Us2.h",
    socs: SOCS,
    releases: LEGACY,
    conventions: conventions!("ascend_ifa_bf16"),
};

/// FIA V3's non-quantised GQA kernels (`RouteToFia` from 8.5.0-beta.1): no recipe of
/// conform's.
pub static FIA_V3_GQA: KernelVariant = KernelVariant {
    id: "fia_v3_gqa",
    preset: "",
    tiling: "attention/fused_infer_attention_score/op_host/fused_infer_attention_score_tiling_v3.cpp RouteToFia",
    key: "FIA V3, f16/bf16 without quantisation (GQA/MHA)",
    kernel: "attention/common/op_kernel/arch32/fia_kernel_nonquant.h",
    socs: SOCS,
    releases: ReleaseRange::new(GQA_TO_FIA, None),
    conventions: &[],
};

/// The decode kernel's antiquant path over an int8 cache (`pa_decode_int8`).
pub static IFA_C8: KernelVariant = KernelVariant {
    id: "ascend_ifa_c8",
    preset: "ascend_ifa_c8",
    tiling:
        "attention/incre_flash_attention/op_host/incre_flash_attention_tiling.cpp CalcInnerSize",
    key: "the split template with an int8 cache (antiquant)",
    // The preset models the INT8 cache write too: ATB's ReshapeAndCache writes the rows the
    // decode kernel then reads.
    kernel: "attention/incre_flash_attention/op_kernel/incre_flash_attention_split_Bbn2s2_Us2.h, after the cache write of ATB's ReshapeAndCachAtb.cpp",
    socs: SOCS,
    releases: ALL,
    conventions: &[
        "fa.ascend_ifa_bf16.qk_order",
        "fa.ascend_ifa_bf16.rowsum_order",
        "fa.ascend_ifa_bf16.pv_order",
        "fa.ascend_ifa_bf16.exp_impl",
        "fa.ascend_ifa_bf16.ln_impl",
        "c8.claim.msd",
    ],
};

/// FIA V3's MLA kernels (`RouteToFia`, MLA without quantisation, on every release read).
pub static MLA: KernelVariant = KernelVariant {
    id: "ascend_mla",
    preset: "ascend_mla",
    tiling: "attention/fused_infer_attention_score/op_host/fused_infer_attention_score_tiling_v3.cpp RouteToFia",
    key: "FIA V3, MLA without quantisation (fia_tiling_nonquant_mla.cpp CalcInnerSize: 512-key steps)",
    kernel: "attention/common/op_kernel/arch32/fia_block_vec_nonquant_mla.h and its cube half attention/common/op_kernel/arch32/fia_block_cube_nonquant_mla.h",
    socs: SOCS,
    releases: ALL,
    conventions: &[
        "mla.claim.chunk_inner_order",
        "mla.claim.pv_order",
        "mla.claim.rowsum",
        "mla.claim.exp",
    ],
};

/// Every variant.
pub static VARIANTS: [&KernelVariant; 7] = [
    &PFA,
    &PFA_HIGH_PERF,
    &IFA,
    &FIA_V3_GQA,
    &IFA_C8,
    &MLA,
    &FIA_V3_GQA_DECODE,
];

/// The decode path's route to FIA V3 (the same kernels; its own row for the decode op).
pub static FIA_V3_GQA_DECODE: KernelVariant = KernelVariant {
    id: "fia_v3_gqa_decode",
    tiling: "attention/fused_infer_attention_score/op_host/fused_infer_attention_score_tiling.cpp TilingProcess4IFA, RouteToFia",
    ..FIA_V3_GQA
};

/// Whether `RouteToFia` sends a non-quantised f16/bf16 case to FIA V3 (every such case from
/// [`GQA_TO_FIA`]: the exceptions differ between the snapshots read, see the module text).
fn routed_to_fia(p: &Platform) -> bool {
    p.release >= GQA_TO_FIA
}

/// The prompt path: `preset` is `ascend_pfa_bf16` or `ascend_pfa_f16_high_perf`.
pub fn dispatch_prompt(
    preset: &str,
    head_dim: usize,
    pfa: &PfaShape,
    p: &Platform,
) -> Option<Dispatch> {
    let v: &'static KernelVariant = match preset {
        "ascend_pfa_bf16" => &PFA,
        "ascend_pfa_f16_high_perf" => &PFA_HIGH_PERF,
        _ => return None,
    };
    if routed_to_fia(p) {
        return Some(Dispatch {
            variant: &FIA_V3_GQA,
            detail: format!(
                "RouteToFia: f16/bf16 without quantisation (head dim {head_dim}): FIA V3 from {GQA_TO_FIA}"
            ),
        });
    }
    let (tile, why) = pfa_kv_tile(pfa);
    Some(Dispatch {
        variant: v,
        detail: format!(
            "head dim {head_dim}; RouteToFia before {GQA_TO_FIA} keeps f16/bf16 GQA on the prompt kernel; AdjustCVTilingCVDiff: {why} (sInner {tile})"
        ),
    })
}

/// The decode path with the `ascend_ifa_bf16` preset, on a SoC with `vector_cores` vector
/// cores (the case's, from the hardware profile its suite names).
pub fn dispatch_decode(
    head_dim: usize,
    shape: &IfaShape,
    vector_cores: Option<usize>,
    p: &Platform,
) -> Dispatch {
    if routed_to_fia(p) {
        return Dispatch {
            variant: &FIA_V3_GQA_DECODE,
            detail: format!(
                "RouteToFia: f16/bf16 without quantisation (head dim {head_dim}): FIA V3 from {GQA_TO_FIA}"
            ),
        };
    }
    Dispatch {
        variant: &IFA,
        detail: decode_detail(head_dim, shape, vector_cores),
    }
}

/// What the decode kernel's tiling picks for `shape`: the sInner size and, on `vector_cores`
/// cores, the flash-decode split (unknown without a count: the recipe then refuses to run).
fn decode_detail(head_dim: usize, shape: &IfaShape, vector_cores: Option<usize>) -> String {
    let Some(cores) = vector_cores else {
        return format!(
            "head dim {head_dim}; CalcInnerSize and IsFlashDecode need the SoC's vector cores, and the case gives none (its suite names no hardware profile, `recipe_hardware`)"
        );
    };
    let t = ifa_tiling(shape, cores);
    let split = match t.split {
        Some(keys) => format!("flash decode: splits of {keys} keys"),
        None => "no flash-decode split".to_string(),
    };
    format!(
        "head dim {head_dim}; CalcInnerSize: sInner {} keys; IsFlashDecode on {cores} vector cores (the hardware profile's): {split}",
        t.kv_tile
    )
}

/// The decode path over an int8 cache (never routed to FIA V3: the query and key dtypes
/// differ).
pub fn dispatch_decode_int8(
    head_dim: usize,
    shape: &IfaShape,
    vector_cores: Option<usize>,
) -> Dispatch {
    Dispatch {
        variant: &IFA_C8,
        detail: format!(
            "RouteToFia keeps a bf16/f16 query over an int8 cache on the decode kernel; {}",
            decode_detail(head_dim, shape, vector_cores)
        ),
    }
}

/// MLA decode.
pub fn dispatch_mla() -> Dispatch {
    Dispatch {
        variant: &MLA,
        detail: "RouteToFia: query and key rope given, f16/bf16 without quantisation: FIA V3's MLA kernels; 512-key softmax steps".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_releases_route_gqa_to_fia_v3() {
        let pfa = PfaShape {
            q_seq: 24,
            kv_seq: 600,
            masked: true,
            high_performance: false,
        };
        let at = |r: Release| Platform {
            soc: Soc::A2,
            release: r,
        };
        let old = dispatch_prompt("ascend_pfa_bf16", 128, &pfa, &MODELLED).unwrap();
        assert_eq!(old.variant.id, "ascend_pfa_bf16");
        assert!(old.detail.contains("sInner 512"), "{}", old.detail);
        let new = dispatch_prompt("ascend_pfa_bf16", 128, &pfa, &at(Release::new(8, 5, 0)));
        assert_eq!(new.unwrap().variant.id, "fia_v3_gqa");
        // Every head dim: the snapshots read disagree on the exceptions.
        let d32 = dispatch_prompt("ascend_pfa_bf16", 32, &pfa, &at(Release::new(9, 0, 0)));
        assert_eq!(d32.unwrap().variant.id, "fia_v3_gqa");
        assert!(!FIA_V3_GQA.modelled());
        assert!(PFA.covers(&MODELLED).is_ok());
        assert!(PFA.covers(&at(Release::new(8, 5, 0))).is_err());
    }
}
