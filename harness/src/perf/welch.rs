//! The interval of the gate: Welch's two-sample t on the fenced samples, turned into an
//! interval for the ratio of means by Fieller's theorem.
//!
//! Each side is cleaned once by Tukey's outer fences (a 3x spike at 3% noise lies some 60
//! standard deviations out and is always dropped; clean samples lose nothing), then the ratio
//! `mean(candidate) / mean(baseline)` gets the set of `r` for which Welch's t of
//! `mean(c) - r mean(b)` stays inside `±t_{df, 1-alpha}`. Unlike a percentile bootstrap at
//! n = 30 (whose interval is too narrow, and which re-draws spikes in its resamples), the t
//! interval has its nominal coverage on normal noise, so the level is what it says.

use super::stats::{mean, sorted, Fences};

/// The samples of `samples` inside its Tukey fences with multiplier `k` (all of them when
/// there are too few to fence).
pub fn fenced(samples: &[f64], k: f64) -> Vec<f64> {
    let s = sorted(samples);
    match Fences::of_sorted(&s, k) {
        Some(f) => s.into_iter().filter(|&x| f.contains(x)).collect(),
        None => s,
    }
}

/// Mean and variance of the mean (sample variance / n) of a side.
fn moments(x: &[f64]) -> Option<(f64, f64)> {
    let n = x.len();
    if n < 2 {
        return None;
    }
    let m = mean(x)?;
    let ss: f64 = x.iter().map(|v| (v - m) * (v - m)).sum();
    Some((m, ss / (n - 1) as f64 / n as f64))
}

/// The two-sided `1 - 2 alpha` Fieller interval of `mean(c) / mean(b)` under Welch's t, or
/// None when the baseline mean is not clearly positive at that level (no bounded interval).
pub fn ratio_interval(b: &[f64], c: &[f64], alpha: f64) -> Option<(f64, f64)> {
    let (mb, vb) = moments(b)?;
    let (mc, vc) = moments(c)?;
    let (nb, nc) = (b.len() as f64, c.len() as f64);
    // Welch-Satterthwaite degrees of freedom (of the difference at r = 1).
    let df = if vb + vc > 0.0 {
        (vb + vc).powi(2) / (vb * vb / (nb - 1.0) + vc * vc / (nc - 1.0))
    } else {
        nb + nc - 2.0
    };
    let q = student_t_quantile(1.0 - alpha, df);
    let q2 = q * q;
    let a = mb * mb - q2 * vb;
    if a <= 0.0 {
        return None;
    }
    let half = (mb * mb * mc * mc - a * (mc * mc - q2 * vc))
        .max(0.0)
        .sqrt();
    Some(((mb * mc - half) / a, (mb * mc + half) / a))
}

/// Quantile of the standard normal distribution (Acklam's rational approximation, relative
/// error below 1.2e-9, refined by one Halley step on erfc).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// Quantile of Student's t with `df` degrees of freedom, by the Cornish-Fisher expansion
/// around the normal quantile (Abramowitz & Stegun 26.7.5): within 1e-5 of the exact value for
/// df >= 10 at the levels the gate uses (df here is about 2n - 2 = 58).
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    let z = normal_quantile(p);
    let (z2, v) = (z * z, df);
    let g1 = (z2 + 1.0) * z / 4.0;
    let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
    let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
    let g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0;
    z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_match_published_tables() {
        approx::assert_abs_diff_eq!(normal_quantile(0.975), 1.959_963_985, epsilon = 1e-8);
        approx::assert_abs_diff_eq!(normal_quantile(0.01), -2.326_347_874, epsilon = 1e-8);
        // t quantiles (numerical integration of the density): t_{0.99, 30} = 2.457262,
        // t_{0.99, 58} = 2.392377, t_{0.975, 10} = 2.228139.
        approx::assert_abs_diff_eq!(student_t_quantile(0.99, 30.0), 2.457_262, epsilon = 2e-5);
        approx::assert_abs_diff_eq!(student_t_quantile(0.99, 58.0), 2.392_377, epsilon = 2e-5);
        approx::assert_abs_diff_eq!(student_t_quantile(0.975, 10.0), 2.228_139, epsilon = 2e-4);
    }

    #[test]
    fn fieller_interval_brackets_the_ratio_and_shrinks_with_less_noise() {
        let b: Vec<f64> = (0..30).map(|i| 100.0 + (i % 7) as f64 - 3.0).collect();
        let c: Vec<f64> = b.iter().map(|x| x * 1.1).collect();
        let (lo, hi) = ratio_interval(&b, &c, 0.01).unwrap();
        assert!(lo < 1.1 && hi > 1.1 && lo > 1.05, "[{lo}, {hi}]");
        let quiet: Vec<f64> = (0..30)
            .map(|i| 100.0 + ((i % 7) as f64 - 3.0) / 10.0)
            .collect();
        let c2: Vec<f64> = quiet.iter().map(|x| x * 1.1).collect();
        let (lo2, hi2) = ratio_interval(&quiet, &c2, 0.01).unwrap();
        assert!(hi2 - lo2 < (hi - lo) / 5.0);
    }

    #[test]
    fn spikes_are_fenced_out() {
        let mut x: Vec<f64> = (0..30).map(|i| 100.0 + (i % 5) as f64).collect();
        x[3] = 300.0;
        x[17] = 310.0;
        let f = fenced(&x, 3.0);
        assert_eq!(f.len(), 28);
        assert!(f.iter().all(|&v| v < 200.0));
    }
}
