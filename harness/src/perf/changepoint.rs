//! Change points in a performance series: E-divisive means (Matteson and James, "A
//! nonparametric approach for multiple change point analysis of multivariate data", JASA
//! 2014), the method behind MongoDB's and DataStax Hunter's performance CI, with a permutation
//! test for significance.
//!
//! The series is one value per night (the fenced mean of that night's samples). For a segment
//! `x[0..n)` and a split `t`, with `L = x[0..t)` and `R = x[t..n)`, the divergence is
//!
//! ```text
//! Q(t) = t (n - t) / n * ( 2 mean|l - r| - mean_{pairs in L}|l - l'| - mean_{pairs in R}|r - r'| )
//! ```
//!
//! (the energy distance with exponent 1, scaled by the sizes). The best split of a segment is
//! the `t` with the largest `Q`; it is accepted when a permutation test says so: the segment's
//! values are shuffled `permutations` times, and the p-value is the share of shuffles whose
//! best `Q` reaches the observed one (counting the observation itself). Accepted splits divide
//! their segment and the search continues in the parts (the part with the largest divergence
//! first) until no split is significant. The shuffles come from a stream keyed by the series,
//! so the same series always gives the same change points.
//!
//! Cost: every `Q(t)` of a segment of `n` values in `O(n^2)` (running sums of distances), so a
//! year of nights (n = 365) with 199 shuffles is about 27 M distance evaluations per test.

use super::case_rng::CaseRng;

/// Settings of the detection. [`ChangePointConfig::default`] is what the gate uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangePointConfig {
    /// Shuffles per permutation test (the smallest p-value is `1 / (permutations + 1)`).
    pub permutations: usize,
    /// A split is accepted when its p-value is at most this.
    pub alpha: f64,
    /// Fewest values on each side of a split.
    pub min_segment: usize,
}

impl Default for ChangePointConfig {
    fn default() -> Self {
        ChangePointConfig {
            permutations: 199,
            alpha: 0.01,
            min_segment: 2,
        }
    }
}

/// One accepted change: the values from `index` on differ from those before it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangePoint {
    /// Index of the first value after the change.
    pub index: usize,
    /// The permutation p-value of the split when it was accepted.
    pub p_value: f64,
    /// Mean of the segment just before the change (between the neighbouring change points).
    pub mean_before: f64,
    /// Mean of the segment from the change on.
    pub mean_after: f64,
}

impl ChangePoint {
    /// `mean_after / mean_before` (above 1: slower after the change, for times).
    pub fn ratio(&self) -> f64 {
        self.mean_after / self.mean_before
    }
}

/// The best split of `x` (index of the first value after it) and its divergence, or None when
/// `x` is too short to have `min_segment` values on each side.
pub fn best_split(x: &[f64], min_segment: usize) -> Option<(usize, f64)> {
    let n = x.len();
    let m = min_segment.max(1);
    if n < 2 * m {
        return None;
    }
    // left[t] = sum_{i<t} |x_i - x_t|, right[t] = sum_{j>t} |x_t - x_j|.
    let mut left = vec![0.0f64; n];
    let mut right = vec![0.0f64; n];
    for t in 0..n {
        for i in 0..t {
            let d = (x[i] - x[t]).abs();
            left[t] += d;
            right[i] += d;
        }
    }
    // At split t: within-left W_L, within-right W_R, between B.
    let mut w_l = 0.0f64;
    let mut w_r: f64 = right.iter().sum();
    let mut b = 0.0f64;
    let mut best: Option<(usize, f64)> = None;
    for t in 1..n {
        // Move x[t-1] from R to L.
        let v = t - 1;
        w_r -= right[v];
        b += right[v] - left[v];
        w_l += left[v];
        if t < m || n - t < m {
            continue;
        }
        let (nl, nr) = (t as f64, (n - t) as f64);
        let within_l = if t > 1 {
            w_l / (nl * (nl - 1.0) / 2.0)
        } else {
            0.0
        };
        let within_r = if n - t > 1 {
            w_r / (nr * (nr - 1.0) / 2.0)
        } else {
            0.0
        };
        let e = 2.0 * b / (nl * nr) - within_l - within_r;
        let q = nl * nr / n as f64 * e;
        if best.is_none_or(|(_, bq)| q > bq) {
            best = Some((t, q));
        }
    }
    best
}

