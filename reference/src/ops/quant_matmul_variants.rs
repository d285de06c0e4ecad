//! `quant_matmul`'s kernel variants on A2/A3 and the host tiling's dispatch among them
//! (hicann/ops-nn `matmul/quant_batch_matmul_v3/op_host/op_tiling/`; docs/ascend.md,
//! "quant_matmul").
//!
//! The tiling key encodes a kernel template (`GetTilingKey`: TBE 0, basic 1, OPT 2) with the
//! per-token flag, and the kernel entry (`op_kernel/quant_batch_matmul_v3.cpp`) maps them to
//! the epilogues:
//! - an int64 (packed) scale, f16 or int8 output: `BmmDequant` (`quant_batch_matmul_v3.h`),
//!   the dequantisation done by the cube's fixpipe;
//! - a per-token scale: template 2 (`ProcessMSmall` sets `isBf16Opt_` when M fits the cube
//!   tiling's base M, `isDecode`) runs `BmmDequantPertokenOpt`
//!   (`quant_batch_matmul_v3_pertoken_opt.h`), which multiplies the per-token and per-channel
//!   scales together first (`MulPertokenAndScale`) and the f32 accumulator by that product;
//!   templates 0 and 1 run `BmmDequantPertoken` (`quant_batch_matmul_v3_pertoken.h`) or
//!   `BmmDequantPertokenBasic` (its epilogue in `quant_batch_matmul_v3_basic_epilogue.h`),
//!   which dequantise first (`AscendDequant` with the per-channel scale) and multiply by the
//!   per-token scale after;
//! - otherwise (bf16 output, f32 or bf16 scale): `BmmDequantBf16` and its opt and basic
//!   forms, `AscendDequant` then the float bias.
//!
//! Which M `isDecode` admits depends on the base M the cube tiling picks: every M up to 16
//! (the smallest base M), and in the tiling's own unit tests every per-token case with M of
//! 16, 24, 32 and 128 (`tests/ut/op_host/test_quant_batch_matmul_v3.csv`, Ascend910B2: kernel
//! template 2). conform takes M <= 128 as the opt kernel and larger M as the dequant-first
//! ones; the bound between 129 and 256 rows is assumed (ledger row `qmm.claim.opt_bound`).

use crate::variant::{Dispatch, KernelVariant, Platform, Release, ReleaseRange, Soc, Stage};

const SOCS: &[Soc] = &[Soc::A2, Soc::A3];
/// The releases read: ops-nn from its first commit (the 8.3.RC1 line), where `ProcessMSmall`
/// and the opt kernel already exist, to its 2026-08-22 snapshot.
const ALL: ReleaseRange = ReleaseRange::new(Release::new(8, 3, 0).at(Stage::Candidate(1)), None);

/// The largest M conform sends to the per-token opt kernel.
pub const OPT_MAX_M: usize = 128;

/// The platform the recipe `ascend_a2` describes: an A2 at the newest release read.
pub const MODELLED: Platform = Platform {
    soc: Soc::A2,
    release: Release::new(9, 2, 0).at(Stage::Beta(1)),
};

pub static PERTOKEN_OPT: KernelVariant = KernelVariant {
    id: "a2_pertoken_opt",
    preset: "a2_pertoken_opt",
    tiling: "matmul/quant_batch_matmul_v3/op_host/op_tiling/quant_batch_matmul_v3_tiling.cpp ProcessMSmall",
    key: "kernel template 2 (OPT) with the per-token flag",
    kernel: "matmul/quant_batch_matmul_v3/op_kernel/quant_batch_matmul_v3_pertoken_opt.h",
    socs: SOCS,
    releases: ALL,
    conventions: &[],
};

pub static PERTOKEN: KernelVariant = KernelVariant {
    id: "a2_pertoken",
    preset: "a2_pertoken",
    tiling: "matmul/quant_batch_matmul_v3/op_host/op_tiling/quant_batch_matmul_v3_tiling.cpp ProcessMSmall",
    key: "kernel template 0 (TBE) or 1 (basic) with the per-token flag",
    kernel: "matmul/quant_batch_matmul_v3/op_kernel/quant_batch_matmul_v3_pertoken.h",
    socs: SOCS,
    releases: ALL,
    conventions: &[],
};

