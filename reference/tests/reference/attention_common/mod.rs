//! Shared helpers of the attention tests: deterministic random problems.
#![allow(dead_code)]

use conform_reference::attention::{AttentionConfig, AttentionInputs, Geometry};
use conform_reference::formats::{DType, Rounding};

/// The vector cores the decode kernel's tiling splits over in these tests (the reference
/// takes the count from the caller): a 48-vector-core SoC, as ci/hardware/ascend-910b2.toml
/// describes Ascend910B2.
pub const VECTOR_CORES: usize = 48;

/// The tests' bit source: SplitMix64 started at `seed ^ GAMMA`.
pub type Rng = conform_reference::splitmix::SplitMix64;

/// The generator of problem `seed`.
pub fn rng(seed: u64) -> Rng {
    Rng::new(seed ^ conform_reference::splitmix::GAMMA)
}

/// `n` values uniform in [-amp, amp), rounded once (RNE) to `dtype`.
pub fn values(rng: &mut Rng, n: usize, amp: f32, dtype: DType) -> Vec<f32> {
    (0..n)
        .map(|_| dtype.quantize_f32(rng.sym_f32() * amp, Rounding::RNE))
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
        let mut rng = rng(seed);
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
