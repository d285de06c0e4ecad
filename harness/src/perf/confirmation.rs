//! The confirmation of a flagged case: a case whose rounds pointed to a REGRESSION or an
//! IMPROVEMENT (held to the family, `perf::family`) is timed again in as many fresh rounds,
//! and keeps the verdict only when the change repeats there: those rounds alone move the same
//! way beyond the threshold (their geometric mean ratio), with their signed-rank p-value in
//! that direction below [`CONFIRMATION_ALPHA`].
//!
//! An unchanged build is then flagged only when two independent sets of rounds both fall in
//! the tail: at most the family's level times [`CONFIRMATION_ALPHA`] a night. A real change
//! repeats; the confirmation asks less of it than the first rounds did (no interval bound,
//! a wider level), so that it costs little of their power. It is judged alone, never pooled
//! with the rounds that flagged the case: those were chosen for being extreme, so pooling
//! would carry their luck into the confirmation.

use super::compare::{GateConfig, SampleComparison, Verdict};

/// One-sided signed-rank level of the confirmation rounds: the first rounds' level (seven
/// rounds all one way reach it), without their interval bound.
pub const CONFIRMATION_ALPHA: f64 = 0.01;

/// Whether the confirmation rounds (`second`) repeat `verdict`: their ratio beyond the
/// threshold the same way, and their p-value that way below [`CONFIRMATION_ALPHA`].
pub fn repeats(verdict: Verdict, second: &SampleComparison, cfg: &GateConfig) -> bool {
    let (Some(ratio), Some(slower), Some(faster)) =
        (second.ratio, second.p_slower, second.p_faster)
    else {
        return false;
    };
    match verdict {
        Verdict::Regression => ratio > 1.0 + cfg.threshold && slower < CONFIRMATION_ALPHA,
        Verdict::Improvement => ratio < 1.0 - cfg.threshold && faster < CONFIRMATION_ALPHA,
        _ => false,
    }
}

/// The verdict of a case flagged by its rounds (`first`, a REGRESSION or an IMPROVEMENT)
/// given the confirmation rounds' own judgement (`second`, by `perf::rounds::judge_rounds`):
/// the first rounds' figures, the verdict when the change [`repeats`], INCONCLUSIVE with the
/// reason otherwise; the confirmation's ratios are recorded in the rounds' summary.
pub fn confirm(
    first: SampleComparison,
    second: &SampleComparison,
    cfg: &GateConfig,
) -> SampleComparison {
    let mut out = first;
    if let (Some(r), Some(s)) = (out.rounds.as_mut(), second.rounds.as_ref()) {
        r.confirmation = s.ratios.clone();
    }
    let too_few = second.rounds.as_ref().is_none_or(|s| s.too_few());
    out.reason = if too_few {
        let reason = super::verdict_text::too_few_to_confirm(out.verdict, &out.reason, second);
        out.verdict = Verdict::Inconclusive;
        reason
    } else if repeats(out.verdict, second, cfg) {
        super::verdict_text::confirmed(&out.reason, second)
    } else {
        let reason = super::verdict_text::not_confirmed(&out, second);
        out.verdict = Verdict::Inconclusive;
        reason
    };
    out
}

/// The verdicts of a comparison of many cases, as `conform run --against` gives them: the
/// cases' own judgements (`judged`, by `perf::rounds::judge_rounds`) held to the family
/// (`perf::family::hold_to_family`), then every case still flagged re-timed by `retime`
/// (given the flagged indices into `judged`, it returns their confirmation rounds' judgements
/// in the same order) and confirmed. `retime` is not called when nothing is flagged.
pub fn judge_and_confirm(
    mut judged: Vec<SampleComparison>,
    cfg: &GateConfig,
    retime: impl FnOnce(&[usize]) -> Vec<SampleComparison>,
) -> Vec<SampleComparison> {
    super::family::hold_to_family(&mut judged, cfg);
    let flagged: Vec<usize> = (0..judged.len())
        .filter(|&k| {
            matches!(
                judged[k].verdict,
                Verdict::Regression | Verdict::Improvement
            )
        })
        .collect();
    if flagged.is_empty() {
        return judged;
    }
    let seconds = retime(&flagged);
    for (&k, second) in flagged.iter().zip(&seconds) {
        judged[k] = confirm(judged[k].clone(), second, cfg);
    }
    judged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::family::tests::{case, cfg, QUIET, SLOW};

    #[test]
    fn a_change_that_repeats_keeps_its_verdict_and_the_first_rounds_figures() {
        let first = case(&SLOW);
        let out = confirm(first.clone(), &case(&SLOW), &cfg());
        assert_eq!(out.verdict, Verdict::Regression);
        assert_eq!((out.ratio, out.ci_low), (first.ratio, first.ci_low));
        assert!(
            out.reason.contains("confirmed by 14 fresh rounds"),
            "{}",
            out.reason
        );
        assert_eq!(out.rounds.unwrap().confirmation.len(), 14);
    }

    #[test]
    fn a_change_that_does_not_repeat_is_inconclusive_never_unchanged() {
        let out = confirm(case(&SLOW), &case(&QUIET), &cfg());
        assert_eq!(out.verdict, Verdict::Inconclusive);
        assert!(
            out.reason
                .starts_with("not confirmed: the first 14 rounds point to a REGRESSION"),
            "{}",
            out.reason
        );
        assert!(
            out.reason
                .contains("14 fresh rounds of the case do not (UNCHANGED"),
            "{}",
            out.reason
        );
        // An improvement whose confirmation points the other way is not confirmed either.
        let faster: Vec<f64> = SLOW.iter().map(|x| 1.0 / x).collect();
        let out = confirm(case(&faster), &case(&SLOW), &cfg());
        assert_eq!(out.verdict, Verdict::Inconclusive, "{}", out.reason);
    }

    #[test]
    fn the_confirmation_asks_for_the_same_way_beyond_the_threshold_not_a_second_verdict() {
        // Ten of fourteen rounds slower, 6% on average: no REGRESSION of its own (its lower
        // bound is below 1.03), but the change repeats.
        let modest = [
            1.2, 1.15, 1.12, 1.1, 1.08, 1.07, 1.06, 1.05, 1.04, 1.02, 0.99, 0.98, 0.97, 0.96,
        ];
        let second = case(&modest);
        assert_ne!(second.verdict, Verdict::Regression, "{}", second.reason);
        assert!(repeats(Verdict::Regression, &second, &cfg()));
        assert!(!repeats(Verdict::Improvement, &second, &cfg()));
        assert_eq!(
            confirm(case(&SLOW), &second, &cfg()).verdict,
            Verdict::Regression
        );
        // Slower, but within the threshold: not a repeat of a change beyond it.
        let within: Vec<f64> = QUIET.iter().map(|x| x * 1.02).collect();
        assert!(!repeats(Verdict::Regression, &case(&within), &cfg()));
    }

    #[test]
    fn a_confirmation_that_lost_its_rounds_says_too_few() {
        let out = confirm(case(&SLOW), &case(&[1.3, 1.3]), &cfg());
        assert_eq!(out.verdict, Verdict::Inconclusive);
        assert!(
            out.reason
                .starts_with("too few rounds to confirm the first rounds' REGRESSION"),
            "{}",
            out.reason
        );
    }
}