pub static DEQUANT: KernelVariant = KernelVariant {
    id: "a2_dequant",
    preset: "a2_dequant",
    tiling: "matmul/quant_batch_matmul_v3/op_host/op_tiling/quant_batch_matmul_v3_tiling.cpp ProcessMSmall",
    key: "kernel template 0, 1 or 2 without the per-token flag (bf16 output)",
    kernel: "matmul/quant_batch_matmul_v3/op_kernel/quant_batch_matmul_v3_bf16.h",
    socs: SOCS,
    releases: ALL,
    conventions: &[],
};

pub static FIXPIPE: KernelVariant = KernelVariant {
    id: "a2_fixpipe",
    preset: "a2_fixpipe",
    tiling: "matmul/quant_batch_matmul_v3/op_host/op_tiling/quant_batch_matmul_v3_tiling.cpp GetTilingKey",
    key: "kernel template 0 (TBE) with an INT64 scale",
    // The packed INT64 scale it reads is built beforehand by `npu_trans_quant_param`, whose
    // packing the preset models too.
    kernel: "matmul/quant_batch_matmul_v3/op_kernel/quant_batch_matmul_v3.h, its INT64 scale packed beforehand by quant/trans_quant_param_v2/op_kernel/trans_quant_param_v2.h",
    socs: SOCS,
    releases: ALL,
    conventions: &[],
};

/// Every variant.
pub static VARIANTS: [&KernelVariant; 4] = [&PERTOKEN_OPT, &PERTOKEN, &DEQUANT, &FIXPIPE];

/// What the tiling sees of a case.
#[derive(Clone, Copy, Debug)]
pub struct QmmShape {
    pub m: usize,
    pub pertoken: bool,
    /// The scale is the int64 word of `npu_trans_quant_param` (f16 and int8 outputs).
    pub packed: bool,
}

/// The variant the A2/A3 tiling picks for `s` (the release does not change it within the
/// releases read).
pub fn dispatch(s: &QmmShape, p: &Platform) -> Dispatch {
    let _ = p;
    let (variant, detail): (&'static KernelVariant, String) = if s.packed {
        (
            &FIXPIPE,
            "an INT64 scale: the fixpipe dequantises the cube's int32 result".into(),
        )
    } else if s.pertoken && s.m <= OPT_MAX_M {
        (
            &PERTOKEN_OPT,
            format!(
                "ProcessMSmall: per-token scale and M = {} within the cube tiling's base M (isDecode): the opt kernel merges the two scales first",
                s.m
            ),
        )
    } else if s.pertoken {
        (
            &PERTOKEN,
            format!(
                "ProcessMSmall: M = {} beyond the base M the opt kernel takes (above {OPT_MAX_M}, assumed): dequantise, then the per-token scale",
                s.m
            ),
        )
    } else {
        (
            &DEQUANT,
            "no per-token scale, bf16 output: AscendDequant with the per-channel scale, then the float bias".into(),
        )
    };
    Dispatch { variant, detail }
}

/// The variant named `preset`, if it is one.
pub fn by_preset(preset: &str) -> Option<&'static KernelVariant> {
    VARIANTS.iter().copied().find(|v| v.preset == preset)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TILING: &str =
        "matmul/quant_batch_matmul_v3/op_host/op_tiling/quant_batch_matmul_v3_tiling.cpp";

    #[test]
    fn small_m_per_token_cases_run_the_opt_kernel() {
        let d = |m, pertoken, packed| {
            dispatch(
                &QmmShape {
                    m,
                    pertoken,
                    packed,
                },
                &MODELLED,
            )
            .variant
            .preset
        };
        // The tiling's unit tests: per-token M of 16, 24, 32 and 128 land on template 2.
        for m in [1, 8, 16, 24, 32, 128] {
            assert_eq!(d(m, true, false), "a2_pertoken_opt", "{m}");
        }
        assert_eq!(d(512, true, false), "a2_pertoken");
        assert_eq!(d(8, false, false), "a2_dequant");
        assert_eq!(d(8, false, true), "a2_fixpipe");
        for v in VARIANTS {
            assert!(v.tiling.starts_with(TILING), "{}", v.preset);
        }
    }
}
