//! What the check policies share: their errors, what tensors they need, and the CANN dtypes,
//! thresholds and levels. Each policy's judge is in [`super::policies`]; a suite's check table
//! becomes one through [`super::CheckPolicy`].
//!
//! A policy is a table tagged by `policy`; unknown keys are errors:
//!
//! ```toml
//! check = { policy = "bitwise" }                       # nan_bits = false
//! check = { policy = "ulp", max = 1 }
//! check = { policy = "allclose", atol = 1e-2, rtol = 1e-2, min_matched_ratio = 1.0 }
//! check = { policy = "cann_single" }
//! check = { policy = "cann_mixed" }
//! check = { policy = "cann_double", level = "L1" }
//! check = { policy = "error_ratio", max_ratio = 2.0, mean_ratio = 1.5, atol = 0.0 }
//! ```
//!
//! Formulas and sources are in docs/verdicts.md.

use conform_reference::formats::DType;
use conform_reference::ops::ElemType;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A policy's parameters are out of range, or the policy cannot judge the output's dtype.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum PolicyError {
    #[error("check policy `{policy}`: parameter `{param}` = {value}: {message}")]
    InvalidParam {
        policy: &'static str,
        param: &'static str,
        value: f64,
        message: &'static str,
    },
    #[error(
        "check policy `{policy}` has no threshold for dtype {dtype} (CANN defines f16, bf16, f32)"
    )]
    UnsupportedDtype {
        policy: &'static str,
        dtype: &'static str,
    },
}

/// CANN "double benchmark" (commercial) precision level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CannLevel {
    L0,
    L1,
    L2,
}

/// Limits on the ratios NPU error / baseline error at one [`CannLevel`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CannRatioLimits {
    pub mare: f64,
    pub mere: f64,
    pub rmse: f64,
}

impl CannLevel {
    /// MARE / MERE / RMSE ratio limits: L0 10/2/2, L1 5/1.5/1.5, L2 2/1.2/1.2.
    pub fn limits(self) -> CannRatioLimits {
        match self {
            CannLevel::L0 => CannRatioLimits {
                mare: 10.0,
                mere: 2.0,
                rmse: 2.0,
            },
            CannLevel::L1 => CannRatioLimits {
                mare: 5.0,
                mere: 1.5,
                rmse: 1.5,
            },
            CannLevel::L2 => CannRatioLimits {
                mare: 2.0,
                mere: 1.2,
                rmse: 1.2,
            },
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CannLevel::L0 => "L0",
            CannLevel::L1 => "L1",
            CannLevel::L2 => "L2",
        }
    }
}

impl From<DType> for CannDtype {
    fn from(d: DType) -> CannDtype {
        match d {
            DType::F16 => CannDtype::F16,
            DType::Bf16 => CannDtype::Bf16,
            DType::F32 => CannDtype::F32,
        }
    }
}

/// What conform takes from the CANN precision standards, as fidelity-ledger claims
/// (docs/ascend.md): `(id, claim)`. The figures themselves live in [`CannDtype`] and
/// [`CannLevel::limits`].
pub const CANN_STANDARD_CLAIMS: [(&str, &str); 8] = [
    (
        "cann.single.threshold",
        "T = 2^-10 f16, 2^-7 bf16, 2^-13 f32 (2^-11 HiF32, 2^-3 e4m3, 2^-2 e5m2)",
    ),
    (
        "cann.single.rule",
        "MERE < T and MARE < 10 T, relative errors over |golden| + 1e-7",
    ),
    ("cann.mixed.rule", "an element passes if |a - g| <= T + T |g|"),
    (
        "cann.mixed.pass_ratio",
        "at least 99% of the elements pass",
    ),
    (
        "cann.mixed.max_abs",
        "largest absolute error at most 0.1 (f16, bf16, HiF32), 0.01 (f32), 1 (fp8)",
    ),
    (
        "cann.double.limits",
        "MARE / MERE / RMSE ratios to the baseline: L0 10 / 2 / 2, L1 5 / 1.5 / 1.5, L2 2 / 1.2 / 1.2",
    ),
    (
        "cann.double.small_values",
        "small below 2^-11 f16, 2^-8 bf16, 2^-14 f32; wrong above 2^-16, 2^-16, 2^-30",
    ),
    (
        "cann.double.small_count",
        "small-value error count at most 2 x max(baseline count, 1)",
    ),
];

/// The dtypes the CANN precision standard gives thresholds for: a precision category, not a
/// storage type (HiF32 and the FP8 types are compute types no tensor here is stored as). The
/// categories of stored tensors are built from the typed [`DType`] (see [`CannDtype::of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CannDtype {
    F16,
    Bf16,
    F32,
    /// HiFloat32 (Ascend's TF32-like compute type).
    Hif32,
    /// FP8 E4M3FN.
    E4m3,
    /// FP8 E5M2.
    E5m2,
}

impl CannDtype {
    /// The CANN dtype of an output element type, if the standard covers it: the standard
    /// covers every [`DType`] (and types no tensor is stored as).
    pub fn of(dtype: ElemType) -> Option<CannDtype> {
        DType::try_from(dtype).ok().map(CannDtype::from)
    }

