//! Shared helpers of the attention tests: deterministic random problems.
#![allow(dead_code)]

use conform_reference::attention::{AttentionConfig, AttentionInputs, Geometry};
use conform_reference::formats::{DType, Rounding};

/// SplitMix64 bit source.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn sym(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32) * (2.0 / (1u64 << 24) as f32) - 1.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// `n` values uniform in [-amp, amp), rounded once (RNE) to `dtype`.
pub fn values(rng: &mut Rng, n: usize, amp: f32, dtype: DType) -> Vec<f32> {
    (0..n)
        .map(|_| dtype.quantize_f32(rng.sym() * amp, Rounding::RNE))
        .collect()
}

/// A random problem for `cfg`: query, key, value (and a mask when the config asks).
pub struct Problem {
    pub g: Geometry,
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub mask: Option<Vec<u8>>,
}

impl Problem {
    pub fn new(cfg: &AttentionConfig, seed: u64, amp: f32) -> Problem {
        let g = cfg.geometry().expect("valid test configuration");
        let mut rng = Rng::new(seed);
        let q = values(&mut rng, g.q_len(), amp, g.dtype);
        let k = values(&mut rng, g.kv_len(), amp, g.dtype);
        let v = values(&mut rng, g.kv_len(), 1.0, g.dtype);
        let mask = g.atten_mask.then(|| {
            (0..g.mask_shape().iter().product::<usize>())
                .map(|_| (rng.below(4) == 0) as u8)
                .collect()
        });
        Problem { g, q, k, v, mask }
    }

    pub fn inputs(&self) -> AttentionInputs<'_> {
        AttentionInputs {
            query: &self.q,
            key: &self.k,
            value: &self.v,
            atten_mask: self.mask.as_deref(),
        }
    }
}

/// Distance in units in the last place of `dtype` between a value of that dtype and an exact
/// value (|a - e| / ulp(e) with ulp at e's binade, subnormal floor).
pub fn ulps(a: f64, e: f64, dtype: DType) -> f64 {
    let (man, min_exp) = match dtype {
        DType::Bf16 => (7, -126),
        DType::F16 => (10, -14),
        DType::F32 => (23, -126),
    };
    let exp = if e == 0.0 {
        min_exp
    } else {
        (e.abs().log2().floor() as i32).max(min_exp)
    };
    (a - e).abs() / 2f64.powi(exp - man)
}

/// Bit patterns of an f32 slice, for bitwise comparisons that also compare NaNs.
pub fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}
