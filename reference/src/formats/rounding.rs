//! Rounding modes and policies, and the one generic, correctly rounded routine that every
//! encoder in the reference is built on.
//!
//! Every rounding point in the reference names a [`Rounding`] value: the mode, what happens to
//! subnormal results, which NaN encoding is produced and what overflow does. The generic
//! routine [`round_exact`] takes an *exact* value `(-1)^neg * sig * 2^exp` and rounds it ONCE
//! to the target format, so no conversion in the reference ever double-rounds.

pub use super::exact::Exact;
use super::format::{FloatFormat, Specials, FLOAT64};

/// How a value that the target format cannot represent is rounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoundingMode {
    /// Nearest, ties to even (IEEE default; Ascend `CAST_RINT`).
    NearestTiesToEven,
    /// Nearest, ties away from zero (Ascend `CAST_ROUND`).
    NearestTiesAway,
    /// Toward zero (truncation; Ascend `CAST_TRUNC`).
    TowardZero,
    /// Toward +infinity (Ascend `CAST_CEIL`).
    TowardPositive,
    /// Toward -infinity (Ascend `CAST_FLOOR`).
    TowardNegative,
    /// Round to odd (von Neumann / jamming): truncate, then set the last bit if inexact.
    /// Rounding to odd at p+2 bits and then to nearest at p bits equals one nearest rounding.
    ToOdd,
}

impl RoundingMode {
    /// Every mode, for exhaustive tests and documentation.
    pub const ALL: [RoundingMode; 6] = [
        RoundingMode::NearestTiesToEven,
        RoundingMode::NearestTiesAway,
        RoundingMode::TowardZero,
        RoundingMode::TowardPositive,
        RoundingMode::TowardNegative,
        RoundingMode::ToOdd,
    ];

    /// The short name used in suites and recipes (`rne`, `rna`, `rtz`, `rtp`, `rtn`, `rto`).
    pub fn short_name(self) -> &'static str {
        match self {
            RoundingMode::NearestTiesToEven => "rne",
            RoundingMode::NearestTiesAway => "rna",
            RoundingMode::TowardZero => "rtz",
            RoundingMode::TowardPositive => "rtp",
            RoundingMode::TowardNegative => "rtn",
            RoundingMode::ToOdd => "rto",
        }
    }

    /// Parses a short name (see [`RoundingMode::short_name`]) or an Ascend cast-mode name.
    pub fn parse(name: &str) -> Option<RoundingMode> {
        Some(match name.to_ascii_lowercase().as_str() {
            "rne" | "rint" | "cast_rint" | "nearest_ties_to_even" => {
                RoundingMode::NearestTiesToEven
            }
            "rna" | "round" | "cast_round" | "nearest_ties_away" => RoundingMode::NearestTiesAway,
            "rtz" | "trunc" | "cast_trunc" | "toward_zero" => RoundingMode::TowardZero,
            "rtp" | "ceil" | "cast_ceil" | "toward_positive" => RoundingMode::TowardPositive,
            "rtn" | "floor" | "cast_floor" | "toward_negative" => RoundingMode::TowardNegative,
            "rto" | "odd" | "cast_odd" | "to_odd" => RoundingMode::ToOdd,
            _ => return None,
        })
    }

    /// Whether a magnitude that is not exactly representable is rounded up (away from zero).
    ///
    /// `lsb_odd`: the truncated significand is odd; `above_half`/`at_half`: how the discarded
    /// part compares with half a unit in the last place; `inexact`: anything was discarded.
    #[inline(always)]
    pub(crate) fn rounds_up(
        self,
        negative: bool,
        lsb_odd: bool,
        above_half: bool,
        at_half: bool,
        inexact: bool,
    ) -> bool {
        match self {
            RoundingMode::NearestTiesToEven => above_half || (at_half && lsb_odd),
            RoundingMode::NearestTiesAway => above_half || at_half,
            RoundingMode::TowardZero => false,
            RoundingMode::TowardPositive => inexact && !negative,
            RoundingMode::TowardNegative => inexact && negative,
            // Handled by the caller (it sets the last bit instead of incrementing).
            RoundingMode::ToOdd => false,
        }
    }

    /// Whether an overflowing result of the given sign becomes infinity (true) or the largest
    /// finite value (false), as IEEE 754 prescribes for this mode.
    #[inline]
    pub fn overflows_to_infinity(self, negative: bool) -> bool {
        match self {
            RoundingMode::NearestTiesToEven | RoundingMode::NearestTiesAway => true,
            RoundingMode::TowardZero | RoundingMode::ToOdd => false,
            RoundingMode::TowardPositive => !negative,
            RoundingMode::TowardNegative => negative,
        }
    }
}

/// What happens to results that would be encoded as subnormals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubnormalPolicy {
    /// IEEE gradual underflow: subnormal results are kept.
    Keep,
    /// Flush-to-zero: a result whose rounded encoding would be subnormal becomes a zero of the
    /// same sign (tininess detected after rounding, as x86 FTZ). Models hardware FTZ.
    FlushToZero,
}