    /// The category's name: a [`DType`]'s suite name, or the standard's own.
    pub fn name(self) -> &'static str {
        match self {
            CannDtype::F16 => DType::F16.name(),
            CannDtype::Bf16 => DType::Bf16.name(),
            CannDtype::F32 => DType::F32.name(),
            CannDtype::Hif32 => "hif32",
            CannDtype::E4m3 => "e4m3",
            CannDtype::E5m2 => "e5m2",
        }
    }

    /// The single-benchmark threshold T: 2^-10 f16, 2^-7 bf16, 2^-13 f32, 2^-11 HiF32,
    /// 2^-3 e4m3, 2^-2 e5m2.
    pub fn threshold(self) -> f64 {
        match self {
            CannDtype::F16 => pow2(-10),
            CannDtype::Bf16 => pow2(-7),
            CannDtype::F32 => pow2(-13),
            CannDtype::Hif32 => pow2(-11),
            CannDtype::E4m3 => pow2(-3),
            CannDtype::E5m2 => pow2(-2),
        }
    }

    /// The mixed-tolerance cap on the largest absolute error: 0.1 (f16, bf16, HiF32),
    /// 0.01 (f32), 1 (fp8).
    pub fn mixed_max_abs(self) -> f64 {
        match self {
            CannDtype::F16 | CannDtype::Bf16 | CannDtype::Hif32 => 0.1,
            CannDtype::F32 => 0.01,
            CannDtype::E4m3 | CannDtype::E5m2 => 1.0,
        }
    }

    /// The double-benchmark small-value rule: (|g| below which a value is "small", error above
    /// which a small value counts as wrong). f16 (2^-11, 2^-16), bf16 (2^-8, 2^-16),
    /// f32 (2^-14, 2^-30), HiF32 (2^-12, 2^-28), e4m3 (2^-4, 2^-6), e5m2 (2^-3, 2^-5): the
    /// commercial standard's table gives all six.
    pub fn small_value(self) -> Option<(f64, f64)> {
        match self {
            CannDtype::F16 => Some((pow2(-11), pow2(-16))),
            CannDtype::Bf16 => Some((pow2(-8), pow2(-16))),
            CannDtype::F32 => Some((pow2(-14), pow2(-30))),
            CannDtype::Hif32 => Some((pow2(-12), pow2(-28))),
            CannDtype::E4m3 => Some((pow2(-4), pow2(-6))),
            CannDtype::E5m2 => Some((pow2(-3), pow2(-5))),
        }
    }
}

/// 2^e, exactly, for the small exponents used here.
pub(crate) fn pow2(e: i32) -> f64 {
    f64::from_bits(((1023 + e) as u64) << 52)
}

/// Which tensors besides `actual` and `expected` a policy needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    pub oracle: bool,
    pub baseline: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cann_dtypes_of_stored_types_come_from_the_typed_dtype() {
        assert_eq!(CannDtype::of(ElemType::F16), Some(CannDtype::F16));
        assert_eq!(CannDtype::of(ElemType::Bf16), Some(CannDtype::Bf16));
        assert_eq!(CannDtype::of(ElemType::F32), Some(CannDtype::F32));
        for e in [ElemType::F64, ElemType::U8, ElemType::I32, ElemType::I64] {
            assert_eq!(CannDtype::of(e), None, "{e:?}");
        }
        for d in [DType::F32, DType::F16, DType::Bf16] {
            assert_eq!(CannDtype::from(d).name(), d.name());
        }
        assert_eq!(CannDtype::Hif32.name(), "hif32");
    }
    #[test]
    fn cann_thresholds_match_the_standard() {
        assert_eq!(CannDtype::F16.threshold(), 1.0 / 1024.0);
        assert_eq!(CannDtype::Bf16.threshold(), 1.0 / 128.0);
        assert_eq!(CannDtype::F32.threshold(), 1.0 / 8192.0);
        assert_eq!(CannDtype::Hif32.threshold(), 1.0 / 2048.0);
        assert_eq!(CannDtype::E4m3.threshold(), 0.125);
        assert_eq!(CannDtype::E5m2.threshold(), 0.25);
        assert_eq!(CannDtype::F16.mixed_max_abs(), 0.1);
        assert_eq!(CannDtype::F32.mixed_max_abs(), 0.01);
        assert_eq!(CannDtype::E4m3.mixed_max_abs(), 1.0);
        assert_eq!(
            CannDtype::Bf16.small_value(),
            Some((1.0 / 256.0, 1.0 / 65536.0))
        );
        assert_eq!(
            CannDtype::F32.small_value(),
            Some((1.0 / 16384.0, 1.0 / 1073741824.0))
        );
        // The commercial standard's table has figures for the compute-only types too.
        assert_eq!(
            CannDtype::Hif32.small_value(),
            Some((1.0 / 4096.0, 1.0 / 268435456.0))
        );
        assert_eq!(
            CannDtype::E4m3.small_value(),
            Some((1.0 / 16.0, 1.0 / 64.0))
        );
        assert_eq!(CannDtype::E5m2.small_value(), Some((0.125, 1.0 / 32.0)));
        assert_eq!(
            CannLevel::L1.limits(),
            CannRatioLimits {
                mare: 5.0,
                mere: 1.5,
                rmse: 1.5
            }
        );
    }
}
