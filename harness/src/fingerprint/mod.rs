//! `conform fingerprint`: what a target really computes, knob by knob. For each case the target
//! supports whose recipe models a kernel with knobs (docs/ascend.md), the target runs once on
//! the case's inputs, and the reference runs on the same inputs with the claimed recipe and
//! with each alternative value of each knob ([`candidates`]: the knob flips and the recipe
//! faults of the catalogue, mapped to knobs by diffing the knob lists). The elements where an
//! alternative changes the claimed recipe's bits are the knob's witnesses; the value whose bits
//! the target's equal on every witness is the one it matches ([`verdict`]). Knobs are decided
//! one at a time with the others at the claim; the values found are then re-checked together
//! on fresh inputs ([`recheck`]). Nothing here writes golden data or the ledger. How to read
//! it: docs/fingerprint.md.

pub mod bits;
pub mod candidates;
pub mod evidence;
pub mod recheck;
pub mod text;
pub mod verdict;

use crate::ledger;
use crate::suite::Case;
use candidates::{CaseAlternatives, Mapping};
use conform_metadata::fingerprint::{
    CaseNote, CaseOutcome, Fingerprint, KnobFingerprint, KnobVerdict, RecheckOutcome,
    UnmappedFault, FORMAT, NAN_RULE,
};
use conform_reference::faults;
use conform_reference::ops::TensorMap;
use conform_reference::parallel::Threads;
use conform_targets::Target;
use evidence::CaseRun;
use std::collections::BTreeMap;

/// What to fingerprint with.
#[derive(Clone, Debug)]
pub struct FingerprintOptions {
    /// The seed every case draws its inputs from in the knob-by-knob pass.
    pub seed: u64,
    /// The seed of the re-check's fresh inputs.
    pub recheck_seed: u64,
    pub threads: Threads,
    /// The selection, in words, for the document.
    pub selection: String,
}

/// The fingerprint of `target` over `cases`.
pub fn fingerprint(
    target: &mut dyn Target,
    cases: &[Case],
    opts: &FingerprintOptions,
) -> Fingerprint {
    let mut notes = Vec::new();
    let mut done: Vec<(&Case, CaseAlternatives)> = Vec::new();
    let mut runs: Vec<CaseRun> = Vec::new();
    for case in cases {
        let declares = evidence::requested_recipe(target, case).is_some();
        let outcome = match fingerprint_case(target, case, opts) {
            Ok((alts, run)) => {
                let o = CaseOutcome::Fingerprinted {
                    preset: alts.preset.clone(),
                    alternatives: run.alternatives.len(),
                };
                done.push((case, alts));
                runs.push(run);
                o
            }
            Err(reason) => CaseOutcome::Skipped { reason },
        };
        notes.push(CaseNote {
            case: case.id.clone(),
            op: case.op.clone(),
            recipe: case.recipe.clone(),
            target_declares_recipe: declares,
            outcome,
        });
    }
    let knobs = knobs(&done, &runs);
    let found: Vec<(String, String)> = knobs
        .iter()
        .filter_map(|k| match &k.verdict {
            KnobVerdict::Matches {
                value,
                claimed: false,
                ..
            } => Some((k.knob.clone(), value.clone())),
            _ => None,
        })
        .collect();
    let recheck = if done.is_empty() {
        conform_metadata::fingerprint::Recheck {
            seed: opts.recheck_seed,
            combination: Vec::new(),
            outcome: RecheckOutcome::NotRun {
                reason: "no case was fingerprinted".to_string(),
            },
        }
    } else {
        let pairs: Vec<(&Case, &CaseAlternatives)> = done.iter().map(|(c, a)| (*c, a)).collect();
        recheck::recheck(target, &pairs, &found, opts.recheck_seed, opts.threads)
    };
    Fingerprint {
        format: FORMAT.to_string(),
        target: target.name().to_string(),
        selection: opts.selection.clone(),
        seed: opts.seed,
        nan_rule: NAN_RULE.to_string(),
        cases: notes,
        knobs,
        unmapped_faults: unmapped(&done),
        recheck,
    }
}

/// Runs one case, or says why it is not fingerprinted.
fn fingerprint_case(
    target: &mut dyn Target,
    case: &Case,
    opts: &FingerprintOptions,
) -> Result<(CaseAlternatives, CaseRun), String> {
    target
        .supports(&case.op, &crate::runner::capability_params(case))
        .map_err(|s| format!("the target does not run it: {}", s.0))?;
    let alts = candidates::of_case(case).ok_or_else(|| {
        format!(
            "recipe `{}` models no kernel with knobs (docs/ascend.md)",
            case.recipe
        )
    })?;
    if alts.alternatives.is_empty() {
        return Err(format!(
            "no knob of preset `{}` has an alternative value",
            alts.preset
        ));
    }
    let run = evidence::run_case(target, case, &alts, opts.seed, opts.threads)?;
    Ok((alts, run))
}

