//! The one home of dtype names and of the relations between the dtype enums.
//!
//! [`ElemType`] is the widest: every element type a tensor can be stored as. The others are
//! typed subsets of it, each for the places that can only take those types:
//!
//! - [`DType`]: the float types the reference kernels compute in and round to (f32, f16,
//!   bf16);
//! - [`HalfType`]: the 16-bit output types of FP4 dequantisation (bf16, f16).
//!
//! One alias table ([`NAMES`]) maps every accepted spelling to an [`ElemType`], matched without
//! regard to ASCII case; the subsets parse through it and then convert, so all three accept the
//! same spellings and refuse the same way. Widening conversions are `From`; narrowing ones are
//! `TryFrom` and fail with [`NotInSubset`]. Each representation has one `name()`:
//! [`ElemType::name`] is safetensors' (`BF16`), [`ElemType::suite_name`], [`DType::name`] and
//! [`HalfType::name`] are the suites' (`bf16`). Serde representations are the types' own
//! derives and do not go through this table.

use crate::dequant::HalfType;
use crate::formats::DType;
use crate::ops::ElemType;
use std::str::FromStr;
use thiserror::Error;

/// One element type's names: safetensors', the suites', and every other spelling accepted.
#[derive(Clone, Copy, Debug)]
pub struct DtypeNames {
    pub dtype: ElemType,
    /// The safetensors name (`BF16`).
    pub safetensors: &'static str,
    /// The suite name (`bf16`), also the key of hardware profiles' `peak_tflops`.
    pub suite: &'static str,
    /// Further accepted spellings (matched without regard to ASCII case).
    pub aliases: &'static [&'static str],
}

/// The alias table: every [`ElemType`] once, in declaration order.
pub const NAMES: [DtypeNames; 8] = [
    names(ElemType::F64, "F64", "f64", &["float64"]),
    names(ElemType::F32, "F32", "f32", &["float32", "fp32"]),
    names(ElemType::F16, "F16", "f16", &["float16", "fp16", "half"]),
    names(ElemType::Bf16, "BF16", "bf16", &["bfloat16"]),
    names(ElemType::U8, "U8", "u8", &["uint8"]),
    names(ElemType::I32, "I32", "i32", &["int32"]),
    names(ElemType::I64, "I64", "i64", &["int64"]),
    names(ElemType::I8, "I8", "i8", &["int8"]),
];

const fn names(
    dtype: ElemType,
    safetensors: &'static str,
    suite: &'static str,
    aliases: &'static [&'static str],
) -> DtypeNames {
    DtypeNames {
        dtype,
        safetensors,
        suite,
        aliases,
    }
}

fn entry(dtype: ElemType) -> &'static DtypeNames {
    // The table lists the variants in declaration order (checked by a test).
    &NAMES[dtype as usize]
}

/// A dtype name that the alias table does not know.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("unknown dtype `{0}`")]
pub struct UnknownDtype(pub String);

/// A dtype outside the subset a conversion narrows to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error("{} is not {subset}", .dtype.suite_name())]
pub struct NotInSubset {
    pub dtype: ElemType,
    /// What the subset holds, e.g. "f32, f16 or bf16".
    pub subset: &'static str,
}

/// Why a name does not parse as a subset type: unknown, or known but outside the subset.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DtypeParseError {
    #[error(transparent)]
    Unknown(#[from] UnknownDtype),
    #[error(transparent)]
    NotInSubset(#[from] NotInSubset),
}

impl ElemType {
    /// The safetensors dtype name (`F32`, `BF16`, ...).
    pub fn name(self) -> &'static str {
        entry(self).safetensors
    }

    /// The suite dtype name (`f32`, `bf16`, ...).
    pub fn suite_name(self) -> &'static str {
        entry(self).suite
    }
}

/// The one parser: a safetensors name, a suite name or an alias, in any ASCII case.
impl FromStr for ElemType {
    type Err = UnknownDtype;

    fn from_str(s: &str) -> Result<ElemType, UnknownDtype> {
        NAMES
            .iter()
            .find(|n| {
                std::iter::once(n.suite)
                    .chain(n.aliases.iter().copied())
                    .any(|name| name.eq_ignore_ascii_case(s))
            })
            .map(|n| n.dtype)
            .ok_or_else(|| UnknownDtype(s.to_string()))
    }
}

const DTYPE_SUBSET: &str = "f32, f16 or bf16";
const HALF_SUBSET: &str = "bf16 or f16";

impl From<DType> for ElemType {
    fn from(d: DType) -> ElemType {
        match d {
            DType::F32 => ElemType::F32,
            DType::F16 => ElemType::F16,
            DType::Bf16 => ElemType::Bf16,
        }
    }
}

impl TryFrom<ElemType> for DType {
    type Error = NotInSubset;

    fn try_from(e: ElemType) -> Result<DType, NotInSubset> {
        match e {
            ElemType::F32 => Ok(DType::F32),
            ElemType::F16 => Ok(DType::F16),
            ElemType::Bf16 => Ok(DType::Bf16),
            ElemType::F64 | ElemType::U8 | ElemType::I8 | ElemType::I32 | ElemType::I64 => {
                Err(NotInSubset {
                    dtype: e,
                    subset: DTYPE_SUBSET,
                })
            }
        }
    }
}

impl From<HalfType> for DType {
    fn from(h: HalfType) -> DType {
        match h {
            HalfType::Bf16 => DType::Bf16,
            HalfType::F16 => DType::F16,
        }
    }
}

impl From<HalfType> for ElemType {
    fn from(h: HalfType) -> ElemType {
        DType::from(h).into()
    }
}

impl TryFrom<DType> for HalfType {
    type Error = NotInSubset;

