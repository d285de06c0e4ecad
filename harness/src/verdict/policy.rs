//! Check policies: how an output tensor is judged, as written in a suite's TOML, and what the
//! CANN policies share (dtypes, thresholds, levels). Each policy's judge is in
//! [`super::policies`].
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

use super::policies::{self, Judge};
use conform_reference::formats::DType;
use conform_reference::ops::ElemType;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;
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

/// A check policy's TOML table could not be read: no tag, an unknown policy, parameters of
/// the wrong name or type, or parameters out of range.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CheckError {
    #[error("no `policy` key (a check is a table such as {{ policy = \"bitwise\" }})")]
    MissingTag,
    #[error("`policy` must be a string naming a check policy, not {0}")]
    TagNotString(String),
    #[error("unknown check policy `{name}` (known: {known})")]
    UnknownPolicy { name: String, known: String },
    #[error("check policy `{policy}`: {message}")]
    Params {
        policy: &'static str,
        message: String,
    },
    #[error(transparent)]
    Invalid(#[from] PolicyError),
}

/// How one output tensor is judged: a check policy's judge with its validated parameters.
///
/// Read from a suite's TOML table with [`CheckPolicy::from_table`], or built from a judge
/// (`CheckPolicy::from(Ulp { max: 1 })`, the judges are in [`super::policies`]). Which
/// tensors of a [`super::Comparison`] each policy needs is [`CheckPolicy::needs`]; the
/// policies, formulas and sources are in docs/verdicts.md.
#[derive(Clone)]
pub struct CheckPolicy(Arc<dyn Judge>);

impl CheckPolicy {
    pub(crate) fn new<J: Judge + 'static>(judge: J) -> CheckPolicy {
        CheckPolicy(Arc::new(judge))
    }

    /// Reads a check table (`{ policy = "ulp", max = 1 }`): the tag names the policy, the
    /// other keys are its parameters (unknown keys are errors naming them), and the
    /// parameters' ranges are checked.
    pub fn from_table(table: &toml::Table) -> Result<CheckPolicy, CheckError> {
        let mut params = table.clone();
        let name = match params.remove("policy") {
            None => return Err(CheckError::MissingTag),
            Some(toml::Value::String(s)) => s,
            Some(other) => return Err(CheckError::TagNotString(other.to_string())),
        };
        let entry = policies::find(&name).ok_or_else(|| CheckError::UnknownPolicy {
            name: name.clone(),
            known: CheckPolicy::known().join(", "),
        })?;
        let policy = (entry.parse)(params).map_err(|e| CheckError::Params {
            policy: entry.name,
            message: e.message().trim().to_string(),
        })?;
        policy.validate()?;
        Ok(policy)
    }

    /// The tags of every registered policy.
    pub fn known() -> Vec<&'static str> {
        policies::REGISTRY.iter().map(|e| e.name).collect()
    }

    pub(crate) fn judge(&self) -> &dyn Judge {
        &*self.0
    }

    /// The policy's tag as written in TOML.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// Which optional tensors this policy requires.
    pub fn needs(&self) -> Needs {
        self.0.needs()
    }

    /// Whether the policy judges the bits or ULPs of the case's own recipe (`bitwise`,
    /// `ulp`): a target that runs another recipe cannot be judged by it.
    pub fn is_exact(&self) -> bool {
        self.0.exact()
    }

    /// Checks the parameters' ranges.
    pub fn validate(&self) -> Result<(), PolicyError> {
        self.0.validate()
    }

    /// Checks the parameters and that the policy can judge an output of `dtype`.
    pub fn validate_for(&self, dtype: ElemType) -> Result<(), PolicyError> {
        self.0.validate()?;
        self.0.supports(dtype)
    }

    /// A short description for reports, e.g. `ulp(max=2)`, `cann_single(bf16)`.
    pub fn label(&self, dtype: ElemType) -> String {
        self.0.label(dtype)
    }

    /// When an output passes, in one sentence (`conform explain`).
    pub fn describe(&self) -> String {
        self.0.describe()
    }
}

