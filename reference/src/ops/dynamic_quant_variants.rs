//! `dynamic_quant`'s kernel variants and the A2/A3 host tiling's dispatch among them
//! (hicann/ops-nn `quant/dynamic_quant/op_host/dynamic_quant_tiling.cpp`,
//! `DynamicQuantTiling::RunFusionKernelTiling`; docs/ascend.md, "dynamic_quant").
//!
//! The tiling, for the symmetric int8 form conform models (no offset output, `dst_type` int8),
//! in the order it tries:
//! 1. `SetSpecialTilingForDs` (key 100, `dynamic_quant_single_row.h`): no `group_index`, a row
//!    of 4096, 5120 or 10240 elements, 4 to 384 rows;
//! 2. `CalcTilingForMultiRow` (key 10, `dynamic_quant_multi_row.h`): no `group_index`, a row
//!    length that is a multiple of 8, at least 128 and at most `maxUbLen`, the UB left after
//!    1024 reserved bytes and 3392 bytes of constants, divided by 11 (15 with smooth scales),
//!    cut to a multiple of 64 and at most 255 x 64;
//! 3. `SetTilingData` / `SetTilingKey` on the per-row footprint of an aligned row (`a` = the
//!    row length rounded up to 16): with `group_index` (E groups) `ceil8(E) x 4 + 17a` bytes,
//!    otherwise `11a` (13a double-buffered; 17a / 19a with smooth scales). If not one row fits
//!    the UB less 1024 bytes, the row is cut into pieces: key 8 (MoE) or 6
//!    (`dynamic_quant_large_shape_opt.h`); else key 7 with `group_index`
//!    (`dynamic_quant_moe.h`); else the double-buffered key 2 (bf16) / 3 (f16)
//!    (`dynamic_quant_db.h`) when a double-buffered row fits, and key 0 / 1
//!    (`dynamic_quant.h`) when only a single-buffered one does.
//!
//! Steps 1 and 2 exist from ops-nn v9.0.0-beta.1 (the commit "dynamicQuant性能优化"); the
//! 8.3 and 8.5 sources have step 3 only. The variants differ in the stored scale: keys 0/1,
//! 6, 7 and 8 (and every key before 9.0) divide 127 by the row max and store the scalar
//! reciprocal of that quotient; keys 2/3 (from 9.0), 10 and 100 store `max x fl32(1/127)`.
//! All quantise with the quotient `fl32(127 / max)`.
//!
//! The UB size is 196608 bytes, the figure the tiling's own unit tests give `Ascend910B`; that
//! A3 parts have the same is assumed (the A2/A3 tiling is one function for both).

use super::dynamic_quant::ScaleForm;
use crate::variant::{Dispatch, KernelVariant, Platform, Release, ReleaseRange, Soc, Stage};

/// The release the multi-row and single-row kernels (and the db kernel's new scale) arrived
/// in: ops-nn v9.0.0-beta.1.
const NEW_KERNELS: Release = Release::new(9, 0, 0).at(Stage::Beta(1));
/// The oldest release of the open source (ops-nn's first commit is the 8.3.RC1 line).
const OPEN_SOURCE: Release = Release::new(8, 3, 0).at(Stage::Candidate(1));
/// Every release read.
const ALL: ReleaseRange = ReleaseRange::new(OPEN_SOURCE, None);
const OLD: ReleaseRange = ReleaseRange::new(OPEN_SOURCE, Some(NEW_KERNELS));
const NEW: ReleaseRange = ReleaseRange::new(NEW_KERNELS, None);
const SOCS: &[Soc] = &[Soc::A2, Soc::A3];

/// The platform the recipe `ascend_a2` describes: an A2 at the newest release read (ops-nn at
/// its 2026-08-22 snapshot e5c3fa9, after the v9.2.0-beta.1 tag).
pub const MODELLED: Platform = Platform {
    soc: Soc::A2,
    release: Release::new(9, 2, 0).at(Stage::Beta(1)),
};

/// The UB bytes of an A2 vector core (the tiling's unit tests for `Ascend910B`).
pub const UB_BYTES: u64 = 196_608;

macro_rules! variant {
    ($preset:literal, $tiling:literal, $key:literal, $kernel:literal, $releases:expr) => {
        KernelVariant {
            id: $preset,
            preset: $preset,
            tiling: concat!(
                "quant/dynamic_quant/op_host/dynamic_quant_tiling.cpp ",
                $tiling
            ),
            key: $key,
            kernel: concat!("quant/dynamic_quant/op_kernel/", $kernel),
            socs: SOCS,
            releases: $releases,
            conventions: &[],
        }
    };
}

