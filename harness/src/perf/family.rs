//! Many cases, one comparison: the verdicts of an A/B comparison in rounds held to the whole
//! family of cases it judged.
//!
//! Each case's rounds are judged alone at the signed-rank level (`perf::rounds`). A night of
//! 28 cases tests 28 hypotheses, so at a level of 1% a case, an unchanged build has a fair
//! chance of one case below it on a noisy runner (measured on a CI runner: three false
//! REGRESSION rows in thirteen nights of 28 cases, each with p near 1e-3). The level is
//! therefore held against the Holm-adjusted p-value over the cases that were judged, in
//! each direction: the family-wise chance of any false verdict stays below the level.

use super::compare::{GateConfig, SampleComparison, Verdict};

/// Holm's step-down adjusted p-values of `p`, in the order given; `None` (a case without a
/// p-value: too few rounds) stays `None` and does not count in the family.
pub fn holm_adjusted(p: &[Option<f64>]) -> Vec<Option<f64>> {
    let mut order: Vec<usize> = (0..p.len()).filter(|&i| p[i].is_some()).collect();
    order.sort_by(|&a, &b| p[a].unwrap_or(1.0).total_cmp(&p[b].unwrap_or(1.0)));
    let m = order.len();
    let mut out = vec![None; p.len()];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        let scaled = ((m - rank) as f64 * p[i].unwrap_or(1.0)).min(1.0);
        running = running.max(scaled);
        out[i] = Some(running);
    }
    out
}