/// Which NaN encoding a conversion produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NanPolicy {
    /// The canonical quiet NaN of the target format with the input's sign kept
    /// (bf16 0x7FC0, f16 0x7E00, f32 0x7FC00000, E4M3FN 0x7F, E5M2 0x7E). For a format with no
    /// NaN (FP4) a NaN input encodes as a zero of the input's sign; see each format's docs.
    CanonicalQuiet,
    /// Always this exact encoding (sign included), e.g. 0x7FFF for CUDA software bf16 paths.
    Pinned(u64),
}

/// What happens to finite results beyond the largest finite value, and to infinite inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverflowPolicy {
    /// IEEE: the rounding mode decides between infinity and the largest finite value. A format
    /// without infinity produces its NaN instead (E4M3FN), or saturates if it has no NaN (FP4).
    Ieee,
    /// Saturate to the largest finite value of the same sign (Ascend saturation mode; OCP
    /// "satfinite" conversions). Infinite inputs saturate too.
    Saturate,
}

/// A complete description of one rounding point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Rounding {
    pub mode: RoundingMode,
    pub subnormals: SubnormalPolicy,
    pub nan: NanPolicy,
    pub overflow: OverflowPolicy,
}

impl Rounding {
    /// IEEE round-to-nearest-even with gradual underflow and canonical NaN.
    pub const RNE: Rounding = Rounding::ieee(RoundingMode::NearestTiesToEven);
    /// Round to nearest, ties away (Ascend CAST_ROUND), otherwise IEEE.
    pub const RNA: Rounding = Rounding::ieee(RoundingMode::NearestTiesAway);

    /// The given mode with IEEE subnormals, canonical NaN and IEEE overflow.
    pub const fn ieee(mode: RoundingMode) -> Rounding {
        Rounding {
            mode,
            subnormals: SubnormalPolicy::Keep,
            nan: NanPolicy::CanonicalQuiet,
            overflow: OverflowPolicy::Ieee,
        }
    }

    /// The same rounding with flush-to-zero of subnormal results.
    pub const fn flush_to_zero(self) -> Rounding {
        Rounding {
            subnormals: SubnormalPolicy::FlushToZero,
            ..self
        }
    }

    /// The same rounding with saturation on overflow.
    pub const fn saturating(self) -> Rounding {
        Rounding {
            overflow: OverflowPolicy::Saturate,
            ..self
        }
    }

    /// The same rounding with a pinned NaN encoding.
    pub const fn with_nan(self, nan: NanPolicy) -> Rounding {
        Rounding { nan, ..self }
    }
}

impl From<RoundingMode> for Rounding {
    fn from(mode: RoundingMode) -> Self {
        Rounding::ieee(mode)
    }
}

impl Exact {
    /// Rounds this exact value ONCE to `format` under `rounding`; returns the encoding.
    #[inline]
    pub fn round_to(self, format: &FloatFormat, rounding: Rounding) -> u64 {
        round_exact(self, format, rounding)
    }
}

/// Rounds the exact value `x` to `format` in one step. Returns the bit encoding (in the low
/// `format.bits()` bits).
pub fn round_exact(x: Exact, format: &FloatFormat, rounding: Rounding) -> u64 {
    let sign_bit = 1u64 << (format.exp_bits + format.man_bits);
    let (negative, sig, exp) = match x {
        Exact::Nan { negative } => return nan_encoding(format, rounding.nan, negative),
        Exact::Infinity { negative } => {
            let sign = if negative { sign_bit } else { 0 };
            return match (rounding.overflow, format.specials) {
                (OverflowPolicy::Saturate, _) => sign | format.max_finite_magnitude(),
                (OverflowPolicy::Ieee, Specials::Ieee) => sign | format.infinity_magnitude(),
                (OverflowPolicy::Ieee, Specials::NanOnly) => {
                    nan_encoding(format, rounding.nan, negative)
                }
                (OverflowPolicy::Ieee, Specials::FiniteOnly) => {
                    sign | format.max_finite_magnitude()
                }
            };
        }
        Exact::Finite { negative, sig, exp } => (negative, sig, exp),
    };
    let sign = if negative { sign_bit } else { 0 };
    if sig == 0 {
        return sign;
    }
    let man_bits = format.man_bits as i32;
    let emin = 1 - format.bias; // unbiased exponent of the smallest normal
    let msb = 127 - sig.leading_zeros() as i32;
    let unbiased = exp + msb;
    // The exponent of the unit in the last place of the result.
    let mut quantum = if unbiased < emin {
        emin - man_bits
    } else {
        unbiased - man_bits
    };
    let mut n: u128;
    if exp >= quantum {
        // Exact: shift left (at most man_bits + 1 significant bits, so it fits).
        n = sig << (exp - quantum) as u32;
    } else {
        let r = (quantum - exp) as u32;
        let (trunc, rem_cmp_half, inexact) = if r >= 128 {
            // Everything is discarded; sig < 2^128 <= 2^(r-1) only when r > 128.
            let cmp = if r == 128 {
                sig.cmp(&(1u128 << 127))
            } else {
                std::cmp::Ordering::Less
            };
            (0u128, cmp, true)
        } else {
            let trunc = sig >> r;
            let rem = sig & ((1u128 << r) - 1);
            let half = 1u128 << (r - 1);
            (trunc, rem.cmp(&half), rem != 0)
        };
        n = trunc;
        if rounding.mode == RoundingMode::ToOdd {
            if inexact {
                n |= 1;
            }
        } else if rounding.mode.rounds_up(
            negative,
            n & 1 == 1,
            rem_cmp_half == std::cmp::Ordering::Greater,
            rem_cmp_half == std::cmp::Ordering::Equal,
            inexact,
        ) {
            n += 1;
        }
        if n >> (man_bits + 1) != 0 {
            // Carried into a new binade: n == 2^(man_bits+1) exactly.
            n >>= 1;
            quantum += 1;
        }
    }
    let hidden = 1u128 << man_bits;
    let (exp_field, mantissa) = if n < hidden {
        (0i64, n as u64)
    } else {
        (
            (quantum + man_bits + format.bias) as i64,
            (n - hidden) as u64,
        )
    };
    if exp_field == 0 && mantissa != 0 && rounding.subnormals == SubnormalPolicy::FlushToZero {
        return sign;
    }
    let encoded_mag = if exp_field > format.max_exp_field() as i64 {
        None
    } else {
        let mag = ((exp_field as u64) << format.man_bits) | mantissa;
        if mag > format.max_finite_magnitude() {
            None
        } else {
            Some(mag)
        }
    };
    match encoded_mag {
        Some(mag) => sign | mag,
        None => overflow_encoding(format, rounding, negative),
    }
}