pub static PLAIN: KernelVariant = variant!(
    "a2_plain",
    "SetTilingData / SetTilingKey",
    "0 (bf16) / 1 (f16)",
    "dynamic_quant.h",
    ALL
);
pub static DB_OLD: KernelVariant = variant!(
    "a2_db_old",
    "SetTilingData / SetTilingKey",
    "2 (bf16) / 3 (f16)",
    "dynamic_quant_db.h",
    OLD
);
pub static DB: KernelVariant = variant!(
    "a2_db",
    "SetTilingData / SetTilingKey",
    "2 (bf16) / 3 (f16)",
    "dynamic_quant_db.h",
    NEW
);
pub static LARGE_SHAPE: KernelVariant = variant!(
    "a2_large_shape",
    "SetTilingData / SetTilingKey",
    "6",
    "dynamic_quant_large_shape_opt.h",
    ALL
);
pub static MOE: KernelVariant = variant!(
    "a2_moe",
    "SetTilingData / SetTilingKey",
    "7",
    "dynamic_quant_moe.h",
    ALL
);
pub static MOE_LARGE_SHAPE: KernelVariant = variant!(
    "a2_moe_large_shape",
    "SetTilingData / SetTilingKey",
    "8",
    "dynamic_quant_moe_large_shape.h",
    ALL
);
pub static MULTI_ROW: KernelVariant = variant!(
    "a2_multi_row",
    "CalcTilingForMultiRow",
    "10",
    "dynamic_quant_multi_row.h",
    NEW
);
pub static SINGLE_ROW: KernelVariant = variant!(
    "a2_single_row",
    "SetSpecialTilingForDs",
    "100",
    "dynamic_quant_single_row.h",
    NEW
);

/// Every variant.
pub static VARIANTS: [&KernelVariant; 8] = [
    &PLAIN,
    &DB_OLD,
    &DB,
    &LARGE_SHAPE,
    &MOE,
    &MOE_LARGE_SHAPE,
    &MULTI_ROW,
    &SINGLE_ROW,
];

/// The stored scale's form in a variant's kernel.
pub fn scale_form(preset: &str) -> Option<ScaleForm> {
    let v = VARIANTS.iter().find(|v| v.preset == preset)?;
    Some(
        if [&DB, &MULTI_ROW, &SINGLE_ROW]
            .iter()
            .any(|w| std::ptr::eq(*w, *v))
        {
            ScaleForm::MaxTimesInverse
        } else {
            ScaleForm::QuotientThenReciprocal
        },
    )
}

/// What the tiling sees of a case.
#[derive(Clone, Copy, Debug)]
pub struct DqShape {
    /// Rows: the product of x's dimensions but the last.
    pub rows: usize,
    /// The last dimension.
    pub row_len: usize,
    pub f16: bool,
    pub smooth: bool,
    /// `group_index`'s length, when given.
    pub groups: Option<usize>,
}

/// The UB bytes the multi-row kernel may give one loop's rows (`CheckMultiRowPreconditions`).
fn multi_row_limit(smooth: bool) -> u64 {
    let usable = UB_BYTES - 1024 - (256 + 64 + 12 * 64 * 4);
    let per = if smooth { 15 } else { 11 };
    (usable / per / 64 * 64).min(255 * 64)
}

