//! User-facing text of the performance gate and budgets.

use std::fmt::Write as _;

use crate::perf::compare::{CaseComparison, Comparison, Verdict};

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$}"))
}

fn row(c: &CaseComparison) -> [String; 7] {
    let r = &c.result;
    let ratio = match (r.ratio, r.ci_low, r.ci_high) {
        (Some(x), Some(lo), Some(hi)) => format!("{x:.4} [{lo:.4}, {hi:.4}]"),
        _ => "-".to_string(),
    };
    let p = r.shown_p_value();
    let case = match &c.hardware {
        Some(h) => format!("{} @{h}", c.id),
        None => c.id.clone(),
    };
    [
        case,
        c.target.clone(),
        fmt_opt(r.baseline.map(|s| s.median_us), 3),
        fmt_opt(r.candidate.map(|s| s.median_us), 3),
        ratio,
        p.map_or_else(|| "-".to_string(), |p| format!("{p:.2e}")),
        r.verdict.label().to_string(),
    ]
}

/// What the columns of a comparison's table mean: for two sample sets (`perf compare`, the
/// history gate) or for an A/B comparison in rounds.
fn legend(cmp: &Comparison) -> String {
    let cfg = &cmp.config;
    if let Some(s) = cmp.cases.iter().find_map(|c| c.result.rounds.as_ref()) {
        return format!(
            "ratio = candidate / baseline: the geometric mean of the rounds' ratios (each round \
             in fresh processes of both sides, A B B A, its ratio of medians; a round far \
             outside the others set aside), {:.1}% t interval over the rounds; p = one-sided \
             Wilcoxon signed-rank test of the rounds in the direction of the ratio. REGRESSION \
             needs CI low > {:.4} and p < {}; IMPROVEMENT needs CI high < {:.4} and p < {}; \
             then p adjusted (Holm) for the cases judged must stay below {}, and as many \
             fresh rounds of the flagged cases must repeat the change (the same way beyond \
             the threshold, p < {}; the figures shown are the first rounds'). Fewer than {} \
             rounds, rounds that disagree (the ratio \
             beyond the threshold without a verdict, or an interval beyond it on both sides), \
             a verdict not significant over the cases or not confirmed is INCONCLUSIVE.",
            100.0 * (1.0 - 2.0 * cfg.ci_alpha),
            1.0 + cfg.threshold,
            cfg.rank_alpha,
            1.0 - cfg.threshold,
            cfg.rank_alpha,
            cfg.rank_alpha,
            crate::perf::confirmation::CONFIRMATION_ALPHA,
            s.min_rounds
        );
    }
    format!(
        "ratio = candidate / baseline of the mean inside Tukey fences (k = {}, spikes dropped \
         once), {:.1}% Welch-t (Fieller) interval; p = one-sided Mann-Whitney U on the fenced \
         samples in the direction of the ratio (slower for a ratio >= 1, faster below). \
         REGRESSION needs CI low > {:.4} and p < {}; IMPROVEMENT needs CI high < {:.4} and p < \
         {}; fewer than {} samples a side, or records of other op parameters, is INCONCLUSIVE.",
        cfg.fence_k,
        100.0 * (1.0 - 2.0 * cfg.ci_alpha),
        1.0 + cfg.threshold,
        cfg.rank_alpha,
        1.0 - cfg.threshold,
        cfg.rank_alpha,
        cfg.min_samples
    )
}

