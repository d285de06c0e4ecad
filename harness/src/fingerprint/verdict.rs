//! One knob's verdict from the cases' evidence: its witness elements (where some alternative
//! value changes the bits of the claimed recipe), how many of them the target agrees with for
//! each candidate value, and which value, if any, agrees on all of them.

use super::bits;
use super::evidence::CaseRun;
use conform_metadata::fingerprint::{Candidate, KnobFingerprint, KnobVerdict, Witness};
use conform_reference::ops::TensorMap;
use std::collections::BTreeSet;

/// Witnesses kept per case and in all.
const WITNESSES_PER_CASE: usize = 2;
const WITNESSES: usize = 6;

struct Tally {
    value: String,
    claimed: bool,
    sources: Vec<String>,
    agreeing: u64,
    of: u64,
    /// `None`: no witness yet; `Some(None)`: a NaN on one side.
    max_ulp: Option<Option<u64>>,
}

impl Tally {
    fn new(value: &str, claimed: bool) -> Tally {
        Tally {
            value: value.to_string(),
            claimed,
            sources: Vec::new(),
            agreeing: 0,
            of: 0,
            max_ulp: None,
        }
    }
}

/// The fingerprint of knob `knob` (claimed value `claimed`) over the runs whose claimed value
/// it is. `given(i)`, when it
/// returns outputs, stands for the claimed recipe's in run `i` (the claimed value of this knob
/// with another knob at the value found for it); the witness elements stay those of the
/// claimed recipe.
pub fn judge<'a>(
    runs: &'a [CaseRun],
    knob: &str,
    claimed: &str,
    ledger_status: Option<String>,
    given: &dyn Fn(usize) -> Option<&'a TensorMap>,
) -> KnobFingerprint {
    let mut tallies = vec![Tally::new(claimed, true)];
    let mut witness_elements = 0u64;
    let mut cases = BTreeSet::new();
    let mut witnesses: Vec<Witness> = Vec::new();
    for (ri, run) in runs.iter().enumerate() {
        if run.claimed_value(knob) != Some(claimed) {
            continue;
        }
        let alts: Vec<_> = run
            .alternatives
            .iter()
            .filter(|(a, _)| a.knob == knob)
            .collect();
        if alts.is_empty() {
            continue;
        }
        // Each alternative's tally index.
        let idx: Vec<usize> = alts
            .iter()
            .map(
                |(a, _)| match tallies.iter().position(|t| t.value == a.value) {
                    Some(i) => i,
                    None => {
                        tallies.push(Tally::new(&a.value, false));
                        tallies.len() - 1
                    }
                },
            )
            .collect();
        for ((a, _), &i) in alts.iter().zip(&idx) {
            for s in &a.sources {
                if !tallies[i].sources.contains(s) {
                    tallies[i].sources.push(s.clone());
                }
            }
        }
        let base = given(ri).unwrap_or(&run.claim);
        let mut kept_here = 0;
        for (name, claim) in &run.claim {
            let (Some(target), Some(base)) = (run.target.get(name), base.get(name)) else {
                continue;
            };
            let dt = claim.dtype;
            for e in 0..claim.numel() {
                let cb = bits::element(claim, e);
                let alt_bits: Vec<u64> = alts
                    .iter()
                    .map(|(_, o)| o.get(name).map_or(cb, |t| bits::element(t, e)))
                    .collect();
                if alt_bits.iter().all(|&b| bits::same(dt, b, cb)) {
                    continue;
                }
                witness_elements += 1;
                cases.insert(run.case.clone());
                let tb = bits::element(target, e);
                let mut known: Vec<(usize, u64)> = vec![(0, bits::element(base, e))];
                known.extend(idx.iter().copied().zip(alt_bits.iter().copied()));
                for &(i, b) in &known {
                    let t = &mut tallies[i];
                    t.of += 1;
                    if bits::same(dt, tb, b) {
                        t.agreeing += 1;
                    }
                    t.max_ulp = bits::worse(t.max_ulp, bits::ulp_distance(dt, tb, b));
                }
                if kept_here < WITNESSES_PER_CASE && witnesses.len() < WITNESSES {
                    kept_here += 1;
                    witnesses.push(Witness {
                        case: run.case.clone(),
                        output: name.clone(),
                        element: e as u64,
                        target: bits::hex(dt, tb),
                        candidates: (0..tallies.len())
                            .map(|i| {
                                known
                                    .iter()
                                    .find(|(k, _)| *k == i)
                                    .map_or("-".to_string(), |(_, b)| bits::hex(dt, *b))
                            })
                            .collect(),
                    });
                }
            }
        }
    }
    let verdict = verdict_of(&tallies, witness_elements);
    KnobFingerprint {
        knob: knob.to_string(),
        claimed: claimed.to_string(),
        ledger_status,
        verdict,
        witness_elements,
        cases: cases.into_iter().collect(),
        candidates: tallies
            .into_iter()
            .map(|t| Candidate {
                value: t.value,
                claimed: t.claimed,
                sources: t.sources,
                agreeing: t.agreeing,
                of: t.of,
                max_ulp: t.max_ulp.flatten(),
            })
            .collect(),
        witnesses,
    }
}

fn verdict_of(tallies: &[Tally], witness_elements: u64) -> KnobVerdict {
    if witness_elements == 0 {
        return KnobVerdict::NotDiscriminated;
    }
    let full: Vec<&Tally> = tallies
        .iter()
        .filter(|t| t.of > 0 && t.agreeing == t.of)
        .collect();
    if let Some((first, rest)) = full.split_first() {
        return KnobVerdict::Matches {
            value: first.value.clone(),
            claimed: first.claimed,
            indistinguishable_from: rest.iter().map(|t| t.value.clone()).collect(),
            given: None,
        };
    }
    // The closest: the most agreeing witnesses (the first such, the claim before the others).
    let closest = tallies
        .iter()
        .fold(None::<&Tally>, |best, t| match best {
            Some(b) if b.agreeing >= t.agreeing => Some(b),
            _ => Some(t),
        })
        .expect("the claimed value is always a candidate");
    KnobVerdict::MatchesNone {
        closest: closest.value.clone(),
        agreeing: closest.agreeing,
        of: closest.of,
        max_ulp: closest.max_ulp.flatten(),
    }
}
