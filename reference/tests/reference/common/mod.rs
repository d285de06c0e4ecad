//! Independent value-domain oracles shared by the dequantisation and matmul tests.
//!
//! Rounding an exact f64 value to BF16/F16: the grid spacing at |x| is
//! 2^(max(floor(log2|x|), emin) - man); q = |x| / spacing splits into an integer part n (the
//! truncated code is ((exponent - emin) << man) + n) and a fraction that decides the rounding.
//! Written from the definitions, sharing nothing with the code under test.

#![allow(dead_code)]

use conform_reference::formats::{OverflowPolicy, Rounding, RoundingMode, SubnormalPolicy};

/// A 16-bit target: smallest normal exponent, mantissa bits, infinity and canonical NaN codes.
#[derive(Clone, Copy, Debug)]
pub struct Half {
    pub emin: i32,
    pub man: u32,
    pub inf: u64,
    pub nan: u16,
}

pub const BF16: Half = Half {
    emin: -126,
    man: 7,
    inf: 0x7F80,
    nan: 0x7FC0,
};
pub const F16: Half = Half {
    emin: -14,
    man: 10,
    inf: 0x7C00,
    nan: 0x7E00,
};

/// Rounds the f64 value `x` (taken as exact) to `t` under `r`. NaN gives the POSITIVE canonical
/// NaN (the dequantisation convention).
pub fn round_f64(x: f64, t: Half, r: Rounding) -> u16 {
    if x.is_nan() {
        return t.nan;
    }
    let neg = x.is_sign_negative();
    let sign: u16 = if neg { 0x8000 } else { 0 };
    let to_inf = match r.mode {
        RoundingMode::NearestTiesToEven | RoundingMode::NearestTiesAway => true,
        RoundingMode::TowardPositive => !neg,
        RoundingMode::TowardNegative => neg,
        RoundingMode::TowardZero | RoundingMode::ToOdd => false,
    };
    let saturate = r.overflow == OverflowPolicy::Saturate;
    if x.is_infinite() {
        return sign | if saturate { t.inf - 1 } else { t.inf } as u16;
    }
    let a = x.abs();
    let ex = if a == 0.0 {
        t.emin
    } else {
        (((a.to_bits() >> 52) as i32) - 1023).max(t.emin)
    };
    if ex > t.emin + 400 {
        // Far beyond the format: overflow in every mode.
        return sign
            | if saturate || !to_inf {
                t.inf - 1
            } else {
                t.inf
            } as u16;
    }
    let q = a * 2f64.powi(t.man as i32 - ex);
    let n = q.trunc();
    let frac = q - n;
    let n = n as u64;
    let inexact = frac != 0.0;
    let lo = (((ex - t.emin) as u64) << t.man) + n;
    let code = match r.mode {
        RoundingMode::NearestTiesToEven => lo + (frac > 0.5 || (frac == 0.5 && n % 2 == 1)) as u64,
        RoundingMode::NearestTiesAway => lo + (frac >= 0.5) as u64,
        RoundingMode::TowardZero => lo,
        RoundingMode::TowardPositive => lo + (inexact && !neg) as u64,
        RoundingMode::TowardNegative => lo + (inexact && neg) as u64,
        RoundingMode::ToOdd => lo | inexact as u64,
    };
    if code >= t.inf {
        return sign
            | if saturate || !to_inf {
                t.inf - 1
            } else {
                t.inf
            } as u16;
    }
    if r.subnormals == SubnormalPolicy::FlushToZero && code < (1 << t.man) {
        return sign;
    }
    sign | code as u16
}

/// The value of BF16/F16 bits as f64 (for finite codes), from the definitions.
pub fn half_value(bits: u16, t: Half) -> f64 {
    let neg = bits & 0x8000 != 0;
    let mag = (bits & 0x7FFF) as i64;
    let e = (mag >> t.man) as i32;
    let m = mag & ((1 << t.man) - 1);
    let v = if e == 0 {
        m as f64 * 2f64.powi(t.emin - t.man as i32)
    } else {
        ((1i64 << t.man) + m) as f64 * 2f64.powi(t.emin + e - 1 - t.man as i32)
    };
    if neg {
        -v
    } else {
        v
    }
}

/// E2M1 magnitudes from the OCP table (codes 0..7), in halves.
pub const E2M1_HALVES: [i64; 8] = [0, 1, 2, 3, 4, 6, 8, 12];

/// The E2M1 value of a code, from the OCP table.
pub fn e2m1_value(code: u8) -> f64 {
    let v = E2M1_HALVES[(code & 7) as usize] as f64 / 2.0;
    if code & 8 != 0 {
        -v
    } else {
        v
    }
}

/// The E4M3FN value of a code from its fields (None for NaN codes).
pub fn e4m3fn_value(code: u8) -> Option<f64> {
    if code & 0x7F == 0x7F {
        return None;
    }
    let e = ((code >> 3) & 0xF) as i32;
    let m = (code & 7) as f64;
    let v = if e == 0 {
        m * 2f64.powi(-9)
    } else {
        (8.0 + m) * 2f64.powi(e - 10)
    };
    Some(if code & 0x80 != 0 { -v } else { v })
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}
