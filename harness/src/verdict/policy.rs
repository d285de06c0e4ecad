//! Check policies: how an output tensor is judged, as written in a suite's TOML.
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

/// The dtypes the CANN precision standard gives thresholds for.
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
    /// The CANN dtype of an output element type, if the standard covers it.
    pub fn of(dtype: ElemType) -> Option<CannDtype> {
        match dtype {
            ElemType::F16 => Some(CannDtype::F16),
            ElemType::Bf16 => Some(CannDtype::Bf16),
            ElemType::F32 => Some(CannDtype::F32),
            ElemType::F64 | ElemType::U8 | ElemType::I32 | ElemType::I64 => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CannDtype::F16 => "f16",
            CannDtype::Bf16 => "bf16",
            CannDtype::F32 => "f32",
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
    /// f32 (2^-14, 2^-30). None where the standard gives no figures.
    pub fn small_value(self) -> Option<(f64, f64)> {
        match self {
            CannDtype::F16 => Some((pow2(-11), pow2(-16))),
            CannDtype::Bf16 => Some((pow2(-8), pow2(-16))),
            CannDtype::F32 => Some((pow2(-14), pow2(-30))),
            CannDtype::Hif32 | CannDtype::E4m3 | CannDtype::E5m2 => None,
        }
    }
}

/// 2^e, exactly, for the small exponents used here.
pub(crate) fn pow2(e: i32) -> f64 {
    f64::from_bits(((1023 + e) as u64) << 52)
}

fn default_allclose_tol() -> f64 {
    1e-2
}
fn default_matched_ratio() -> f64 {
    1.0
}
fn default_max_ratio() -> f64 {
    2.0
}
fn default_mean_ratio() -> f64 {
    1.5
}

/// How one output tensor is judged.
///
/// Which tensors of a [`super::Comparison`] each policy needs:
/// - `bitwise`, `ulp`, `allclose`: `expected` (the reference's output in the output dtype).
/// - `cann_single`, `cann_mixed`: `expected`; the errors are taken against `oracle` when one is
///   given (the high-precision golden of the standard), else against `expected`.
/// - `cann_double`, `error_ratio`: `expected`, `oracle` and `baseline` (all required).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "snake_case", deny_unknown_fields)]
pub enum CheckPolicy {
    /// Every element's bits equal. NaN matches NaN by class (any NaN encoding) unless
    /// `nan_bits = true` pins the encoding.
    Bitwise {
        #[serde(default)]
        nan_bits: bool,
    },
    /// ULP distance in the output dtype at most `max` for every element.
    Ulp { max: u64 },
    /// flashinfer-bench: an element fails only if |a-e| > atol AND |a-e|/(|e|+1e-8) > rtol;
    /// the case passes if the matched fraction is at least `min_matched_ratio`.
    Allclose {
        #[serde(default = "default_allclose_tol")]
        atol: f64,
        #[serde(default = "default_allclose_tol")]
        rtol: f64,
        #[serde(default = "default_matched_ratio")]
        min_matched_ratio: f64,
    },
    /// CANN single benchmark: MERE < T and MARE < 10 T, T by dtype.
    CannSingle {},
    /// CANN mixed tolerance: element passes if |a-g| <= T + T|g|; >= 99% pass and the largest
    /// absolute error is at most 0.1 (f16/bf16) or 0.01 (f32).
    CannMixed {},
    /// CANN double benchmark: NPU error / baseline error ratios within the level's limits,
    /// small values counted separately.
    CannDouble { level: CannLevel },
    /// FlashAttention rule: max and mean |a - oracle| at most `max_ratio` and `mean_ratio` times
    /// those of a same-precision baseline recipe, plus `atol`.
    ErrorRatio {
        #[serde(default = "default_max_ratio")]
        max_ratio: f64,
        #[serde(default = "default_mean_ratio")]
        mean_ratio: f64,
        #[serde(default)]
        atol: f64,
    },
}

/// Which tensors besides `actual` and `expected` a policy needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    pub oracle: bool,
    pub baseline: bool,
}