/// Every knob some run has an alternative for, judged one at a time; a knob matching no value
/// is judged again with the knob values found elsewhere in its cases applied, where a case has
/// exactly one.
fn knobs(done: &[(&Case, CaseAlternatives)], runs: &[CaseRun]) -> Vec<KnobFingerprint> {
    let mut claimed: BTreeMap<String, String> = BTreeMap::new();
    for ((_, alts), run) in done.iter().zip(runs) {
        for (a, _) in &run.alternatives {
            let value = alts
                .claimed
                .iter()
                .find(|k| k.id == a.knob)
                .map_or(String::new(), |k| k.value.clone());
            claimed.entry(a.knob.clone()).or_insert(value);
        }
    }
    let status = |id: &str| {
        ledger::ledger()
            .ok()
            .and_then(|rows| rows.iter().find(|r| r.id == id))
            .map(|r| r.status.name().to_string())
    };
    let first: Vec<KnobFingerprint> = claimed
        .iter()
        .map(|(id, value)| verdict::judge(runs, id, value, status(id), &|_| None))
        .collect();
    let found: Vec<(&str, &str)> = first
        .iter()
        .filter_map(|k| match &k.verdict {
            KnobVerdict::Matches {
                value,
                claimed: false,
                ..
            } => Some((k.knob.as_str(), value.as_str())),
            _ => None,
        })
        .collect();
    first
        .iter()
        .map(|k| match k.verdict {
            KnobVerdict::MatchesNone { .. } if !found.is_empty() => {
                given_found(runs, k, &found).unwrap_or_else(|| k.clone())
            }
            _ => k.clone(),
        })
        .collect()
}

/// Knob `k` judged with the other knobs' found values standing in for the claimed recipe;
/// `Some` only when the claimed value then matches.
fn given_found(
    runs: &[CaseRun],
    k: &KnobFingerprint,
    found: &[(&str, &str)],
) -> Option<KnobFingerprint> {
    let mut stand_ins: Vec<Option<&TensorMap>> = Vec::new();
    let mut used: Vec<String> = Vec::new();
    for run in runs {
        let hits: Vec<_> = run
            .alternatives
            .iter()
            .filter(|(a, _)| {
                a.knob != k.knob && found.iter().any(|(id, v)| a.knob == *id && a.value == *v)
            })
            .collect();
        match hits.as_slice() {
            [] => stand_ins.push(None),
            [(a, o)] => {
                let s = format!("{} = {}", a.knob, a.value);
                if !used.contains(&s) {
                    used.push(s);
                }
                stand_ins.push(Some(o));
            }
            _ => return None,
        }
    }
    if used.is_empty() {
        return None;
    }
    let status = k.ledger_status.clone();
    let mut again = verdict::judge(runs, &k.knob, &k.claimed, status, &|i| stand_ins[i]);
    match &mut again.verdict {
        KnobVerdict::Matches {
            claimed: true,
            given,
            ..
        } => {
            *given = Some(used.join(", "));
            Some(again)
        }
        _ => None,
    }
}

/// The recipe faults of the fingerprinted cases' ops that map to a knob in none of them, with
/// the reason their first case gives.
fn unmapped(done: &[(&Case, CaseAlternatives)]) -> Vec<UnmappedFault> {
    let mut out = Vec::new();
    for f in faults::catalogue() {
        let mut reason = None;
        let mut mapped = false;
        for (case, _) in done.iter().filter(|(c, _)| f.applies_to(&c.op)) {
            match candidates::map_fault(case, f) {
                Mapping::Knob { .. } => mapped = true,
                Mapping::NoKnob(why) => {
                    reason.get_or_insert(why);
                }
            }
        }
        if let (false, Some(reason)) = (mapped, reason) {
            out.push(UnmappedFault {
                fault: f.name.to_string(),
                reason,
            });
        }
    }
    out
}

/// Whether the fingerprint agrees with the claimed recipes: every discriminated knob matches
/// its claimed value, and the re-check did not find the claimed (or found) recipe differing.
pub fn agrees_with_claim(fp: &Fingerprint) -> bool {
    fp.knobs.iter().all(|k| {
        matches!(
            k.verdict,
            KnobVerdict::NotDiscriminated | KnobVerdict::Matches { claimed: true, .. }
        )
    }) && !matches!(fp.recheck.outcome, RecheckOutcome::Differs { .. })
}

/// Whether any case was fingerprinted.
pub fn judged_any(fp: &Fingerprint) -> bool {
    fp.cases
        .iter()
        .any(|c| matches!(c.outcome, CaseOutcome::Fingerprinted { .. }))
}
