//! A reproducible random stream keyed by a name: a ChaCha8 generator whose key is derived
//! from the string, so the same key gives the same stream on every platform and run. The gate
//! simulations draw their samples from it (one stream per scenario and trial).

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A reproducible random stream for one comparison.
pub struct CaseRng(ChaCha8Rng);

impl CaseRng {
    /// Keyed by BLAKE3 in key-derivation mode over `key` (e.g. "scenario\u{0}trial"): the
    /// 256-bit ChaCha key. Independent of platform and run.
    pub fn for_key(key: &str) -> CaseRng {
        let seed = blake3::derive_key("conform perf case_rng v2", key.as_bytes());
        CaseRng(ChaCha8Rng::from_seed(seed))
    }

    /// Uniform integer in `0..n` (`n >= 1`), unbiased (Lemire's multiply-shift with
    /// rejection).
    pub fn below(&mut self, n: u32) -> u32 {
        debug_assert!(n > 0);
        let threshold = n.wrapping_neg() % n;
        loop {
            let x = self.0.next_u32();
            let wide = u64::from(x) * u64::from(n);
            if (wide as u32) >= threshold {
                return (wide >> 32) as u32;
            }
        }
    }

    /// Uniform `f64` in `[0, 1)` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_key_same_stream_different_key_different_stream() {
        let mut a = CaseRng::for_key("fa_prefill/1k\u{0}reference");
        let mut b = CaseRng::for_key("fa_prefill/1k\u{0}reference");
        let mut c = CaseRng::for_key("fa_prefill/2k\u{0}reference");
        let xa: Vec<u32> = (0..8).map(|_| a.below(1000)).collect();
        let xb: Vec<u32> = (0..8).map(|_| b.below(1000)).collect();
        let xc: Vec<u32> = (0..8).map(|_| c.below(1000)).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut r = CaseRng::for_key("uniformity");
        let mut hist = [0u32; 7];
        for _ in 0..70_000 {
            hist[r.below(7) as usize] += 1;
        }
        // each bin expects 10 000, sd ~ 93: allow 6 sd
        assert!(
            hist.iter().all(|&h| (9_440..=10_560).contains(&h)),
            "{hist:?}"
        );
        let u = r.unit();
        assert!((0.0..1.0).contains(&u));
    }
}
