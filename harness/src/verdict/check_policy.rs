//! [`CheckPolicy`]: how one output tensor is judged, as a suite's TOML table names it: one of
//! the registered judges ([`super::policies`]) with its validated parameters.

use super::policies::{find, Judge, Policy, REGISTRY};
use super::policy::{Needs, PolicyError};
use conform_reference::ops::ElemType;
use std::fmt;
use std::sync::Arc;
use thiserror::Error;

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
/// tensors of a [`crate::verdict::Comparison`] each policy needs is [`CheckPolicy::needs`]; the
/// policies, formulas and sources are in docs/verdicts.md.
#[derive(Clone)]
pub struct CheckPolicy(Arc<dyn Judge>);

/// Every judge is a check policy (`CheckPolicy::from(Ulp { max: 1 })`).
impl<P: Policy> From<P> for CheckPolicy {
    fn from(judge: P) -> CheckPolicy {
        CheckPolicy(Arc::new(judge))
    }
}

impl CheckPolicy {
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
        let entry = find(&name).ok_or_else(|| CheckError::UnknownPolicy {
            name: name.clone(),
            known: CheckPolicy::known().join(", "),
        })?;
        let policy = CheckPolicy((entry.parse)(params).map_err(|e| CheckError::Params {
            policy: entry.name,
            message: e.message().trim().to_string(),
        })?);
        policy.validate()?;
        Ok(policy)
    }

    /// The tags of every registered policy.
    pub fn known() -> Vec<&'static str> {
        REGISTRY.iter().map(|e| e.name).collect()
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
    use crate::verdict::{policies, CannLevel};

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
}