impl fmt::Debug for CheckPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for CheckPolicy {
    fn eq(&self, other: &CheckPolicy) -> bool {
        self.0.dyn_eq(other.0.as_any())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::policies::{
        Allclose, Bitwise, CannDouble, CannMixed, CannSingle, ErrorRatio, Ulp,
    };

    fn parse(s: &str) -> Result<CheckPolicy, CheckError> {
        let t: toml::Table = toml::from_str(s).unwrap();
        CheckPolicy::from_table(t["check"].as_table().unwrap())
    }

    #[test]
    fn every_policy_parses_from_toml() {
        let cases: Vec<(&str, CheckPolicy)> = vec![
            (
                r#"check = { policy = "bitwise" }"#,
                Bitwise { nan_bits: false }.into(),
            ),
            (
                r#"check = { policy = "bitwise", nan_bits = true }"#,
                Bitwise { nan_bits: true }.into(),
            ),
            (
                r#"check = { policy = "ulp", max = 2 }"#,
                Ulp { max: 2 }.into(),
            ),
            (
                r#"check = { policy = "allclose" }"#,
                Allclose {
                    atol: 1e-2,
                    rtol: 1e-2,
                    min_matched_ratio: 1.0,
                }
                .into(),
            ),
            (
                r#"check = { policy = "allclose", atol = 1e-3, rtol = 1e-5, min_matched_ratio = 0.95 }"#,
                Allclose {
                    atol: 1e-3,
                    rtol: 1e-5,
                    min_matched_ratio: 0.95,
                }
                .into(),
            ),
            (
                r#"check = { policy = "cann_single" }"#,
                CannSingle {}.into(),
            ),
            (r#"check = { policy = "cann_mixed" }"#, CannMixed {}.into()),
            (
                r#"check = { policy = "cann_double", level = "L2" }"#,
                CannDouble {
                    level: CannLevel::L2,
                }
                .into(),
            ),
            (
                r#"check = { policy = "error_ratio" }"#,
                ErrorRatio {
                    max_ratio: 2.0,
                    mean_ratio: 1.5,
                    atol: 0.0,
                }
                .into(),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).unwrap(), want, "{text}");
        }
        assert_ne!(
            parse(r#"check = { policy = "ulp", max = 2 }"#).unwrap(),
            CheckPolicy::from(Ulp { max: 3 })
        );
        assert_ne!(
            CheckPolicy::from(CannSingle {}),
            CheckPolicy::from(CannMixed {})
        );
    }

    #[test]
    fn every_registered_policy_is_named_by_its_judge() {
        let known = CheckPolicy::known();
        for name in [
            "bitwise",
            "ulp",
            "allclose",
            "cann_single",
            "cann_mixed",
            "cann_double",
            "error_ratio",
        ] {
            assert!(known.contains(&name), "{name} not in {known:?}");
        }
        let distinct: std::collections::BTreeSet<_> = known.iter().collect();
        assert_eq!(
            distinct.len(),
            known.len(),
            "a tag registered twice: {known:?}"
        );
        for e in policies::REGISTRY {
            let mut t = toml::Table::new();
            t.insert("policy".into(), toml::Value::String(e.name.into()));
            // Policies with a required parameter name it; the others parse bare.
            match CheckPolicy::from_table(&t) {
                Ok(p) => assert_eq!(p.name(), e.name),
                Err(err) => assert!(err.to_string().contains("missing field"), "{err}"),
            }
        }
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
        assert!(e.to_string().contains("cann_double"), "{e}");
        let e = parse(r#"check = { policy = "cann_double", level = "L3" }"#).unwrap_err();
        assert!(e.to_string().contains("L3"), "{e}");
        let e = parse(r#"check = { policy = "ulp" }"#).unwrap_err();
        assert!(e.to_string().contains("`max`"), "{e}");
        assert_eq!(
            parse(r#"check = { max = 1 }"#).unwrap_err(),
            CheckError::MissingTag
        );
        let e = parse(r#"check = { policy = "allclose", atol = -1.0 }"#).unwrap_err();
        assert!(
            matches!(
                e,
                CheckError::Invalid(PolicyError::InvalidParam { param: "atol", .. })
            ),
            "{e}"
        );
    }

    #[test]
    fn out_of_range_parameters_are_rejected_by_name() {
        let p = CheckPolicy::from(Allclose {
            atol: -1.0,
            rtol: 0.0,
            min_matched_ratio: 1.0,
        });
        assert!(matches!(
            p.validate(),
            Err(PolicyError::InvalidParam { param: "atol", .. })
        ));
        let p = CheckPolicy::from(Allclose {
            atol: 0.0,
            rtol: f64::NAN,
            min_matched_ratio: 1.0,
        });
        assert!(matches!(
            p.validate(),
            Err(PolicyError::InvalidParam { param: "rtol", .. })
        ));
        let p = CheckPolicy::from(Allclose {
            atol: 0.0,
            rtol: 0.0,
            min_matched_ratio: 1.5,
        });
        assert!(matches!(
            p.validate(),
            Err(PolicyError::InvalidParam {
                param: "min_matched_ratio",
                ..
            })
        ));
        let p = CheckPolicy::from(ErrorRatio {
            max_ratio: 0.0,
            mean_ratio: 1.5,
            atol: 0.0,
        });
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
            CheckPolicy::from(CannSingle {}),
            CheckPolicy::from(CannMixed {}),
            CheckPolicy::from(CannDouble {
                level: CannLevel::L0,
            }),
        ] {
            assert!(p.validate_for(ElemType::Bf16).is_ok());
            assert!(p.validate_for(ElemType::F32).is_ok());
            assert!(matches!(
                p.validate_for(ElemType::U8),
                Err(PolicyError::UnsupportedDtype { dtype: "U8", .. })
            ));
            assert!(p.validate_for(ElemType::F64).is_err());
        }
        assert!(CheckPolicy::from(Bitwise { nan_bits: false })
            .validate_for(ElemType::U8)
            .is_ok());
    }

    #[test]
    fn allclose_judges_int8_values_but_not_packed_codes() {
        let p = CheckPolicy::from(Allclose {
            atol: 1.0,
            rtol: 0.0,
            min_matched_ratio: 1.0,
        });
        assert!(p.validate_for(ElemType::I8).is_ok());
        assert!(matches!(
            p.validate_for(ElemType::U8),
            Err(PolicyError::UnsupportedDtype { dtype: "U8", .. })
        ));
        assert!(p.validate_for(ElemType::I32).is_err());
    }

    #[test]
    fn only_bitwise_and_ulp_are_exact() {
        assert!(CheckPolicy::from(Bitwise { nan_bits: true }).is_exact());
        assert!(CheckPolicy::from(Ulp { max: 1 }).is_exact());
        assert!(!CheckPolicy::from(CannMixed {}).is_exact());
        assert!(!CheckPolicy::from(Allclose {
            atol: 0.0,
            rtol: 0.0,
            min_matched_ratio: 1.0
        })
        .is_exact());
    }
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
