//! The Wilcoxon signed-rank test, one-sided, of paired differences against zero: the test the
//! same-night control runs on its per-round log ratios (`super::rounds`).
//!
//! Zero differences are dropped (Wilcoxon's convention); the others are ranked by their
//! absolute value, ties sharing their mid-rank. `W+` is the sum of the ranks of the positive
//! differences. Its null distribution (each sign + or - with probability 1/2, independently)
//! is counted exactly over the doubled ranks (so mid-ranks stay integers) up to
//! [`EXACT_MAX_N`] differences, and approximated by the normal distribution with the
//! tie-corrected variance and a continuity correction beyond.

use super::mann_whitney::Alternative;
use super::welch::normal_quantile;

/// Most differences for which the exact distribution is counted (2^n sign patterns as counts
/// in `f64`: exact up to 2^53).
pub const EXACT_MAX_N: usize = 50;

/// Result of a one-sided signed-rank test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignedRank {
    /// Differences that entered the test (non-zero).
    pub n: usize,
    /// Sum of the ranks of the positive differences.
    pub w_plus: f64,
    /// One-sided p-value: `P(W+ >= observed)` under the null for [`Alternative::Greater`],
    /// `P(W+ <= observed)` for [`Alternative::Less`].
    pub p_value: f64,
}

/// One-sided signed-rank test of `differences` (finite) against zero. With no non-zero
/// difference, the p-value is 1.
pub fn signed_rank(differences: &[f64], alt: Alternative) -> SignedRank {
    let mut d: Vec<f64> = differences.iter().copied().filter(|x| *x != 0.0).collect();
    d.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    let n = d.len();
    if n == 0 {
        return SignedRank {
            n,
            w_plus: 0.0,
            p_value: 1.0,
        };
    }
    // Doubled mid-ranks: ranks i+1 ..= j share (i + 1 + j), an integer.
    let mut doubled = vec![0u64; n];
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && d[j].abs() == d[i].abs() {
            j += 1;
        }
        let t = (j - i) as f64;
        tie_term += t * t * t - t;
        for r in &mut doubled[i..j] {
            *r = (i + 1 + j) as u64;
        }
        i = j;
    }
    let w2: u64 = d
        .iter()
        .zip(&doubled)
        .filter(|(x, _)| **x > 0.0)
        .map(|(_, r)| *r)
        .sum();
    let w_plus = w2 as f64 / 2.0;
    let p_value = if n <= EXACT_MAX_N {
        exact_p(&doubled, w2, alt)
    } else {
        normal_p(n, w_plus, tie_term, alt)
    };
    SignedRank { n, w_plus, p_value }
}

/// `P(W+ >= w2)` (Greater) or `P(W+ <= w2)` (Less) over the doubled ranks, by counting the
/// sign patterns.
fn exact_p(doubled: &[u64], w2: u64, alt: Alternative) -> f64 {
    let total: u64 = doubled.iter().sum();
    let mut counts = vec![0f64; total as usize + 1];
    counts[0] = 1.0;
    let mut reach = 0usize;
    for &r in doubled {
        let r = r as usize;
        for s in (0..=reach).rev() {
            if counts[s] != 0.0 {
                counts[s + r] += counts[s];
            }
        }
        reach += r;
    }
    let all = 2f64.powi(doubled.len() as i32);
    let w = w2 as usize;
    let tail: f64 = match alt {
        Alternative::Greater => counts[w..].iter().sum(),
        Alternative::Less => counts[..=w].iter().sum(),
    };
    (tail / all).min(1.0)
}

fn normal_p(n: usize, w_plus: f64, tie_term: f64, alt: Alternative) -> f64 {
    let n = n as f64;
    let mean = n * (n + 1.0) / 4.0;
    let var = n * (n + 1.0) * (2.0 * n + 1.0) / 24.0 - tie_term / 48.0;
    if var <= 0.0 {
        return 1.0;
    }
    let z = match alt {
        Alternative::Greater => (w_plus - mean - 0.5) / var.sqrt(),
        Alternative::Less => (mean - w_plus - 0.5) / var.sqrt(),
    };
    upper_normal_tail(z)
}

/// `P(Z > z)` for a standard normal `Z`, by bisection on [`normal_quantile`] (the quantile
/// function the gate already uses), to about 1e-12.
fn upper_normal_tail(z: f64) -> f64 {
    if z > 38.0 {
        return 0.0;
    }
    if z < -38.0 {
        return 1.0;
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        // normal_quantile(1 - mid) falls as mid grows: find mid with quantile(1 - mid) = z.
        if normal_quantile(1.0 - mid) > z {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_positive_differences_give_the_smallest_p_value_of_their_count() {
        // Every sign + : only 1 of 2^n patterns reaches W+ = n(n+1)/2.
        for n in 1..=10 {
            let d: Vec<f64> = (1..=n).map(|i| i as f64 * 0.01).collect();
            let r = signed_rank(&d, Alternative::Greater);
            assert_eq!(r.p_value, 1.0 / 2f64.powi(n), "n = {n}");
            assert_eq!(r.w_plus, (n * (n + 1)) as f64 / 2.0);
            let r = signed_rank(&d, Alternative::Less);
            assert_eq!(r.p_value, 1.0);
        }
    }

    #[test]
    fn exact_p_values_match_hand_counted_ones() {
        // n = 4, ranks 1..4, W+ = 2 + 4 = 6 (signs - + - +). Patterns with W+ >= 6: subsets of
        // {1,2,3,4} summing to >= 6: {2,4},{1,2,4}... count: sums 6:{2,4},{1,2,3}; 7:{3,4},{1,2,4};
        // 8:{1,3,4}; 9:{2,3,4}; 10:{1,2,3,4} -> 7 of 16.
        let r = signed_rank(&[-0.1, 0.2, -0.3, 0.4], Alternative::Greater);
        assert_eq!(r.w_plus, 6.0);
        assert_eq!(r.p_value, 7.0 / 16.0);
        // W+ <= 6: 16 - (patterns with W+ >= 7 = 5) = 11 of 16.
        let r = signed_rank(&[-0.1, 0.2, -0.3, 0.4], Alternative::Less);
        assert_eq!(r.p_value, 11.0 / 16.0);
    }

    #[test]
    fn ties_share_mid_ranks_and_zeros_are_dropped() {
        // |d| = 1, 1, 2 -> ranks 1.5, 1.5, 3; zeros dropped.
        let r = signed_rank(&[0.0, 1.0, -1.0, 2.0, 0.0], Alternative::Greater);
        assert_eq!(r.n, 3);
        assert_eq!(r.w_plus, 4.5);
        // Doubled ranks 3, 3, 6: W+ (doubled) >= 9 is {3,6} twice and {3,3,6}: 3 of 8.
        assert_eq!(r.p_value, 3.0 / 8.0);
        assert_eq!(signed_rank(&[0.0, 0.0], Alternative::Greater).p_value, 1.0);
    }

    #[test]
    fn the_normal_approximation_agrees_with_the_exact_count_where_both_apply() {
        let d: Vec<f64> = (0..EXACT_MAX_N)
            .map(|i| ((i * 37) % 23) as f64 - 9.5 + 0.01 * i as f64)
            .collect();
        let r = signed_rank(&d, Alternative::Greater);
        let approx = normal_p(r.n, r.w_plus, 0.0, Alternative::Greater);
        assert!((r.p_value - approx).abs() < 0.01, "{} {approx}", r.p_value);
        assert!((upper_normal_tail(1.959964) - 0.025).abs() < 1e-6);
        assert!((upper_normal_tail(0.0) - 0.5).abs() < 1e-9);
    }
}
