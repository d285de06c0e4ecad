//! Robust descriptive statistics over timing samples: order statistics, quantiles, Tukey
//! fences, trimmed and fenced means.
//!
//! Every function takes samples that the caller has already validated (finite; the perf-file
//! reader rejects anything else) and returns `None` instead of panicking on an empty slice.

/// The samples sorted ascending (total order; the inputs are finite).
pub fn sorted(samples: &[f64]) -> Vec<f64> {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// Quantile `p` in `[0, 1]` of an ascending slice, Hyndman-Fan type 7 (the default of R and
/// NumPy): linear interpolation between order statistics at position `(n - 1) p`.
pub fn quantile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=1.0).contains(&p) {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    let frac = h - lo as f64;
    Some(sorted[lo] + frac * (sorted[hi] - sorted[lo]))
}

/// Quantile `p` (type 7) of unsorted samples.
pub fn quantile(samples: &[f64], p: f64) -> Option<f64> {
    quantile_sorted(&sorted(samples), p)
}

/// The median (type-7 quantile 0.5: the mean of the two middle values for an even count).
pub fn median(samples: &[f64]) -> Option<f64> {
    quantile(samples, 0.5)
}

/// Tukey fences `[Q1 - k IQR, Q3 + k IQR]`; `k = 1.5` are the inner fences, `k = 3` the outer
/// ("far out") fences.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fences {
    pub low: f64,
    pub high: f64,
}

impl Fences {
    /// Fences of an ascending slice.
    pub fn of_sorted(sorted: &[f64], k: f64) -> Option<Fences> {
        let q1 = quantile_sorted(sorted, 0.25)?;
        let q3 = quantile_sorted(sorted, 0.75)?;
        let iqr = q3 - q1;
        Some(Fences {
            low: q1 - k * iqr,
            high: q3 + k * iqr,
        })
    }

    /// Whether `x` lies inside the fences (inclusive).
    pub fn contains(&self, x: f64) -> bool {
        x >= self.low && x <= self.high
    }
}

/// Number of samples outside the Tukey fences with multiplier `k`.
pub fn count_outside_fences(samples: &[f64], k: f64) -> usize {
    let s = sorted(samples);
    match Fences::of_sorted(&s, k) {
        Some(f) => s.iter().filter(|&&x| !f.contains(x)).count(),
        None => 0,
    }
}

/// Mean after dropping the samples outside the Tukey fences with multiplier `k`.
/// The fences always contain the quartiles, so at least half the samples are kept.
pub fn fenced_mean(samples: &[f64], k: f64) -> Option<f64> {
    let s = sorted(samples);
    let f = Fences::of_sorted(&s, k)?;
    let kept: Vec<f64> = s.into_iter().filter(|&x| f.contains(x)).collect();
    mean(&kept)
}

/// Symmetric trimmed mean: drop `floor(fraction * n)` samples from each end (`fraction` in
/// `[0, 0.5)`), average the rest.
pub fn trimmed_mean(samples: &[f64], fraction: f64) -> Option<f64> {
    if samples.is_empty() || !(0.0..0.5).contains(&fraction) {
        return None;
    }
    let s = sorted(samples);
    let g = (fraction * s.len() as f64).floor() as usize;
    mean(&s[g..s.len() - g])
}

/// Arithmetic mean (summed in index order).
pub fn mean(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    Some(samples.iter().sum::<f64>() / samples.len() as f64)
}

/// Sample standard deviation (n - 1 denominator); `None` below two samples.
pub fn std_dev(samples: &[f64]) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let m = mean(samples)?;
    let ss: f64 = samples.iter().map(|x| (x - m) * (x - m)).sum();
    Some((ss / (samples.len() - 1) as f64).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_match_hand_computed_type7_values() {
        // sorted: 1 2 3 4 5 6 7 8 9 10 ; h = 9p
        let v = [7.0, 1.0, 10.0, 3.0, 2.0, 9.0, 5.0, 4.0, 8.0, 6.0];
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&v, 1.0), Some(10.0));
        assert_eq!(median(&v), Some(5.5));
        // h = 2.25 -> 3 + 0.25 * (4 - 3)
        assert_eq!(quantile(&v, 0.25), Some(3.25));
        // h = 6.75 -> 7 + 0.75
        assert_eq!(quantile(&v, 0.75), Some(7.75));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[]), None);
        assert_eq!(quantile(&v, 1.5), None);
        assert_eq!(quantile(&v, f64::NAN), None);
    }

    #[test]
    fn fences_and_fenced_mean_drop_a_spike() {
        // 1..=10 plus a spike at 100: Q1 = 3.5, Q3 = 8.5 (h = 2.5, 7.5), IQR = 5
        let mut v: Vec<f64> = (1..=10).map(f64::from).collect();
        v.push(100.0);
        let f = Fences::of_sorted(&sorted(&v), 1.5).unwrap();
        assert_eq!(
            f,
            Fences {
                low: -4.0,
                high: 16.0
            }
        );
        assert_eq!(count_outside_fences(&v, 1.5), 1);
        assert_eq!(fenced_mean(&v, 1.5), Some(5.5));
        let outer = Fences::of_sorted(&sorted(&v), 3.0).unwrap();
        assert_eq!(
            outer,
            Fences {
                low: -11.5,
                high: 23.5
            }
        );
        assert_eq!(fenced_mean(&v, 3.0), Some(5.5));
        // without the spike nothing is dropped
        assert_eq!(fenced_mean(&v[..10], 1.5), Some(5.5));
    }

    #[test]
    fn trimmed_mean_and_dispersion_match_hand_computed_values() {
        // 20% of 10 = 2 from each end: mean of 3..=8 = 5.5 even with the spike replacing 10
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 1000.0];
        assert_eq!(trimmed_mean(&v, 0.2), Some(5.5));
        assert_eq!(trimmed_mean(&v, 0.0), Some(104.5));
        assert_eq!(trimmed_mean(&v, 0.5), None);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
        // deviations -2, -1, 3: ss = 14, / 2 = 7
        assert_eq!(std_dev(&[1.0, 2.0, 6.0]), Some(7.0f64.sqrt()));
        assert_eq!(std_dev(&[1.0]), None);
    }
}
