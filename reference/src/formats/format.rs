//! Descriptions of binary floating-point formats, as data.

use super::exact::Exact;

/// Which special values a format encodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Specials {
    /// IEEE 754: the all-ones exponent holds infinity (zero mantissa) and NaNs.
    Ieee,
    /// No infinity; only the all-ones code (per sign) is NaN (OCP FP8 E4M3FN).
    NanOnly,
    /// Every code is finite (OCP FP4 E2M1, E1M2).
    FiniteOnly,
}

/// A binary floating-point format: sign bit, `exp_bits` exponent bits with `bias`,
/// `man_bits` fraction bits, and its special values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FloatFormat {
    pub name: &'static str,
    pub exp_bits: u32,
    pub man_bits: u32,
    pub bias: i32,
    pub specials: Specials,
}

impl FloatFormat {
    /// Total width in bits, sign included.
    pub const fn bits(&self) -> u32 {
        1 + self.exp_bits + self.man_bits
    }

    /// The largest exponent field that encodes finite values.
    pub const fn max_exp_field(&self) -> u64 {
        match self.specials {
            Specials::Ieee => (1 << self.exp_bits) - 2,
            Specials::NanOnly | Specials::FiniteOnly => (1 << self.exp_bits) - 1,
        }
    }

    /// The magnitude bits (no sign) of the largest finite value.
    pub const fn max_finite_magnitude(&self) -> u64 {
        let all_mantissa = (1u64 << self.man_bits) - 1;
        match self.specials {
            Specials::Ieee | Specials::FiniteOnly => {
                (self.max_exp_field() << self.man_bits) | all_mantissa
            }
            // The all-ones code is NaN, so the largest finite value has mantissa all-ones - 1.
            Specials::NanOnly => (self.max_exp_field() << self.man_bits) | (all_mantissa - 1),
        }
    }

    /// The magnitude bits of infinity (IEEE formats only; otherwise the max finite value).
    pub const fn infinity_magnitude(&self) -> u64 {
        match self.specials {
            Specials::Ieee => ((1 << self.exp_bits) - 1) << self.man_bits,
            _ => self.max_finite_magnitude(),
        }
    }

    /// Decodes an encoding exactly.
    pub fn decode(&self, code: u64) -> Exact {
        let negative = (code >> (self.exp_bits + self.man_bits)) & 1 != 0;
        let e = (code >> self.man_bits) & ((1 << self.exp_bits) - 1);
        let m = code & ((1 << self.man_bits) - 1);
        let all_ones_e = (1u64 << self.exp_bits) - 1;
        match self.specials {
            Specials::Ieee if e == all_ones_e => {
                return if m == 0 {
                    Exact::Infinity { negative }
                } else {
                    Exact::Nan { negative }
                };
            }
            Specials::NanOnly if e == all_ones_e && m == (1 << self.man_bits) - 1 => {
                return Exact::Nan { negative };
            }
            _ => {}
        }
        let (sig, exp) = if e == 0 {
            (m as u128, 1 - self.bias - self.man_bits as i32)
        } else {
            (
                (m | (1 << self.man_bits)) as u128,
                e as i32 - self.bias - self.man_bits as i32,
            )
        };
        Exact::Finite { negative, sig, exp }
    }
}

/// IEEE binary64.
pub const FLOAT64: FloatFormat = FloatFormat {
    name: "f64",
    exp_bits: 11,
    man_bits: 52,
    bias: 1023,
    specials: Specials::Ieee,
};

/// IEEE binary32.
pub const FLOAT32: FloatFormat = FloatFormat {
    name: "f32",
    exp_bits: 8,
    man_bits: 23,
    bias: 127,
    specials: Specials::Ieee,
};

/// Brain float 16: f32's exponent with 7 fraction bits.
pub const BFLOAT16: FloatFormat = FloatFormat {
    name: "bf16",
    exp_bits: 8,
    man_bits: 7,
    bias: 127,
    specials: Specials::Ieee,
};