/// Holds the verdicts of `cases` (each judged alone by `perf::rounds::judge_rounds`) to the
/// family: a REGRESSION (IMPROVEMENT) stays one only when its Holm-adjusted p-value of
/// "slower" ("faster") over the judged cases is below `cfg.rank_alpha`; otherwise the case is
/// INCONCLUSIVE with the reason. The adjusted p-value is recorded in the rounds' summary.
pub fn hold_to_family(cases: &mut [SampleComparison], cfg: &GateConfig) {
    let judged = |c: &SampleComparison| c.rounds.as_ref().is_some_and(|r| !r.too_few());
    let slower: Vec<Option<f64>> = cases
        .iter()
        .map(|c| if judged(c) { c.p_slower } else { None })
        .collect();
    let faster: Vec<Option<f64>> = cases
        .iter()
        .map(|c| if judged(c) { c.p_faster } else { None })
        .collect();
    let family = slower.iter().filter(|p| p.is_some()).count();
    let (slower, faster) = (holm_adjusted(&slower), holm_adjusted(&faster));
    for (i, c) in cases.iter_mut().enumerate() {
        let adjusted = match c.verdict {
            Verdict::Regression => slower[i],
            Verdict::Improvement => faster[i],
            _ => continue,
        };
        let Some(adjusted) = adjusted else { continue };
        if let Some(r) = c.rounds.as_mut() {
            r.p_family = Some(adjusted);
        }
        if adjusted >= cfg.rank_alpha {
            c.reason = super::verdict_text::not_significant_over_family(
                c.verdict, adjusted, family, cfg, &c.reason,
            );
            c.verdict = Verdict::Inconclusive;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::perf::rounds::{judge_rounds, Round, DEFAULT_ROUNDS_RANK_ALPHA};

    /// A case of 14 rounds whose candidate is `ratios[i]` times the baseline in round `i`.
    pub(crate) fn case(ratios: &[f64]) -> SampleComparison {
        let rounds: Vec<Round> = ratios
            .iter()
            .map(|&x| Round {
                baseline: vec![99.0, 100.0, 100.0, 101.0],
                candidate: vec![99.0 * x, 100.0 * x, 100.0 * x, 101.0 * x],
            })
            .collect();
        judge_rounds(&rounds, ratios.len() as u32, Vec::new(), &cfg())
    }

    pub(crate) fn cfg() -> GateConfig {
        GateConfig {
            rank_alpha: DEFAULT_ROUNDS_RANK_ALPHA,
            ci_alpha: 0.01,
            ..GateConfig::default()
        }
    }

    /// Fourteen noisy rounds, twelve of them slower, about 13% on average: p near 1e-3.
    const LUCKY: [f64; 14] = [
        1.35, 1.3, 1.27, 1.25, 1.22, 1.2, 1.18, 1.15, 1.12, 1.1, 1.08, 1.06, 0.93, 0.9,
    ];

    /// Fourteen rounds all about 30% slower.
    pub(crate) const SLOW: [f64; 14] = [
        1.3, 1.28, 1.31, 1.29, 1.3, 1.32, 1.27, 1.3, 1.31, 1.29, 1.3, 1.28, 1.3, 1.33,
    ];
    /// Fourteen rounds of an unchanged build, within 2% either way.
    pub(crate) const QUIET: [f64; 14] = [
        1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.0, 1.01, 0.99, 1.0, 1.0,
    ];

    #[test]
    fn one_lucky_case_among_many_is_inconclusive_but_alone_it_is_a_regression() {
        let alone = case(&LUCKY);
        assert_eq!(alone.verdict, Verdict::Regression, "{}", alone.reason);
        let mut one = vec![alone.clone()];
        hold_to_family(&mut one, &cfg());
        assert_eq!(one[0].verdict, Verdict::Regression, "a family of one");
        let mut night: Vec<SampleComparison> = (0..27).map(|_| case(&QUIET)).collect();
        night.insert(5, alone);
        hold_to_family(&mut night, &cfg());
        let c = &night[5];
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert!(
            c.reason
                .starts_with("not significant over the 28 cases judged"),
            "{}",
            c.reason
        );
        let adjusted = c.rounds.as_ref().unwrap().p_family.unwrap();
        assert!(adjusted >= 0.01 && adjusted <= 28.0 * c.p_slower.unwrap() + 1e-12);
        assert!(night.iter().all(|c| c.verdict != Verdict::Regression));
    }

    #[test]
    fn a_slowdown_every_round_shows_survives_the_family() {
        let mut night: Vec<SampleComparison> = (0..27).map(|_| case(&QUIET)).collect();
        night.push(case(&SLOW));
        hold_to_family(&mut night, &cfg());
        assert_eq!(
            night[27].verdict,
            Verdict::Regression,
            "{}",
            night[27].reason
        );
        // All 14 rounds slower: p = 2^-14, times 28 cases.
        let adjusted = night[27].rounds.as_ref().unwrap().p_family.unwrap();
        assert!((adjusted - 28.0 / 16384.0).abs() < 1e-12, "{adjusted}");
    }

    #[test]
    fn cases_with_too_few_rounds_are_not_in_the_family() {
        let mut night = vec![case(&SLOW), case(&[1.0, 1.0, 1.0])];
        hold_to_family(&mut night, &cfg());
        assert_eq!(
            night[0].rounds.as_ref().unwrap().p_family,
            Some(1.0 / 16384.0)
        );
        assert!(night[1].reason.contains("too few rounds"));
    }

    #[test]
    fn holm_scales_the_smallest_by_the_family_and_never_decreases() {
        let p = [Some(0.01), None, Some(0.04), Some(0.03), Some(0.005)];
        let a = holm_adjusted(&p);
        // Sorted: 0.005 (x4), 0.01 (x3), 0.03 (x2), 0.04 (x1, held up to 0.06).
        assert_eq!(a[4], Some(0.02));
        assert_eq!(a[0], Some(0.03));
        assert_eq!(a[3], Some(0.06));
        assert_eq!(a[2], Some(0.06));
        assert_eq!(a[1], None);
        assert_eq!(
            holm_adjusted(&[Some(0.7), Some(0.6)]),
            vec![Some(1.0), Some(1.0)]
        );
        assert_eq!(holm_adjusted(&[Some(0.003)]), vec![Some(0.003)]);
    }
}
