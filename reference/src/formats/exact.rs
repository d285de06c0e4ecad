//! An exact value: a decoded floating-point value, finite values as an integer significand
//! and a power-of-two exponent. Below both the format descriptions and the rounding routine,
//! which each take and give it.

/// The class of a decoded value, with finite values as an exact integer significand and a
/// power-of-two exponent: `(-1)^negative * sig * 2^exp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exact {
    Nan { negative: bool },
    Infinity { negative: bool },
    Finite { negative: bool, sig: u128, exp: i32 },
}

impl Exact {
    /// Decomposes an f32 exactly.
    #[inline]
    pub fn of_f32(x: f32) -> Exact {
        let b = x.to_bits();
        let negative = b >> 31 != 0;
        let e = ((b >> 23) & 0xFF) as i32;
        let m = (b & 0x7F_FFFF) as u128;
        match e {
            0xFF if m != 0 => Exact::Nan { negative },
            0xFF => Exact::Infinity { negative },
            0 => Exact::Finite {
                negative,
                sig: m,
                exp: -149,
            },
            _ => Exact::Finite {
                negative,
                sig: m | (1 << 23),
                exp: e - 150,
            },
        }
    }

    /// Decomposes an f64 exactly.
    #[inline]
    pub fn of_f64(x: f64) -> Exact {
        let b = x.to_bits();
        let negative = b >> 63 != 0;
        let e = ((b >> 52) & 0x7FF) as i32;
        let m = (b & ((1u64 << 52) - 1)) as u128;
        match e {
            0x7FF if m != 0 => Exact::Nan { negative },
            0x7FF => Exact::Infinity { negative },
            0 => Exact::Finite {
                negative,
                sig: m,
                exp: -1074,
            },
            _ => Exact::Finite {
                negative,
                sig: m | (1 << 52),
                exp: e - 1075,
            },
        }
    }
}
