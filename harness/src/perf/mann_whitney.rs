//! Mann-Whitney U (Wilcoxon rank-sum) test, one-sided, candidate against baseline.
//!
//! `U` counts the (baseline, candidate) pairs where the candidate is larger, ties counting
//! one half. Without ties and with at most [`EXACT_MAX_TOTAL`] samples in all, the p-value is
//! exact: the null distribution of `U` is read off the coefficients of the Gaussian binomial
//! `[n + m choose n]_q`, computed in exact integers. Otherwise it is the normal approximation
//! with the tie-corrected variance and a continuity correction of 1/2.

/// Largest `n + m` for which the exact distribution is used (the counts then fit an `i128`).
pub const EXACT_MAX_TOTAL: usize = 100;

/// Which way the alternative points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alternative {
    /// The candidate tends to be larger (slower) than the baseline.
    Greater,
    /// The candidate tends to be smaller (faster).
    Less,
}

/// How a p-value was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PValueMethod {
    Exact,
    NormalApproximation,
}

/// Result of a one-sided Mann-Whitney test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// `U` of the candidate: pairs with candidate > baseline, ties counted 1/2.
    pub u: f64,
    /// One-sided p-value for the requested alternative.
    pub p_value: f64,
    pub method: PValueMethod,
}

/// One-sided Mann-Whitney test of `candidate` against `baseline`. `None` if either is empty.
pub fn mann_whitney(baseline: &[f64], candidate: &[f64], alt: Alternative) -> Option<MannWhitney> {
    let (n, m) = (baseline.len(), candidate.len());
    if n == 0 || m == 0 {
        return None;
    }
    // Pool, sort, assign mid-ranks to tie groups.
    let mut pooled: Vec<(f64, bool)> = baseline
        .iter()
        .map(|&x| (x, false))
        .chain(candidate.iter().map(|&x| (x, true)))
        .collect();
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = pooled.len();
    let mut rank_sum_candidate = 0.0;
    let mut tie_term = 0.0; // sum of t^3 - t over tie groups
    let mut has_ties = false;
    let mut i = 0;
    while i < total {
        let mut j = i + 1;
        while j < total && pooled[j].0 == pooled[i].0 {
            j += 1;
        }
        let t = (j - i) as f64;
        if j - i > 1 {
            has_ties = true;
            tie_term += t * t * t - t;
        }
        // ranks i+1 ..= j, mid-rank:
        let mid_rank = (i + 1 + j) as f64 / 2.0;
        for item in &pooled[i..j] {
            if item.1 {
                rank_sum_candidate += mid_rank;
            }
        }
        i = j;
    }
    let u = rank_sum_candidate - (m * (m + 1)) as f64 / 2.0;
    let (p_value, method) = if !has_ties && total <= EXACT_MAX_TOTAL {
        (exact_p(n, m, u, alt), PValueMethod::Exact)
    } else {
        (
            normal_p(n, m, u, tie_term, alt),
            PValueMethod::NormalApproximation,
        )
    };
    Some(MannWhitney { u, p_value, method })
}

/// Exact one-sided p from the null distribution of U (no ties, so `u` is an integer).
fn exact_p(n: usize, m: usize, u: f64, alt: Alternative) -> f64 {
    let counts = u_null_counts(n, m);
    let total: i128 = counts.iter().sum();
    let u = u.round() as usize;
    let tail: i128 = match alt {
        Alternative::Greater => counts[u..].iter().sum(),
        Alternative::Less => counts[..=u].iter().sum(),
    };
    tail as f64 / total as f64
}

/// Number of arrangements giving each `U = 0 ..= n m` under the null hypothesis: the
/// coefficients of `prod_{i=1..n} (1 - q^(m+i)) / (1 - q^i)`. After each step the polynomial
/// is the Gaussian binomial `[m + i choose i]_q`, so every intermediate value is an integer
/// no larger than `2 C(n + m, n)`.
pub fn u_null_counts(n: usize, m: usize) -> Vec<i128> {
    let mut poly = vec![0i128; n * m + 1];
    poly[0] = 1;
    let mut degree = 0;
    for i in 1..=n {
        // multiply by (1 - q^(m+i)), descending so each term reads the old value
        let shift = m + i;
        // terms above n m are dropped: they never flow back into lower ones
        for j in (shift..=(degree + shift).min(n * m)).rev() {
            poly[j] -= poly[j - shift];
        }
        // divide by (1 - q^i): multiply by 1 + q^i + q^2i + ..., ascending
        for j in i..poly.len() {
            poly[j] += poly[j - i];
        }
        degree += m;
        debug_assert!(poly[degree + 1..].iter().all(|&c| c == 0));
    }
    poly
}

/// Normal approximation with tie correction and continuity correction.
fn normal_p(n: usize, m: usize, u: f64, tie_term: f64, alt: Alternative) -> f64 {
    let (nf, mf) = (n as f64, m as f64);
    let big_n = nf + mf;
    let mean = nf * mf / 2.0;
    let var = nf * mf / 12.0 * ((big_n + 1.0) - tie_term / (big_n * (big_n - 1.0)));
    if var <= 0.0 {
        return 1.0; // every sample equal: no evidence either way
    }
    let sd = var.sqrt();
    let z = match alt {
        Alternative::Greater => (u - mean - 0.5) / sd,
        Alternative::Less => (mean - u - 0.5) / sd,
    };
    upper_normal_tail(z)
}

