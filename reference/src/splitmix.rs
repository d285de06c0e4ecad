//! SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
//! OOPSLA 2014): a tiny counter-based bit source, the one home of it in the project. Tests,
//! benches and simulations use it wherever they need the same numbers on every machine.
//!
//! It is not the golden input stream: case inputs come from ChaCha20 keyed per case (see
//! docs/golden.md). It feeds [`crate::ops::GenContext`] in unit tests of the generators.

/// The increment of the counter (the golden ratio in 64-bit fixed point).
pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: a bijective mix of a 64-bit word.
pub fn mix(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The generator: the state advances by [`GAMMA`] and each output is [`mix`] of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose first output is `mix(state + GAMMA)`.
    pub fn new(state: u64) -> SplitMix64 {
        SplitMix64 { state }
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix(self.state)
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform in [-1, 1) with 24 bits: every value exact in f32.
    pub fn sym_f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32) * (2.0 / (1u64 << 24) as f32) - 1.0
    }

    /// Uniform in [0, n) (modulo reduction: the bias is below 2^-40 for the sizes tests use).
    pub fn below(&mut self, n: usize) -> usize {
        self.below_u64(n as u64) as usize
    }

    /// [`SplitMix64::below`] for 64-bit bounds.
    pub fn below_u64(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

impl Iterator for SplitMix64 {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        Some(self.next_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_published_reference_outputs() {
        // The first outputs for seed 1234567 of the authors' reference implementation
        // (as listed with Vigna's splitmix64.c test vectors).
        let mut g = SplitMix64::new(1_234_567);
        assert_eq!(g.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(g.next_u64(), 3_203_168_211_198_807_973);
        assert_eq!(g.next_u64(), 9_817_491_932_198_370_423);
    }

    #[test]
    fn ranges_hold() {
        let mut g = SplitMix64::new(7);
        for _ in 0..10_000 {
            let u = g.unit();
            assert!((0.0..1.0).contains(&u));
            let s = g.sym_f32();
            assert!((-1.0..1.0).contains(&s));
            assert!(g.below(3) < 3);
        }
    }
}
