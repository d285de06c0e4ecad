//! The fingerprint as text: the knob table `conform fingerprint` prints (one row per knob, one
//! evidence line under it), and the ledger diff `--ledger-diff` writes (docs/fingerprint.md).

use conform_metadata::fingerprint::{
    CaseOutcome, Fingerprint, KnobFingerprint, KnobVerdict, RecheckOutcome,
};

/// Values longer than this are cut in the table (the JSON holds them whole).
const VALUE_WIDTH: usize = 40;

/// `v`, cut to [`VALUE_WIDTH`] characters with an ellipsis.
fn short(v: &str) -> String {
    if v.chars().count() <= VALUE_WIDTH {
        v.to_string()
    } else {
        let cut: String = v.chars().take(VALUE_WIDTH - 1).collect();
        format!("{cut}…")
    }
}

/// A knob's verdict in words (long values cut).
pub fn verdict_words(k: &KnobFingerprint) -> String {
    match &k.verdict {
        KnobVerdict::Matches {
            value,
            claimed,
            indistinguishable_from,
            given,
        } => {
            let mut s = if *claimed {
                "matches claim".to_string()
            } else {
                format!("matches {}", short(value))
            };
            if let Some(g) = given {
                s.push_str(&format!(" given {g}"));
            }
            if !indistinguishable_from.is_empty() {
                s.push_str(&format!(
                    " (same bits as {})",
                    indistinguishable_from
                        .iter()
                        .map(|v| short(v))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            s
        }
        KnobVerdict::MatchesNone {
            closest,
            agreeing,
            of,
            max_ulp,
        } => format!(
            "matches none (closest {}: {agreeing} of {of}, {})",
            short(closest),
            ulp_words(*max_ulp)
        ),
        KnobVerdict::NotDiscriminated => "not discriminated by these shapes".to_string(),
    }
}

fn ulp_words(u: Option<u64>) -> String {
    match u {
        Some(u) => format!("max {u} ulp"),
        None => "a NaN on one side".to_string(),
    }
}

/// The first witness in words: case, element, the target's bits and each candidate's.
fn evidence_line(k: &KnobFingerprint) -> Option<String> {
    let w = k.witnesses.first()?;
    let cands: Vec<String> = k
        .candidates
        .iter()
        .zip(&w.candidates)
        .map(|(c, b)| {
            let label = if c.claimed {
                "claim".to_string()
            } else {
                short(&c.value)
            };
            format!("{label} {b}")
        })
        .collect();
    Some(format!(
        "{} {}[{}]: target {}; {}",
        w.case,
        w.output,
        w.element,
        w.target,
        cands.join("; ")
    ))
}

/// The table and the summary lines `conform fingerprint` prints.
pub fn table(fp: &Fingerprint) -> String {
    let mut out = String::new();
    let fingerprinted = fp
        .cases
        .iter()
        .filter(|c| matches!(c.outcome, CaseOutcome::Fingerprinted { .. }))
        .count();
    out.push_str(&format!(
        "fingerprint of `{}` on {} (seed {}): {} of {} cases fingerprinted, {} knobs\n",
        fp.target,
        fp.selection,
        fp.seed,
        fingerprinted,
        fp.cases.len(),
        fp.knobs.len()
    ));
    for c in &fp.cases {
        if let CaseOutcome::Skipped { reason } = &c.outcome {
            out.push_str(&format!("  skipped {}: {reason}\n", c.case));
        }
    }
    if fp.cases.iter().any(|c| {
        !c.target_declares_recipe && matches!(c.outcome, CaseOutcome::Fingerprinted { .. })
    }) {
        out.push_str("  (cases whose recipe the target does not declare ran the target's own arithmetic: their knobs say how far it is from the model)\n");
    }
    let rows: Vec<[String; 5]> = fp
        .knobs
        .iter()
        .map(|k| {
            [
                k.knob.clone(),
                short(&k.claimed),
                k.ledger_status.clone().unwrap_or_else(|| "-".to_string()),
                verdict_words(k),
                k.witness_elements.to_string(),
            ]
        })
        .collect();
    let head = ["knob", "claimed", "ledger", "verdict", "witnesses"];
    let mut w = head.map(str::len);
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: [&str; 5]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 < cells.len() {
                s.push_str(&format!("{c:<width$}  ", width = w[i]));
            } else {
                s.push_str(c);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    out.push('\n');
    out.push_str(&line(head));
    for (r, k) in rows.iter().zip(&fp.knobs) {
        out.push_str(&line([&r[0], &r[1], &r[2], &r[3], &r[4]]));
        if let Some(e) = evidence_line(k) {
            out.push_str(&format!("    {e}\n"));
        }
    }
    out.push('\n');
    if !fp.unmapped_faults.is_empty() {
        out.push_str("faults of these ops that map to no knob:\n");
        for u in &fp.unmapped_faults {
            out.push_str(&format!("  {}: {}\n", u.fault, u.reason));
        }
    }
    out.push_str(&recheck_line(fp));
    out.push('\n');
    out.push_str(&format!("NaN rule: {}\n", fp.nan_rule));
    out
}

/// The re-check in one line.
fn recheck_line(fp: &Fingerprint) -> String {
    let r = &fp.recheck;
    let what = if r.combination.is_empty() {
        "the claimed recipes".to_string()
    } else {
        format!("the claimed recipes with {}", r.combination.join(", "))
    };
    match &r.outcome {
        RecheckOutcome::Reproduced { cases, elements } => format!(
            "re-check on fresh inputs (seed {}): {what} reproduce the target's bits ({cases} cases, {elements} elements)",
            r.seed
        ),
        RecheckOutcome::Differs {
            case,
            output,
            differing,
            of,
            element,
            target,
            expected,
        } => format!(
            "re-check on fresh inputs (seed {}): {what} still disagree: {case} {output}: {differing} of {of} elements differ (element {element}: target {target}, recipe {expected})",
            r.seed
        ),
        RecheckOutcome::NotRun { reason } => {
            format!("re-check of {what} not run: {reason}")
        }
    }
}

/// The proposed ledger rows (`--ledger-diff`): one line per discriminated knob.
pub fn ledger_diff(fp: &Fingerprint) -> String {
    let mut out = format!(
        "Proposed ledger rows (docs/ascend.md) from `conform fingerprint --target {}` on {} (seed {}, re-check seed {}):\n\n",
        fp.target, fp.selection, fp.seed, fp.recheck.seed
    );
    for k in &fp.knobs {
        let what = match &k.verdict {
            KnobVerdict::NotDiscriminated => continue,
            KnobVerdict::Matches {
                value,
                claimed,
                given,
                ..
            } => {
                let mut s = format!("the target matches {value}");
                s.push_str(if *claimed {
                    " (the claimed value)"
                } else {
                    " (not the claimed value)"
                });
                if let Some(g) = given {
                    s.push_str(&format!(", given {g}"));
                }
                s
            }
            KnobVerdict::MatchesNone {
                closest, max_ulp, ..
            } => {
                let values: Vec<&str> = k.candidates.iter().map(|c| c.value.as_str()).collect();
                format!(
                    "the target matches none of {}; closest {closest} ({})",
                    values.join(" / "),
                    ulp_words(*max_ulp)
                )
            }
        };
        let agreeing = match &k.verdict {
            KnobVerdict::Matches { value, .. } => k
                .candidates
                .iter()
                .find(|c| &c.value == value)
                .map_or(0, |c| c.agreeing),
            KnobVerdict::MatchesNone { agreeing, .. } => *agreeing,
            KnobVerdict::NotDiscriminated => 0,
        };
        out.push_str(&format!(
            "- `{}` ({}): {what} (case {}, {agreeing} of {} witness elements)\n",
            k.knob,
            k.ledger_status.as_deref().unwrap_or("no row"),
            k.cases.join(", "),
            k.witness_elements
        ));
    }
    out
}