fn overflow_encoding(format: &FloatFormat, rounding: Rounding, negative: bool) -> u64 {
    let sign = if negative {
        1u64 << (format.exp_bits + format.man_bits)
    } else {
        0
    };
    if rounding.overflow == OverflowPolicy::Saturate
        || !rounding.mode.overflows_to_infinity(negative)
    {
        return sign | format.max_finite_magnitude();
    }
    match format.specials {
        Specials::Ieee => sign | format.infinity_magnitude(),
        Specials::NanOnly => nan_encoding(format, rounding.nan, negative),
        Specials::FiniteOnly => sign | format.max_finite_magnitude(),
    }
}

/// The last step of a narrowing from f32 to an IEEE 16-bit `format` that computed its finite
/// result for every input (no early return, so that loops of conversions vectorise): a NaN
/// input (`mag`, the f32 magnitude bits, above infinity's) gives the format's NaN under
/// `rounding`, an infinite one infinity or, saturating, the largest finite magnitude, any other
/// the `finite` magnitude code; each with the input's `sign` (0 or 0x8000).
#[inline(always)]
pub(crate) fn select_f32_specials(
    format: &FloatFormat,
    rounding: Rounding,
    mag: u32,
    sign: u16,
    finite: u16,
) -> u16 {
    let infinity = (((1u32 << format.exp_bits) - 1) << format.man_bits) as u16;
    let infinite = match rounding.overflow {
        OverflowPolicy::Ieee => infinity,
        OverflowPolicy::Saturate => infinity - 1,
    };
    if mag > 0x7F80_0000 {
        nan_encoding(format, rounding.nan, sign != 0) as u16
    } else if mag == 0x7F80_0000 {
        sign | infinite
    } else {
        sign | finite
    }
}

/// The NaN encoding of `format` under `policy` for a NaN of the given sign.
pub fn nan_encoding(format: &FloatFormat, policy: NanPolicy, negative: bool) -> u64 {
    if let NanPolicy::Pinned(code) = policy {
        return code;
    }
    let sign = if negative {
        1u64 << (format.exp_bits + format.man_bits)
    } else {
        0
    };
    match format.specials {
        Specials::Ieee => {
            sign | (((1u64 << format.exp_bits) - 1) << format.man_bits)
                | (1 << (format.man_bits - 1))
        }
        Specials::NanOnly => sign | ((1u64 << (format.exp_bits + format.man_bits)) - 1),
        Specials::FiniteOnly => sign,
    }
}

/// Decoding to f64: a rounding to [`FLOAT64`] that is exact for every format here.
impl FloatFormat {
    /// Decodes an encoding to f64 (exact for every format of at most 53 significand bits and
    /// an exponent range inside f64's, which covers all formats here).
    pub fn decode_f64(&self, code: u64) -> f64 {
        exact_to_f64(self.decode(code))
    }
}

/// Converts an exact value to f64, correctly rounded (ties to even); exact for every value that
/// f64 can represent, which includes every value of every other format here.
pub fn exact_to_f64(x: Exact) -> f64 {
    match x {
        Exact::Nan { negative } => {
            if negative {
                -f64::NAN
            } else {
                f64::NAN
            }
        }
        Exact::Infinity { negative } => {
            if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        Exact::Finite { negative, sig, exp } => f64::from_bits(round_exact(
            Exact::Finite { negative, sig, exp },
            &FLOAT64,
            Rounding::RNE,
        )),
    }
}