    fn try_from(d: DType) -> Result<HalfType, NotInSubset> {
        match d {
            DType::Bf16 => Ok(HalfType::Bf16),
            DType::F16 => Ok(HalfType::F16),
            DType::F32 => Err(NotInSubset {
                dtype: ElemType::F32,
                subset: HALF_SUBSET,
            }),
        }
    }
}

impl TryFrom<ElemType> for HalfType {
    type Error = NotInSubset;

    fn try_from(e: ElemType) -> Result<HalfType, NotInSubset> {
        DType::try_from(e)
            .and_then(HalfType::try_from)
            .map_err(|_| NotInSubset {
                dtype: e,
                subset: HALF_SUBSET,
            })
    }
}

impl DType {
    /// The suite name (`f32`, `f16`, `bf16`).
    pub fn name(self) -> &'static str {
        ElemType::from(self).suite_name()
    }
}

impl HalfType {
    /// The suite name (`bf16`, `f16`).
    pub fn name(self) -> &'static str {
        ElemType::from(self).suite_name()
    }
}

/// Parses through the alias table, then narrows.
impl FromStr for DType {
    type Err = DtypeParseError;

    fn from_str(s: &str) -> Result<DType, DtypeParseError> {
        Ok(DType::try_from(s.parse::<ElemType>()?)?)
    }
}

/// Parses through the alias table, then narrows.
impl FromStr for HalfType {
    type Err = DtypeParseError;

    fn from_str(s: &str) -> Result<HalfType, DtypeParseError> {
        Ok(HalfType::try_from(s.parse::<ElemType>()?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ElemType; 8] = ElemType::ALL;

    #[test]
    fn the_table_lists_every_elem_type_once_in_declaration_order() {
        for (i, (n, e)) in NAMES.iter().zip(ALL).enumerate() {
            assert_eq!(n.dtype, e, "row {i}");
            assert_eq!(e as usize, i);
        }
    }

    #[test]
    fn every_name_and_alias_parses_in_any_case() {
        let expected: [(ElemType, &[&str]); 8] = [
            (ElemType::F64, &["F64", "f64", "float64", "FLOAT64"]),
            (ElemType::F32, &["F32", "f32", "float32", "fp32", "FP32"]),
            (
                ElemType::F16,
                &["F16", "f16", "float16", "fp16", "half", "HALF"],
            ),
            (ElemType::Bf16, &["BF16", "bf16", "bfloat16", "BFloat16"]),
            (ElemType::U8, &["U8", "u8", "uint8", "UINT8"]),
            (ElemType::I32, &["I32", "i32", "int32", "INT32"]),
            (ElemType::I64, &["I64", "i64", "int64", "INT64"]),
            (ElemType::I8, &["I8", "i8", "int8", "INT8"]),
        ];
        for (e, spellings) in expected {
            for s in spellings {
                assert_eq!(s.parse::<ElemType>(), Ok(e), "{s}");
            }
        }
        // Every alias in the table is covered above.
        for n in &NAMES {
            for a in n.aliases {
                assert_eq!(a.to_ascii_uppercase().parse::<ElemType>(), Ok(n.dtype));
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for e in ALL {
            assert_eq!(e.name().parse::<ElemType>(), Ok(e));
            assert_eq!(e.suite_name().parse::<ElemType>(), Ok(e));
            assert_eq!(e.name().to_ascii_lowercase(), e.suite_name());
        }
        for d in [DType::F32, DType::F16, DType::Bf16] {
            assert_eq!(d.name().parse::<DType>(), Ok(d));
            assert_eq!(DType::try_from(ElemType::from(d)), Ok(d));
        }
        for h in [HalfType::Bf16, HalfType::F16] {
            assert_eq!(h.name().parse::<HalfType>(), Ok(h));
            assert_eq!(HalfType::try_from(DType::from(h)), Ok(h));
            assert_eq!(HalfType::try_from(ElemType::from(h)), Ok(h));
            assert_eq!(ElemType::from(DType::from(h)), ElemType::from(h));
        }
        assert_eq!(DType::Bf16.name(), "bf16");
        assert_eq!(HalfType::F16.name(), "f16");
        assert_eq!(ElemType::Bf16.name(), "BF16");
    }

    #[test]
    fn unknown_names_and_narrowing_are_typed_errors() {
        for s in [
            "", "f8", "bf 16", "float", "e4m3", "hif32", "tf32", "int4", " f16",
        ] {
            assert_eq!(
                s.parse::<ElemType>(),
                Err(UnknownDtype(s.to_string())),
                "{s}"
            );
            assert_eq!(
                s.parse::<DType>(),
                Err(DtypeParseError::Unknown(UnknownDtype(s.to_string())))
            );
            assert!(matches!(
                s.parse::<HalfType>(),
                Err(DtypeParseError::Unknown(_))
            ));
        }
        assert_eq!(UnknownDtype("f8".into()).to_string(), "unknown dtype `f8`");
        for e in [ElemType::F64, ElemType::U8, ElemType::I32, ElemType::I64] {
            let err = DType::try_from(e).unwrap_err();
            assert_eq!(err.dtype, e);
            assert_eq!(
                e.suite_name().parse::<DType>(),
                Err(DtypeParseError::NotInSubset(err))
            );
            assert_eq!(HalfType::try_from(e).unwrap_err().dtype, e);
        }
        let err = HalfType::try_from(DType::F32).unwrap_err();
        assert_eq!(err.to_string(), "f32 is not bf16 or f16");
        assert_eq!(HalfType::try_from(ElemType::F32), Err(err));
        assert_eq!(
            "float32".parse::<HalfType>(),
            Err(DtypeParseError::NotInSubset(err))
        );
        assert_eq!(
            DType::try_from(ElemType::I32).unwrap_err().to_string(),
            "i32 is not f32, f16 or bf16"
        );
    }
}