/// `P(Z > z)` for a standard normal `Z`.
pub fn upper_normal_tail(z: f64) -> f64 {
    0.5 * libm::erfc(z / std::f64::consts::SQRT_2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_counts_are_the_gaussian_binomial() {
        // [4 choose 2]_q = 1 + q + 2q^2 + q^3 + q^4
        assert_eq!(u_null_counts(2, 2), vec![1, 1, 2, 1, 1]);
        // [5 choose 2]_q = 1 + q + 2q^2 + 2q^3 + 2q^4 + q^5 + q^6
        assert_eq!(u_null_counts(2, 3), vec![1, 1, 2, 2, 2, 1, 1]);
        assert_eq!(u_null_counts(3, 2), vec![1, 1, 2, 2, 2, 1, 1]);
        // total is C(n + m, n); symmetric
        let c = u_null_counts(30, 30);
        assert_eq!(c.iter().sum::<i128>(), 118_264_581_564_861_424);
        assert!(c.iter().zip(c.iter().rev()).all(|(a, b)| a == b));
        let big = u_null_counts(50, 50);
        assert_eq!(
            big.iter().sum::<i128>(),
            100_891_344_545_564_193_334_812_497_256
        );
    }

    #[test]
    fn exact_p_values_match_hand_enumeration() {
        // baseline {1, 2, 3}, candidate {4, 5, 6}: U = 9, the single most extreme of C(6,3) = 20
        let r = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], Alternative::Greater).unwrap();
        assert_eq!(r.u, 9.0);
        assert_eq!(r.method, PValueMethod::Exact);
        approx::assert_abs_diff_eq!(r.p_value, 1.0 / 20.0, epsilon = 1e-15);
        let r = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], Alternative::Less).unwrap();
        approx::assert_abs_diff_eq!(r.p_value, 1.0, epsilon = 1e-15);
        // baseline {1, 3, 5}, candidate {2, 4, 6}: U = 1 + 2 + 3 = 6;
        // [6 choose 3]_q = 1,1,2,3,3,3,3,2,1,1 -> P(U >= 6) = (3+2+1+1)/20
        let r = mann_whitney(&[1.0, 3.0, 5.0], &[2.0, 4.0, 6.0], Alternative::Greater).unwrap();
        assert_eq!(r.u, 6.0);
        approx::assert_abs_diff_eq!(r.p_value, 7.0 / 20.0, epsilon = 1e-15);
        assert!(mann_whitney(&[], &[1.0], Alternative::Greater).is_none());
    }

    #[test]
    fn ties_use_the_corrected_normal_approximation() {
        // baseline {1, 2, 2}, candidate {2, 3, 4}: pooled ranks 1, (2,3,4)->3, 5, 6
        // candidate rank sum 3 + 5 + 6 = 14 -> U = 14 - 6 = 8
        let r = mann_whitney(&[1.0, 2.0, 2.0], &[2.0, 3.0, 4.0], Alternative::Greater).unwrap();
        assert_eq!(r.u, 8.0);
        assert_eq!(r.method, PValueMethod::NormalApproximation);
        // var = 9/12 * (7 - (27 - 3) / 30) = 0.75 * 6.2 = 4.65; z = (8 - 4.5 - 0.5) / sqrt(4.65)
        let z = 3.0 / 4.65f64.sqrt();
        let expected = 0.5 * libm::erfc(z / 2f64.sqrt());
        approx::assert_abs_diff_eq!(r.p_value, expected, epsilon = 1e-15);
        approx::assert_abs_diff_eq!(expected, 0.0820, epsilon = 1e-3);
        // all equal: no evidence
        let r = mann_whitney(&[5.0; 4], &[5.0; 4], Alternative::Greater).unwrap();
        assert_eq!(r.p_value, 1.0);
    }

    #[test]
    fn normal_tail_matches_tabulated_values() {
        approx::assert_abs_diff_eq!(upper_normal_tail(0.0), 0.5, epsilon = 1e-16);
        approx::assert_abs_diff_eq!(
            upper_normal_tail(1.959_963_984_540_054),
            0.025,
            epsilon = 1e-12
        );
        approx::assert_abs_diff_eq!(
            upper_normal_tail(2.326_347_874_040_841),
            0.01,
            epsilon = 1e-12
        );
    }

    #[test]
    fn exact_and_normal_match_scipy_at_moderate_sizes() {
        // 20 vs 20 with a shift of 6.5: U = 309. Reference values from
        // scipy.stats.mannwhitneyu(c, b, alternative="greater", method="exact" / "asymptotic").
        let b: Vec<f64> = (0..20).map(f64::from).collect();
        let c: Vec<f64> = (0..20).map(|i| f64::from(i) + 6.5).collect();
        let r = mann_whitney(&b, &c, Alternative::Greater).unwrap();
        assert_eq!(r.method, PValueMethod::Exact);
        assert_eq!(r.u, 309.0);
        approx::assert_abs_diff_eq!(r.p_value, 0.001_321_315_295_779_676_1, epsilon = 1e-15);
        let approx = normal_p(20, 20, r.u, 0.0, Alternative::Greater);
        approx::assert_abs_diff_eq!(approx, 0.001_668_089_652_378_202_4, epsilon = 1e-15);
    }
}
