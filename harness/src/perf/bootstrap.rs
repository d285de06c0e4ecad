//! Percentile bootstrap of the ratio of a robust location estimator (candidate / baseline),
//! reproducible: the resampling stream is a ChaCha8 counter-based generator whose key is
//! derived from the case's name, so the same two sample sets always give the same interval.
//!
//! Each replicate resamples both sides with replacement and re-applies the whole estimator,
//! fences included, so the interval carries the variability of the outlier rejection too (a
//! bootstrap of the mean of pre-cleaned samples would be too narrow).
//!
//! Resampling works on counts: the samples are sorted once; a replicate draws `n` indices and
//! counts how often each was drawn, which is the resample already in sorted order. Quartiles,
//! fences and the fenced mean then cost O(n) per replicate without any sorting.

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::stats::{quantile_sorted, sorted, Fences};

/// A reproducible random stream for one comparison.
pub struct CaseRng(ChaCha8Rng);

impl CaseRng {
    /// Keyed by a stable 64-bit FNV-1a hash of `key` (e.g. "case\u{0}target"), expanded to
    /// the 256-bit ChaCha key with SplitMix64. Independent of platform and run.
    pub fn for_key(key: &str) -> CaseRng {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in key.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let mut seed = [0u8; 32];
        let mut state = h;
        for chunk in seed.chunks_exact_mut(8) {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes());
        }
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

/// One side's samples prepared for count-based resampling.
struct Resampler {
    sorted: Vec<f64>,
    counts: Vec<u32>,
}

impl Resampler {
    fn new(samples: &[f64]) -> Resampler {
        Resampler {
            sorted: sorted(samples),
            counts: vec![0; samples.len()],
        }
    }

    /// Draw a resample (as counts) and return its fenced mean.
    fn replicate(&mut self, rng: &mut CaseRng, fence_k: f64) -> f64 {
        let n = self.sorted.len();
        self.counts.iter_mut().for_each(|c| *c = 0);
        for _ in 0..n {
            self.counts[rng.below(n as u32) as usize] += 1;
        }
        fenced_mean_of_counts(&self.sorted, &self.counts, fence_k)
    }
}

/// The `r`-th order statistic (0-based) of the multiset `counts` over ascending `sorted`.
fn order_statistic(sorted: &[f64], counts: &[u32], r: usize) -> f64 {
    let mut seen = 0usize;
    for (x, &c) in sorted.iter().zip(counts) {
        seen += c as usize;
        if seen > r {
            return *x;
        }
    }
    sorted[sorted.len() - 1]
}

/// Type-7 quantile of the multiset.
fn quantile_of_counts(sorted: &[f64], counts: &[u32], total: usize, p: f64) -> f64 {
    let h = (total - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(total - 1);
    let a = order_statistic(sorted, counts, lo);
    let b = order_statistic(sorted, counts, hi);
    a + (h - lo as f64) * (b - a)
}

/// Fenced mean of the multiset given by `counts` over the ascending values `sorted`; equal to
/// [`super::stats::fenced_mean`] of the expanded resample.
fn fenced_mean_of_counts(sorted: &[f64], counts: &[u32], k: f64) -> f64 {
    let total: usize = counts.iter().map(|&c| c as usize).sum();
    let q1 = quantile_of_counts(sorted, counts, total, 0.25);
    let q3 = quantile_of_counts(sorted, counts, total, 0.75);
    let fences = Fences {
        low: q1 - k * (q3 - q1),
        high: q3 + k * (q3 - q1),
    };
    let (mut sum, mut kept) = (0.0, 0u32);
    for (&x, &c) in sorted.iter().zip(counts) {
        if c > 0 && fences.contains(x) {
            sum += f64::from(c) * x;
            kept += c;
        }
    }
    sum / f64::from(kept)
}

/// Bootstrap distribution of `fenced_mean(candidate) / fenced_mean(baseline)`, ascending.
/// Both slices must be non-empty with finite, positive values (checked by the caller).
pub fn ratio_distribution(
    baseline: &[f64],
    candidate: &[f64],
    fence_k: f64,
    resamples: usize,
    rng: &mut CaseRng,
) -> Vec<f64> {
    let mut b = Resampler::new(baseline);
    let mut c = Resampler::new(candidate);
    let mut ratios: Vec<f64> = (0..resamples)
        .map(|_| {
            let base = b.replicate(rng, fence_k);
            let cand = c.replicate(rng, fence_k);
            cand / base
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios
}

/// Percentile interval `[q(alpha), q(1 - alpha)]` of a sorted bootstrap distribution.
pub fn percentile_interval(sorted_replicates: &[f64], alpha: f64) -> Option<(f64, f64)> {
    Some((
        quantile_sorted(sorted_replicates, alpha)?,
        quantile_sorted(sorted_replicates, 1.0 - alpha)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::super::stats::fenced_mean;
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

    #[test]
    fn count_based_fenced_mean_equals_the_expanded_resample() {
        let values = [10.0, 11.0, 9.5, 10.2, 31.0, 10.1, 9.9];
        let s = sorted(&values);
        let counts = [0u32, 2, 1, 0, 3, 0, 1]; // over the sorted values
        let expanded: Vec<f64> = s
            .iter()
            .zip(&counts)
            .flat_map(|(&x, &c)| std::iter::repeat_n(x, c as usize))
            .collect();
        for k in [1.5, 3.0] {
            let a = fenced_mean_of_counts(&s, &counts, k);
            let b = fenced_mean(&expanded, k).unwrap();
            assert!((a - b).abs() < 1e-12, "{a} {b}");
        }
    }

    #[test]
    fn interval_brackets_the_true_ratio_and_is_reproducible() {
        let base: Vec<f64> = (0..40).map(|i| 100.0 + (i % 7) as f64).collect();
        let cand: Vec<f64> = base.iter().map(|x| x * 1.1).collect();
        let d1 = ratio_distribution(&base, &cand, 3.0, 2000, &mut CaseRng::for_key("k"));
        let d2 = ratio_distribution(&base, &cand, 3.0, 2000, &mut CaseRng::for_key("k"));
        assert_eq!(d1, d2);
        let (lo, hi) = percentile_interval(&d1, 0.01).unwrap();
        assert!(lo < 1.1 && hi > 1.1 && lo > 1.05 && hi < 1.15, "{lo} {hi}");
    }
}