/// The comparison as an aligned text table followed by a legend and a summary line.
pub fn comparison_table(cmp: &Comparison) -> String {
    let header = [
        "case",
        "target",
        "baseline median us",
        "candidate median us",
        "ratio [CI low, CI high]",
        "p-value",
        "verdict",
    ]
    .map(String::from);
    let rows: Vec<[String; 7]> = cmp.cases.iter().map(row).collect();
    let mut widths = header.clone().map(|h| h.len());
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &[String; 7]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(parts.join("  ").trim_end());
        out.push('\n');
    };
    line(&mut out, &header);
    for r in &rows {
        line(&mut out, r);
    }
    let _ = writeln!(out, "\n{}", legend(cmp));
    for c in &cmp.cases {
        if matches!(
            c.result.verdict,
            Verdict::Inconclusive | Verdict::OnlyInBaseline | Verdict::OnlyInCandidate
        ) {
            let _ = writeln!(
                out,
                "{} ({}) {}: {}",
                c.id,
                c.target,
                c.result.verdict.label(),
                c.result.reason
            );
        }
    }
    let _ = writeln!(out, "{}", comparison_summary(cmp));
    out
}

/// One line: counts per verdict.
pub fn comparison_summary(cmp: &Comparison) -> String {
    let parts: Vec<String> = [
        Verdict::Regression,
        Verdict::Improvement,
        Verdict::Unchanged,
        Verdict::Inconclusive,
        Verdict::OnlyInBaseline,
        Verdict::OnlyInCandidate,
    ]
    .iter()
    .filter_map(|&v| {
        let n = cmp.count(v);
        (n > 0).then(|| format!("{n} {}", v.label()))
    })
    .collect();
    format!("{} cases: {}", cmp.cases.len(), parts.join(", "))
}

pub fn wrote_json(path: &std::path::Path) -> String {
    format!("wrote {}", path.display())
}

pub fn bad_input(err: &dyn std::fmt::Display) -> String {
    format!("error: {err}")
}

/// `perf compare` where no case is on both sides: nothing was compared, so the gate cannot be
/// green.
pub fn nothing_compared() -> String {
    "nothing judged: no case is in both the baseline and the candidate (exit 4); \
     check that both files were recorded for the same cases, target and hardware"
        .to_string()
}

/// `perf record` that timed no case (every case skipped, or the target unavailable).
pub fn nothing_recorded() -> String {
    "nothing judged: no case was timed, so the perf file holds no case (exit 4); \
     the skip reasons are listed above"
        .to_string()
}

/// The reason of an A/B verdict: the rounds' judgement, plus how the samples were taken.
pub fn ab_reason(judged: &str, against: &str) -> String {
    format!(
        "{judged}; timed against `{against}`, each round in fresh processes of both (A B B A, then B A A B)"
    )
}

/// A round a side could not complete for a case.
pub fn round_lost(round: u32, target: &str, why: &str) -> String {
    format!("round {}: `{target}`: {why}", round + 1)
}

/// A flagged case that a side could no longer run in its confirmation rounds.
pub fn confirmation_lost(why: &str) -> String {
    format!("the confirmation rounds: {why}")
}

pub fn ab_heading(against: &str, cases: usize) -> String {
    format!("A/B against `{against}` ({cases} case(s); baseline = `{against}`, candidate = the target named in each row):")
}

pub fn ab_not_timed(id: &str, target: &str, reason: &str) -> String {
    format!("not timed A/B: {id} [{target}]: {reason}")
}

pub fn ab_slower(against: &str) -> String {
    format!(
        "A/B: at least one case is slower than `{against}` beyond the threshold (REGRESSION above)"
    )
}

/// A/B without a regression, but with a case it could not judge (exit 3).
pub fn ab_undecided(against: &str) -> String {
    format!(
        "A/B: no case is slower than `{against}` beyond the threshold, but at least one could not \
         be judged (INCONCLUSIVE or not timed above): exit 3, inconclusive"
    )
}

/// `perf keep-control`: what was kept, and which repository files came with it.
pub fn kept_control(target: &str, dir: &std::path::Path, repo: &[std::path::PathBuf]) -> String {
    let with = if repo.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = repo.iter().map(|p| p.display().to_string()).collect();
        format!(", with {} of the repository", names.join(", "))
    };
    format!(
        "kept `{target}` as the control in {}{with}; its copy starts",
        dir.display()
    )
}