/// IEEE binary16.
pub const FLOAT16: FloatFormat = FloatFormat {
    name: "f16",
    exp_bits: 5,
    man_bits: 10,
    bias: 15,
    specials: Specials::Ieee,
};

/// OCP FP4 E2M1 (MX spec v1.0): bias 1, magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; no Inf, no NaN.
pub const FP4_E2M1: FloatFormat = FloatFormat {
    name: "fp4_e2m1",
    exp_bits: 2,
    man_bits: 1,
    bias: 1,
    specials: Specials::FiniteOnly,
};

/// FP4 E1M2 (torch_npu `float4_e1m2fn_x2`, CANN `Float4E1M2`): bias 1, magnitudes
/// 0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75; no Inf, no NaN.
pub const FP4_E1M2: FloatFormat = FloatFormat {
    name: "fp4_e1m2",
    exp_bits: 1,
    man_bits: 2,
    bias: 1,
    specials: Specials::FiniteOnly,
};

/// OCP FP8 E4M3FN: bias 7, max 448, NaN only at S.1111.111, no Inf, smallest subnormal 2^-9.
pub const FP8_E4M3FN: FloatFormat = FloatFormat {
    name: "fp8_e4m3fn",
    exp_bits: 4,
    man_bits: 3,
    bias: 7,
    specials: Specials::NanOnly,
};

/// OCP FP8 E5M2: IEEE-like, bias 15, max 57344, Inf and NaNs, smallest subnormal 2^-16.
pub const FP8_E5M2: FloatFormat = FloatFormat {
    name: "fp8_e5m2",
    exp_bits: 5,
    man_bits: 2,
    bias: 15,
    specials: Specials::Ieee,
};

/// The f32 bits of `code` in a narrow `format` whose every finite value is a normal or zero
/// f32 (true for all formats of at most 8 bits here). NaN decodes to the canonical quiet f32
/// NaN 0x7FC00000 with the code's sign (payloads are not carried). A `const fn`, so decode
/// tables are built at compile time.
pub const fn narrow_to_f32_bits(format: &FloatFormat, code: u64) -> u32 {
    let man_bits = format.man_bits;
    let negative = (code >> (format.exp_bits + man_bits)) & 1 != 0;
    let sign: u32 = if negative { 0x8000_0000 } else { 0 };
    let e = (code >> man_bits) & ((1 << format.exp_bits) - 1);
    let m = code & ((1 << man_bits) - 1);
    let all_ones_e = (1u64 << format.exp_bits) - 1;
    match format.specials {
        Specials::Ieee if e == all_ones_e => {
            return if m == 0 {
                sign | 0x7F80_0000
            } else {
                sign | 0x7FC0_0000
            };
        }
        Specials::NanOnly if e == all_ones_e && m == (1 << man_bits) - 1 => {
            return sign | 0x7FC0_0000;
        }
        _ => {}
    }
    if e == 0 {
        if m == 0 {
            return sign;
        }
        // m * 2^(1 - bias - man_bits): normalise so the top set bit of m is the hidden bit.
        let top = 63 - m.leading_zeros(); // position of the top set bit of m
        let unbiased = top as i32 + 1 - format.bias - man_bits as i32;
        let frac = ((m - (1 << top)) as u32) << (23 - top);
        return sign | (((unbiased + 127) as u32) << 23) | frac;
    }
    let unbiased = e as i32 - format.bias;
    sign | (((unbiased + 127) as u32) << 23) | ((m as u32) << (23 - man_bits))
}

/// Decode table (f32 bits) of every code of a narrow format with `N = 2^bits()` codes.
pub const fn narrow_decode_table<const N: usize>(format: &FloatFormat) -> [u32; N] {
    let mut table = [0u32; N];
    let mut code = 0;
    while code < N {
        table[code] = narrow_to_f32_bits(format, code as u64);
        code += 1;
    }
    table
}