/// The variant the A2/A3 tiling picks for `s` on platform `p`, with its reasoning.
pub fn dispatch(s: &DqShape, p: &Platform) -> Dispatch {
    let (rows, len) = (s.rows as u64, s.row_len as u64);
    let new = NEW.contains(p.release);
    if new && s.groups.is_none() && [4096, 5120, 10240].contains(&len) && (4..=384).contains(&rows)
    {
        return Dispatch {
            variant: &SINGLE_ROW,
            detail: format!(
                "SetSpecialTilingForDs: a {len}-element row (4096, 5120 or 10240) and {rows} rows (4 to 384)"
            ),
        };
    }
    let limit = multi_row_limit(s.smooth);
    if new && s.groups.is_none() && len >= 128 && len <= limit && len % 8 == 0 {
        return Dispatch {
            variant: &MULTI_ROW,
            detail: format!(
                "CalcTilingForMultiRow: row length {len} is a multiple of 8 in [128, {limit}] (maxUbLen{})",
                if s.smooth { " with smooth scales" } else { "" }
            ),
        };
    }
    let aligned = len.div_ceil(16) * 16;
    let usable = UB_BYTES - 1024;
    let why_not_new = if new {
        "neither SetSpecialTilingForDs nor CalcTilingForMultiRow applies"
    } else {
        "this release's tiling has no multi-row or single-row kernel"
    };
    let (variant, detail): (&'static KernelVariant, String) = match s.groups {
        Some(e) => {
            let per_row = (e as u64).div_ceil(8) * 8 * 4 + 17 * aligned;
            if usable / per_row == 0 {
                (
                    &MOE_LARGE_SHAPE,
                    format!("{why_not_new}; with group_index a row takes {per_row} UB bytes, more than the {usable} available: the row is cut into pieces"),
                )
            } else {
                (
                    &MOE,
                    format!("{why_not_new}; with group_index a row takes {per_row} of {usable} UB bytes"),
                )
            }
        }
        None => {
            let (db, single) = if s.smooth { (19, 17) } else { (13, 11) };
            let (db, single) = (db * aligned, single * aligned);
            if usable / single == 0 {
                (
                    &LARGE_SHAPE,
                    format!("{why_not_new}; a row takes {single} UB bytes, more than the {usable} available: the row is cut into pieces"),
                )
            } else if db < usable {
                (
                    if new { &DB } else { &DB_OLD },
                    format!("{why_not_new}; a double-buffered row takes {db} of {usable} UB bytes"),
                )
            } else {
                (
                    &PLAIN,
                    format!("{why_not_new}; a double-buffered row takes {db} UB bytes (more than {usable}), a single one {single}"),
                )
            }
        }
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

    fn shape(
        rows: usize,
        row_len: usize,
        f16: bool,
        smooth: bool,
        groups: Option<usize>,
    ) -> DqShape {
        DqShape {
            rows,
            row_len,
            f16,
            smooth,
            groups,
        }
    }

    /// The tiling keys the ops-nn tiling unit tests (`tests/ut/op_host/test_dynamic_quant_tiling.cpp`,
    /// Ascend910B, UB 196608) assert, and the suites' own shapes.
    #[test]
    fn the_dispatch_gives_the_keys_the_tiling_tests_assert() {
        let p = &MODELLED;
        let key = |s: DqShape| dispatch(&s, p).variant.preset;
        // tiling_01 / _02: [1, 128, 1023] with smooth, f16 -> 3, bf16 -> 2 (1023 % 8 != 0).
        assert_eq!(key(shape(128, 1023, true, true, None)), "a2_db");
        assert_eq!(key(shape(128, 1023, false, true, None)), "a2_db");
        // tiling_03: [1, 1, 11263] bf16 with smooth -> 0.
        assert_eq!(key(shape(1, 11263, false, true, None)), "a2_plain");
        // tiling_09: [1, 128, 1024] with 8 groups -> 7; tiling_10: 15000 wide -> 8.
        assert_eq!(key(shape(128, 1024, false, true, Some(8))), "a2_moe");
        assert_eq!(
            key(shape(128, 15000, false, true, Some(8))),
            "a2_moe_large_shape"
        );
        // tiling_12: [1, 128, 1024] bf16 with smooth -> 10.
        assert_eq!(key(shape(128, 1024, false, true, None)), "a2_multi_row");
        // The suites: DeepSeek's 7168 (multi-row), Qwen3's 5120 (single-row from 4 rows),
        // Llama-3.1-405B's 16384 (one single-buffered row: keys 0/1), DeepSeek's dense
        // intermediate 18432 (cut into pieces: key 6).
        assert_eq!(key(shape(24, 7168, false, false, None)), "a2_multi_row");
        assert_eq!(key(shape(24, 5120, false, true, None)), "a2_single_row");
        assert_eq!(key(shape(1, 5120, false, true, None)), "a2_multi_row");
        assert_eq!(key(shape(4096, 5120, false, true, None)), "a2_multi_row");
        assert_eq!(key(shape(24, 16384, false, false, None)), "a2_plain");
        assert_eq!(key(shape(24, 16384, false, true, None)), "a2_large_shape");
        assert_eq!(key(shape(24, 18432, false, false, None)), "a2_large_shape");
        // The limits of multi-row: 16320 without smooth scales, 12800 with.
        assert_eq!(multi_row_limit(false), 16320);
        assert_eq!(multi_row_limit(true), 12800);
        // Before 9.0 only step 3 exists: the same 7168-wide rows run the double-buffered
        // kernel of that release.
        let old = Platform {
            soc: Soc::A2,
            release: Release::new(8, 5, 0),
        };
        assert_eq!(
            dispatch(&shape(24, 7168, false, false, None), &old)
                .variant
                .preset,
            "a2_db_old"
        );
    }

    const TILING: &str = "quant/dynamic_quant/op_host/dynamic_quant_tiling.cpp";
    const KERNELS: &str = "quant/dynamic_quant/op_kernel/";

    #[test]
    fn each_variant_states_its_scale_form() {
        assert_eq!(scale_form("a2_multi_row"), Some(ScaleForm::MaxTimesInverse));
        assert_eq!(
            scale_form("a2_single_row"),
            Some(ScaleForm::MaxTimesInverse)
        );
        assert_eq!(scale_form("a2_db"), Some(ScaleForm::MaxTimesInverse));
        for p in [
            "a2_plain",
            "a2_db_old",
            "a2_large_shape",
            "a2_moe",
            "a2_moe_large_shape",
        ] {
            assert_eq!(
                scale_form(p),
                Some(ScaleForm::QuotientThenReciprocal),
                "{p}"
            );
        }
        assert_eq!(scale_form("ascend_a2"), None);
        for v in VARIANTS {
            assert!(v.tiling.starts_with(TILING) && v.kernel.starts_with(KERNELS));
        }
    }
}
