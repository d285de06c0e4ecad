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
pub mod change;
pub mod evidence;
pub mod hint;
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
use std::collections::BTreeSet;

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
            Err(reason) => CaseOutcome::Skipped {
                reason: reason.to_string(),
            },
        };
        notes.push(CaseNote {
            case: case.id.clone(),
            op: case.op.clone(),
            recipe: case.recipe.clone(),
            target_declares_recipe: declares,
            outcome,
        });
    }
    let mut knobs = knobs(&runs);
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
        settle(target, &pairs, &mut knobs, opts)
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

/// The values found (non-claimed matches), as `(knob, value)`.
fn found_values(knobs: &[KnobFingerprint]) -> Vec<(String, String)> {
    knobs
        .iter()
        .filter_map(|k| match &k.verdict {
            KnobVerdict::Matches {
                value,
                claimed: false,
                ..
            } => Some((k.knob.clone(), value.clone())),
            _ => None,
        })
        .collect()
}

/// Re-checks the values found on fresh inputs. When that combination still disagrees and a
/// knob's value found had others with the same bits on every witness, each of those is tried in
/// its place: the first that reproduces the target's bits becomes the knob's value (the fresh
/// inputs told them apart), and the re-check reported is that one's.
fn settle(
    target: &mut dyn Target,
    cases: &[(&Case, &CaseAlternatives)],
    knobs: &mut [KnobFingerprint],
    opts: &FingerprintOptions,
) -> conform_metadata::fingerprint::Recheck {
    let found = found_values(knobs);
    let first = recheck::recheck(target, cases, &found, opts.recheck_seed, opts.threads);
    if !matches!(first.outcome, RecheckOutcome::Differs { .. }) {
        return first;
    }
    for knob in knobs.iter_mut() {
        let KnobVerdict::Matches {
            value,
            claimed: false,
            indistinguishable_from,
            given,
        } = knob.verdict.clone()
        else {
            continue;
        };
        for (j, other) in indistinguishable_from.iter().enumerate() {
            let trial: Vec<(String, String)> = found
                .iter()
                .map(|(k, v)| {
                    if *k == knob.knob {
                        (k.clone(), other.clone())
                    } else {
                        (k.clone(), v.clone())
                    }
                })
                .collect();
            let r = recheck::recheck(target, cases, &trial, opts.recheck_seed, opts.threads);
            if matches!(r.outcome, RecheckOutcome::Reproduced { .. }) {
                let mut rest = indistinguishable_from.clone();
                rest[j] = value.clone();
                knob.verdict = KnobVerdict::Matches {
                    value: other.clone(),
                    claimed: false,
                    indistinguishable_from: rest,
                    given,
                };
                return r;
            }
        }
    }
    first
}

/// Why a case is not fingerprinted: the reason the report gives.
#[derive(Debug, thiserror::Error)]
enum NotFingerprinted {
    #[error("the target does not run it: {0}")]
    Unsupported(String),
    #[error("recipe `{0}` models no kernel with knobs (docs/ascend.md)")]
    NoKnobs(String),
    #[error("no knob of preset `{0}` has an alternative value")]
    NoAlternative(String),
    #[error(transparent)]
    Evidence(#[from] evidence::EvidenceError),
}

/// Runs one case, or says why it is not fingerprinted.
fn fingerprint_case(
    target: &mut dyn Target,
    case: &Case,
    opts: &FingerprintOptions,
) -> Result<(CaseAlternatives, CaseRun), NotFingerprinted> {
    target
        .supports(&case.op, &crate::runner::capability_params(case))
        .map_err(|s| NotFingerprinted::Unsupported(s.0))?;
    let alts =
        candidates::of_case(case).ok_or_else(|| NotFingerprinted::NoKnobs(case.recipe.clone()))?;
    if alts.alternatives.is_empty() {
        return Err(NotFingerprinted::NoAlternative(alts.preset.clone()));
    }
    let run = evidence::run_case(target, case, &alts, opts.seed, opts.threads)?;
    Ok((alts, run))
}

/// Every knob some run has an alternative for (one entry per claimed value: a knob id can claim
/// another value for another element type), judged one at a time. Then the values found are
/// weighed against each other: an alternative that reproduces every bit of every case it
/// applies to explains the others' witnesses, so each other knob is judged again with that
/// alternative's outputs standing in for the claimed recipe (else, where a case has exactly
/// one value found, with that one); a knob whose claimed value then matches is reported as
/// matching it given the value found.
fn knobs(runs: &[CaseRun]) -> Vec<KnobFingerprint> {
    let mut claimed: BTreeSet<(String, String)> = BTreeSet::new();
    for run in runs {
        for (a, _) in &run.alternatives {
            let value = run.claimed_value(&a.knob).unwrap_or_default();
            claimed.insert((a.knob.clone(), value.to_string()));
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
    let complete: Vec<(&str, &str)> = found
        .iter()
        .copied()
        .filter(|f| reproduces_everything(runs, *f))
        .collect();
    let explaining = if complete.is_empty() { found } else { complete };
    first
        .iter()
        .map(|k| {
            let deviates = !matches!(
                k.verdict,
                KnobVerdict::NotDiscriminated | KnobVerdict::Matches { claimed: true, .. }
            );
            let others: Vec<(&str, &str)> = explaining
                .iter()
                .copied()
                .filter(|(id, _)| *id != k.knob)
                .collect();
            if deviates && !others.is_empty() {
                given_found(runs, k, &others).unwrap_or_else(|| k.clone())
            } else {
                k.clone()
            }
        })
        .collect()
}

/// Whether the alternative `(knob, value)` gives the target's bits on every element of every
/// case it applies to.
fn reproduces_everything(runs: &[CaseRun], (knob, value): (&str, &str)) -> bool {
    let mut any = false;
    for run in runs {
        for (a, o) in &run.alternatives {
            if a.knob == knob && a.value == value {
                any = true;
                if evidence::differences(&run.target, o).0 != 0 {
                    return false;
                }
            }
        }
    }
    any
}

/// Knob `k` judged with the values `found` standing in for the claimed recipe; `Some` only
/// when the claimed value then matches.
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
            .filter(|(a, _)| found.iter().any(|(id, v)| a.knob == *id && a.value == *v))
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