impl CheckPolicy {
    /// The policy's tag as written in TOML.
    pub fn name(&self) -> &'static str {
        match self {
            CheckPolicy::Bitwise { .. } => "bitwise",
            CheckPolicy::Ulp { .. } => "ulp",
            CheckPolicy::Allclose { .. } => "allclose",
            CheckPolicy::CannSingle {} => "cann_single",
            CheckPolicy::CannMixed {} => "cann_mixed",
            CheckPolicy::CannDouble { .. } => "cann_double",
            CheckPolicy::ErrorRatio { .. } => "error_ratio",
        }
    }

    /// Which optional tensors this policy requires.
    pub fn needs(&self) -> Needs {
        match self {
            CheckPolicy::CannDouble { .. } | CheckPolicy::ErrorRatio { .. } => Needs {
                oracle: true,
                baseline: true,
            },
            _ => Needs {
                oracle: false,
                baseline: false,
            },
        }
    }

    /// Checks the parameters' ranges (call when a suite is loaded).
    pub fn validate(&self) -> Result<(), PolicyError> {
        let bad = |param, value, message| {
            Err(PolicyError::InvalidParam {
                policy: self.name(),
                param,
                value,
                message,
            })
        };
        match *self {
            CheckPolicy::Allclose {
                atol,
                rtol,
                min_matched_ratio,
            } => {
                if !(atol >= 0.0 && atol.is_finite()) {
                    return bad("atol", atol, "must be finite and >= 0");
                }
                if !(rtol >= 0.0 && rtol.is_finite()) {
                    return bad("rtol", rtol, "must be finite and >= 0");
                }
                if !(0.0..=1.0).contains(&min_matched_ratio) {
                    return bad("min_matched_ratio", min_matched_ratio, "must be in [0, 1]");
                }
            }
            CheckPolicy::ErrorRatio {
                max_ratio,
                mean_ratio,
                atol,
            } => {
                if !(max_ratio > 0.0 && max_ratio.is_finite()) {
                    return bad("max_ratio", max_ratio, "must be finite and > 0");
                }
                if !(mean_ratio > 0.0 && mean_ratio.is_finite()) {
                    return bad("mean_ratio", mean_ratio, "must be finite and > 0");
                }
                if !(atol >= 0.0 && atol.is_finite()) {
                    return bad("atol", atol, "must be finite and >= 0");
                }
            }
            CheckPolicy::Bitwise { .. }
            | CheckPolicy::Ulp { .. }
            | CheckPolicy::CannSingle {}
            | CheckPolicy::CannMixed {}
            | CheckPolicy::CannDouble { .. } => {}
        }
        Ok(())
    }

    /// Checks that the policy can judge an output of `dtype` (call when a suite is loaded).
    pub fn validate_for(&self, dtype: ElemType) -> Result<(), PolicyError> {
        self.validate()?;
        let unsupported = || PolicyError::UnsupportedDtype {
            policy: self.name(),
            dtype: dtype.name(),
        };
        match self {
            CheckPolicy::CannSingle {} | CheckPolicy::CannMixed {} => {
                CannDtype::of(dtype).ok_or_else(unsupported)?;
            }
            CheckPolicy::CannDouble { .. } => {
                CannDtype::of(dtype)
                    .and_then(CannDtype::small_value)
                    .ok_or_else(unsupported)?;
            }
            CheckPolicy::Allclose { .. } | CheckPolicy::ErrorRatio { .. } => {
                if !dtype.is_float() {
                    return Err(PolicyError::UnsupportedDtype {
                        policy: self.name(),
                        dtype: dtype.name(),
                    });
                }
            }
            CheckPolicy::Bitwise { .. } | CheckPolicy::Ulp { .. } => {}
        }
        Ok(())
    }

    /// A short description for reports, e.g. `ulp(max=2)`, `cann_single(bf16)`.
    pub fn label(&self, dtype: ElemType) -> String {
        let dt = CannDtype::of(dtype)
            .map(CannDtype::name)
            .unwrap_or_else(|| dtype.name());
        match self {
            CheckPolicy::Bitwise { nan_bits: false } => "bitwise".to_string(),
            CheckPolicy::Bitwise { nan_bits: true } => "bitwise(nan_bits)".to_string(),
            CheckPolicy::Ulp { max } => format!("ulp(max={max})"),
            CheckPolicy::Allclose {
                atol,
                rtol,
                min_matched_ratio,
            } => {
                format!("allclose(atol={atol}, rtol={rtol}, min_matched_ratio={min_matched_ratio})")
            }
            CheckPolicy::CannSingle {} => format!("cann_single({dt})"),
            CheckPolicy::CannMixed {} => format!("cann_mixed({dt})"),
            CheckPolicy::CannDouble { level } => format!("cann_double({}, {dt})", level.name()),
            CheckPolicy::ErrorRatio {
                max_ratio,
                mean_ratio,
                atol,
            } => {
                format!("error_ratio(max_ratio={max_ratio}, mean_ratio={mean_ratio}, atol={atol})")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Holder {
        check: CheckPolicy,
    }

    fn parse(s: &str) -> Result<CheckPolicy, toml::de::Error> {
        toml::from_str::<Holder>(s).map(|h| h.check)
    }

    #[test]
    fn every_policy_parses_from_toml() {
        assert_eq!(
            parse(r#"check = { policy = "bitwise" }"#).unwrap(),
            CheckPolicy::Bitwise { nan_bits: false }
        );
        assert_eq!(
            parse(r#"check = { policy = "bitwise", nan_bits = true }"#).unwrap(),
            CheckPolicy::Bitwise { nan_bits: true }
        );
        assert_eq!(
            parse(r#"check = { policy = "ulp", max = 2 }"#).unwrap(),
            CheckPolicy::Ulp { max: 2 }
        );
        assert_eq!(
            parse(r#"check = { policy = "allclose" }"#).unwrap(),
            CheckPolicy::Allclose {
                atol: 1e-2,
                rtol: 1e-2,
                min_matched_ratio: 1.0
            }
        );
        assert_eq!(
            parse(r#"check = { policy = "allclose", atol = 1e-3, rtol = 1e-5, min_matched_ratio = 0.95 }"#)
                .unwrap(),
            CheckPolicy::Allclose {
                atol: 1e-3,
                rtol: 1e-5,
                min_matched_ratio: 0.95
            }
        );
        assert_eq!(
            parse(r#"check = { policy = "cann_single" }"#).unwrap(),
            CheckPolicy::CannSingle {}
        );
        assert_eq!(
            parse(r#"check = { policy = "cann_mixed" }"#).unwrap(),
            CheckPolicy::CannMixed {}
        );
        assert_eq!(
            parse(r#"check = { policy = "cann_double", level = "L2" }"#).unwrap(),
            CheckPolicy::CannDouble {
                level: CannLevel::L2
            }
        );
        assert_eq!(
            parse(r#"check = { policy = "error_ratio" }"#).unwrap(),
            CheckPolicy::ErrorRatio {
                max_ratio: 2.0,
                mean_ratio: 1.5,
                atol: 0.0
            }
        );
    }

    #[test]
    fn unknown_keys_and_policies_are_errors_naming_them() {
        let e = parse(r#"check = { policy = "ulp", max = 2, mx = 3 }"#).unwrap_err();
        assert!(e.to_string().contains("mx"), "{e}");
        let e = parse(r#"check = { policy = "cann_single", level = "L1" }"#).unwrap_err();
        assert!(e.to_string().contains("level"), "{e}");
        let e = parse(r#"check = { policy = "bitwise", nanbits = true }"#).unwrap_err();
        assert!(e.to_string().contains("nanbits"), "{e}");
        let e = parse(r#"check = { policy = "almost_equal" }"#).unwrap_err();
        assert!(e.to_string().contains("almost_equal"), "{e}");
        let e = parse(r#"check = { policy = "cann_double", level = "L3" }"#).unwrap_err();
        assert!(e.to_string().contains("L3"), "{e}");
        assert!(parse(r#"check = { policy = "ulp" }"#).is_err());
        assert!(parse(r#"check = { max = 1 }"#).is_err());
    }

    #[test]
    fn out_of_range_parameters_are_rejected_by_name() {
        let p = CheckPolicy::Allclose {
            atol: -1.0,
            rtol: 0.0,
            min_matched_ratio: 1.0,
        };
        assert!(matches!(
            p.validate(),
            Err(PolicyError::InvalidParam { param: "atol", .. })
        ));
        let p = CheckPolicy::Allclose {
            atol: 0.0,
            rtol: f64::NAN,
            min_matched_ratio: 1.0,
        };
        assert!(matches!(
            p.validate(),
            Err(PolicyError::InvalidParam { param: "rtol", .. })
        ));
        let p = CheckPolicy::Allclose {
            atol: 0.0,
            rtol: 0.0,
            min_matched_ratio: 1.5,
        };
        assert!(matches!(
            p.validate(),
            Err(PolicyError::InvalidParam {
                param: "min_matched_ratio",
                ..
            })
        ));
        let p = CheckPolicy::ErrorRatio {
            max_ratio: 0.0,
            mean_ratio: 1.5,
            atol: 0.0,
        };
        assert!(matches!(
            p.validate(),
            Err(PolicyError::InvalidParam {
                param: "max_ratio",
                ..
            })
        ));
    }

    #[test]
    fn cann_policies_reject_dtypes_without_thresholds() {
        for p in [
            CheckPolicy::CannSingle {},
            CheckPolicy::CannMixed {},
            CheckPolicy::CannDouble {
                level: CannLevel::L0,
            },
        ] {
            assert!(p.validate_for(ElemType::Bf16).is_ok());
            assert!(p.validate_for(ElemType::F32).is_ok());
            assert!(matches!(
                p.validate_for(ElemType::U8),
                Err(PolicyError::UnsupportedDtype { dtype: "U8", .. })
            ));
            assert!(p.validate_for(ElemType::F64).is_err());
        }
        assert!(CheckPolicy::Bitwise { nan_bits: false }
            .validate_for(ElemType::U8)
            .is_ok());
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
