//! The reasons the gate's comparisons give (`perf::compare`, `perf::rounds`): why a case got
//! its verdict, in the user's words. They live beside the comparisons that own these
//! outcomes, so the messages layer never has to reach back into `perf`.

use conform_metadata::compare::{GateConfig, RoundsSummary, SampleComparison, Verdict};

/// INCONCLUSIVE: the two records of a case were timed with other op parameters.
pub fn other_params(baseline: &str, candidate: &str) -> String {
    format!(
        "the op parameters differ (params_digest {} in the baseline, {} in the candidate): \
         another case under the same id, not compared",
        baseline.chars().take(12).collect::<String>(),
        candidate.chars().take(12).collect::<String>()
    )
}

fn lost_suffix(s: &RoundsSummary) -> String {
    if s.lost.is_empty() {
        String::new()
    } else {
        format!(" (lost: {})", s.lost.join("; "))
    }
}

/// INCONCLUSIVE for lack of rounds: how many completed and were kept, how many are needed.
pub fn too_few_rounds(s: &RoundsSummary) -> String {
    format!(
        "too few rounds: {} of {} completed, {} set aside as outliers; at least {} are needed \
         (the signed-rank test of fewer cannot reach its level){}",
        s.ratios.len(),
        s.planned,
        s.set_aside.len(),
        s.min_rounds,
        lost_suffix(s)
    )
}

/// Why a case judged on its rounds got its verdict: the interval, the test and how many
/// rounds agree.
pub fn rounds_reason(
    verdict: Verdict,
    s: &RoundsSummary,
    (lo, hi): (f64, f64),
    (p_slower, p_faster): (f64, f64),
    (slower, faster): (usize, usize),
    cfg: &GateConfig,
) -> String {
    let (up, down) = (1.0 + cfg.threshold, 1.0 - cfg.threshold);
    let kept = s.ratios.len() - s.set_aside.len();
    let what = match verdict {
        Verdict::Regression => format!(
            "lower bound {lo:.4} > {up:.4} and signed-rank p = {p_slower:.2e} < {}",
            cfg.rank_alpha
        ),
        Verdict::Improvement => format!(
            "upper bound {hi:.4} < {down:.4} and signed-rank p = {p_faster:.2e} < {}",
            cfg.rank_alpha
        ),
        Verdict::Inconclusive => format!(
            "the rounds disagree: {slower} of {kept} rounds slower, {faster} faster, interval \
             [{lo:.4}, {hi:.4}]: neither a change beyond the {:.1}% threshold nor its absence is \
             shown (a process placed unevenly in some rounds cannot be told from a change)",
            100.0 * cfg.threshold
        ),
        _ => format!(
            "no change beyond the {:.1}% threshold: interval [{lo:.4}, {hi:.4}], {slower} of \
             {kept} rounds slower",
            100.0 * cfg.threshold
        ),
    };
    let aside = if s.set_aside.is_empty() {
        String::new()
    } else {
        format!(
            "; {} round(s) set aside as outliers (processes placed unevenly)",
            s.set_aside.len()
        )
    };
    format!(
        "{what}; {kept} of {} rounds of {} samples a side{aside}{}",
        s.planned,
        s.samples_per_round,
        lost_suffix(s)
    )
}

fn direction(verdict: Verdict) -> &'static str {
    if verdict == Verdict::Improvement {
        "faster"
    } else {
        "slower"
    }
}

/// INCONCLUSIVE: the rounds of a case alone pointed to `verdict` (`alone`: why), but its
/// Holm-adjusted p-value over the `family` cases judged is not below the level.
pub fn not_significant_over_family(
    verdict: Verdict,
    adjusted: f64,
    family: usize,
    cfg: &GateConfig,
    alone: &str,
) -> String {
    format!(
        "not significant over the {family} cases judged: the rounds alone point to a {} \
         ({alone}), but p({}) adjusted for the {family} cases (Holm) is {adjusted:.2e}, not \
         below {}; the luckiest of many cases is not a change",
        verdict.label(),
        direction(verdict),
        cfg.rank_alpha
    )
}

/// The verdict of the first rounds (`first`: their reason), confirmed by fresh rounds.
pub fn confirmed(first: &str, second: &SampleComparison) -> String {
    format!(
        "{first}; confirmed by {} fresh rounds: ratio {}, p = {}",
        second.rounds.as_ref().map_or(0, |r| r.ratios.len()),
        ratio_text(second),
        second
            .shown_p_value()
            .map_or_else(|| "-".to_string(), |p| format!("{p:.2e}"))
    )
}

/// INCONCLUSIVE: the confirmation rounds of a flagged case completed too few rounds.
pub fn too_few_to_confirm(verdict: Verdict, first: &str, second: &SampleComparison) -> String {
    format!(
        "too few rounds to confirm the first rounds' {} ({first}): the confirmation's {}",
        verdict.label(),
        second.reason
    )
}

/// INCONCLUSIVE: the first rounds pointed to a change that fresh rounds did not repeat.
pub fn not_confirmed(first: &SampleComparison, second: &SampleComparison) -> String {
    let rounds = |c: &SampleComparison| c.rounds.as_ref().map_or(0, |r| r.ratios.len());
    format!(
        "not confirmed: the first {} rounds point to a {} (ratio {}, p adjusted for the cases \
         judged {}), {} fresh rounds of the case do not ({}: ratio {}, p({}) = {}); a change \
         that does not repeat is not flagged",
        rounds(first),
        first.verdict.label(),
        ratio_text(first),
        first
            .rounds
            .as_ref()
            .and_then(|r| r.p_family)
            .map_or_else(|| "-".to_string(), |p| format!("{p:.2e}")),
        rounds(second),
        second.verdict.label(),
        ratio_text(second),
        direction(first.verdict),
        match first.verdict {
            Verdict::Improvement => second.p_faster,
            _ => second.p_slower,
        }
        .map_or_else(|| "-".to_string(), |p| format!("{p:.2e}"))
    )
}

fn ratio_text(c: &SampleComparison) -> String {
    match (c.ratio, c.ci_low, c.ci_high) {
        (Some(x), Some(lo), Some(hi)) => format!("{x:.4} [{lo:.4}, {hi:.4}]"),
        _ => "-".to_string(),
    }
}