/// The permutation p-value of the best split of `x` whose divergence is `observed`.
fn permutation_p(x: &[f64], observed: f64, cfg: &ChangePointConfig, rng: &mut CaseRng) -> f64 {
    let mut shuffled = x.to_vec();
    let mut reached = 0usize;
    for _ in 0..cfg.permutations {
        // Fisher-Yates.
        for i in (1..shuffled.len()).rev() {
            let j = rng.below(i as u32 + 1) as usize;
            shuffled.swap(i, j);
        }
        if let Some((_, q)) = best_split(&shuffled, cfg.min_segment) {
            // A relative tolerance: ties of the statistic count as reaching it.
            if q >= observed * (1.0 - 1e-12) {
                reached += 1;
            }
        }
    }
    (reached + 1) as f64 / (cfg.permutations + 1) as f64
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Every significant change point of `series`, in index order. `key` names the series (the
/// permutations are drawn from a stream keyed by it). The values must be finite.
pub fn e_divisive(series: &[f64], key: &str, cfg: &ChangePointConfig) -> Vec<ChangePoint> {
    assert!(
        series.iter().all(|v| v.is_finite()),
        "change-point series must be finite"
    );
    let mut rng = CaseRng::for_key(&format!("e-divisive\u{0}{key}"));
    // Accepted boundaries (indices where a segment starts), 0 and n included.
    let mut bounds = vec![0, series.len()];
    let mut p_values: Vec<(usize, f64)> = Vec::new();
    // Segments already tested without a significant split.
    let mut settled: Vec<(usize, usize)> = Vec::new();
    loop {
        // The candidate split of largest divergence over the unsettled segments.
        let mut best: Option<(usize, usize, usize, f64)> = None;
        for w in bounds.windows(2) {
            let (s, e) = (w[0], w[1]);
            if settled.contains(&(s, e)) {
                continue;
            }
            match best_split(&series[s..e], cfg.min_segment) {
                Some((t, q)) if best.is_none_or(|b| q > b.3) => best = Some((s, e, s + t, q)),
                Some(_) => {}
                None => settled.push((s, e)),
            }
        }
        let Some((s, e, at, q)) = best else { break };
        let p = permutation_p(&series[s..e], q, cfg, &mut rng);
        if p <= cfg.alpha {
            let pos = bounds.partition_point(|&b| b < at);
            bounds.insert(pos, at);
            p_values.push((at, p));
        } else {
            settled.push((s, e));
        }
    }
    bounds
        .windows(3)
        .map(|w| ChangePoint {
            index: w[1],
            p_value: p_values
                .iter()
                .find(|(i, _)| *i == w[1])
                .map_or(1.0, |&(_, p)| p),
            mean_before: mean(&series[w[0]..w[1]]),
            mean_after: mean(&series[w[1]..w[2]]),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noisy(n: usize, level: f64, key: &str) -> Vec<f64> {
        let mut r = CaseRng::for_key(key);
        (0..n)
            .map(|_| level * (1.0 + 0.01 * (2.0 * r.unit() - 1.0)))
            .collect()
    }

    /// The divergence straight from its definition (for checking the running sums).
    fn q_direct(x: &[f64], t: usize) -> f64 {
        let (l, r) = x.split_at(t);
        let pairs = |v: &[f64]| {
            let mut s = 0.0;
            for i in 0..v.len() {
                for j in i + 1..v.len() {
                    s += (v[i] - v[j]).abs();
                }
            }
            if v.len() > 1 {
                s / (v.len() * (v.len() - 1) / 2) as f64
            } else {
                0.0
            }
        };
        let mut between = 0.0;
        for a in l {
            for b in r {
                between += (a - b).abs();
            }
        }
        let (nl, nr) = (l.len() as f64, r.len() as f64);
        nl * nr / x.len() as f64 * (2.0 * between / (nl * nr) - pairs(l) - pairs(r))
    }

    #[test]
    fn running_sums_equal_the_definition() {
        let x = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0];
        for m in 1..4 {
            let (t, q) = best_split(&x, m).unwrap();
            let want = (m..=x.len() - m)
                .map(|t| (t, q_direct(&x, t)))
                .fold((0, f64::MIN), |a, b| if b.1 > a.1 { b } else { a });
            assert_eq!(t, want.0, "min_segment {m}");
            approx::assert_abs_diff_eq!(q, want.1, epsilon = 1e-9 * want.1.abs().max(1.0));
        }
    }

    #[test]
    fn finds_each_step_and_only_them() {
        let mut x = noisy(30, 100.0, "a");
        x.extend(noisy(30, 110.0, "b"));
        x.extend(noisy(30, 95.0, "c"));
        let cps = e_divisive(&x, "s", &ChangePointConfig::default());
        let at: Vec<usize> = cps.iter().map(|c| c.index).collect();
        assert_eq!(at, vec![30, 60], "{cps:?}");
        approx::assert_abs_diff_eq!(cps[0].ratio(), 1.1, epsilon = 0.01);
        assert!(cps.iter().all(|c| c.p_value <= 0.01));
    }

    #[test]
    fn steady_series_raise_change_points_at_about_the_significance_level() {
        // Each permutation test is at level `alpha` = 1%, so about 1% of steady series show a
        // (false) change point: one series without any is a matter of luck, not a property.
        // The property: over 300 steady series, the share with a change point is not
        // significantly (3 standard errors) above alpha.
        let cfg = ChangePointConfig::default();
        let n = 300;
        let flagged = (0..n)
            .filter(|k| {
                let x = noisy(60, 100.0, &format!("steady{k}"));
                !e_divisive(&x, &format!("s{k}"), &cfg).is_empty()
            })
            .count();
        let se = (cfg.alpha * (1.0 - cfg.alpha) / n as f64).sqrt();
        let rate = flagged as f64 / n as f64;
        crate::outln!("{flagged} of {n} steady series show a change point");
        assert!(
            rate <= cfg.alpha + 3.0 * se,
            "{flagged} of {n} steady series show a change point"
        );
    }

    #[test]
    fn same_series_same_answer_and_short_series_none() {
        let mut x = noisy(20, 1.0, "x");
        x.extend(noisy(20, 1.2, "y"));
        let cfg = ChangePointConfig::default();
        assert_eq!(e_divisive(&x, "k", &cfg), e_divisive(&x, "k", &cfg));
        assert!(e_divisive(&[1.0, 2.0, 3.0], "k", &cfg).is_empty());
        assert!(e_divisive(&[], "k", &cfg).is_empty());
    }
}
