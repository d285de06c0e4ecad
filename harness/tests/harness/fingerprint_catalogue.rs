//! The fingerprint against targets whose answer is known: the reference with each recipe fault
//! of the catalogue injected must be fingerprinted as exactly the knob value the fault sets
//! (and no other knob deviating), and the honest reference, on fresh seeds, as its claim on
//! every discriminated knob (no false attribution). Faults that map to no knob are listed.
//!
//! To keep the run to a few minutes on 2 cores, each fault is fingerprinted on at most
//! [`CASES_PER_KNOB`] of the smallest quick cases per knob it maps to on which it changes some
//! bits (scanning at most [`SCAN`] cases), and the honest reference on the
//! [`HONEST_PER_SUITE`] smallest quick cases of each suite.

use conform_harness::fingerprint::candidates::{map_fault, Mapping};
use conform_harness::fingerprint::{fingerprint, FingerprintOptions};
use conform_harness::suite::Case;
use conform_metadata::fingerprint::{Fingerprint, KnobVerdict, RecheckOutcome};
use conform_reference::faults;
use conform_reference::parallel::Threads;
use conform_targets::{FaultTarget, ReferenceTarget};
use std::collections::BTreeSet;

const THREADS: Threads = Threads(2);
/// Cases a fault is fingerprinted on, per knob it maps to.
const CASES_PER_KNOB: usize = 2;
/// Cases scanned per fault for ones it changes the bits of.
const SCAN: usize = 8;
/// Cases per suite the honest reference is fingerprinted on.
const HONEST_PER_SUITE: usize = 6;
const SEED: u64 = 0x5eed_f1e7;

/// Output elements of a case (its size, for choosing small ones).
fn size(c: &Case) -> usize {
    conform_reference::ops::find(&c.op)
        .and_then(|f| f.describe(&c.params))
        .map_or(usize::MAX, |d| {
            d.outputs
                .iter()
                .map(|o| o.shape.iter().product::<usize>())
                .sum()
        })
}

/// Whether `fault` changes the bits of `c` on the inputs of [`SEED`].
fn changes_bits(fault: &faults::Fault, c: &Case) -> bool {
    let ins = conform_harness::case_data::generate_inputs(c, SEED).unwrap();
    let family = conform_reference::ops::find(&c.op).unwrap();
    let clean = family.run(&c.params, &c.recipe, &ins, THREADS).unwrap();
    matches!(
        faults::run(fault, family, &c.params, &c.recipe, &ins, THREADS).unwrap(),
        faults::FaultRun::Outputs(o) if o != clean
    )
}

fn options(seed: u64) -> FingerprintOptions {
    FingerprintOptions {
        seed,
        recheck_seed: seed + 1,
        threads: THREADS,
        selection: "the catalogue test".to_string(),
    }
}

/// Knobs whose verdict is not "matches claim" or "not discriminated", in words.
fn deviating(fp: &Fingerprint, except: &BTreeSet<(String, String)>) -> Vec<String> {
    fp.knobs
        .iter()
        .filter(|k| !except.iter().any(|(id, _)| *id == k.knob))
        .filter(|k| {
            !matches!(
                k.verdict,
                KnobVerdict::NotDiscriminated | KnobVerdict::Matches { claimed: true, .. }
            )
        })
        .map(|k| format!("{}: {:?}", k.knob, k.verdict))
        .collect()
}

#[test]
fn every_knob_mapped_fault_is_fingerprinted_as_its_knob_value() {
    let cases = crate::repo::quick_cases();
    let mut identified = Vec::new();
    let mut invisible = Vec::new();
    let mut unmapped = Vec::new();
    let mut wrong = Vec::new();
    for fault in faults::catalogue() {
        if fault.edit.recipe.is_none() {
            unmapped.push(format!("{} (not a recipe fault)", fault.name));
            continue;
        }
        // The cases where the fault is a knob value, and which.
        let mut expected: BTreeSet<(String, String)> = BTreeSet::new();
        let mut reasons = BTreeSet::new();
        let mut mapped: Vec<(Case, String)> = Vec::new();
        for c in cases.iter().filter(|c| fault.applies_to(&c.op)) {
            match map_fault(c, fault) {
                Mapping::Knob { knob, value } => {
                    expected.insert((knob.clone(), value));
                    mapped.push((c.clone(), knob));
                }
                Mapping::NoKnob(why) => {
                    reasons.insert(why);
                }
            }
        }
        mapped.sort_by_key(|(c, _)| size(c));
        let mut mine: Vec<Case> = Vec::new();
        for (c, knob) in mapped.iter().take(SCAN) {
            let taken = mine
                .iter()
                .filter(|m| mapped.iter().any(|(x, k)| x.id == m.id && k == knob))
                .count();
            if taken < CASES_PER_KNOB && changes_bits(fault, c) {
                mine.push(c.clone());
            }
        }
        if mapped.is_empty() {
            unmapped.push(format!(
                "{} ({})",
                fault.name,
                reasons.into_iter().collect::<Vec<_>>().join("; ")
            ));
            continue;
        }
        if mine.is_empty() {
            // The fault changes no bits of the scanned cases: no knob can be identified, and
            // the suites' checks cannot kill it on them either.
            invisible.push(fault.name);
            continue;
        }
        let mut target = FaultTarget::new(fault, THREADS);
        let fp = fingerprint(&mut target, &mine, &options(SEED));
        let mut found = Vec::new();
        for (knob, value) in &expected {
            // The entry of this knob whose alternatives hold the value (a knob id has one
            // entry per claimed value).
            let Some(k) = fp.knobs.iter().find(|k| {
                &k.knob == knob && k.candidates.iter().any(|c| !c.claimed && &c.value == value)
            }) else {
                continue;
            };
            match &k.verdict {
                KnobVerdict::Matches {
                    value: v,
                    indistinguishable_from,
                    ..
                } if v == value || indistinguishable_from.contains(value) => {
                    found.push(knob.clone())
                }
                KnobVerdict::NotDiscriminated => {}
                other => wrong.push(format!(
                    "{}: knob {knob} should match {value}, got {other:?}",
                    fault.name
                )),
            }
        }
        let others = deviating(&fp, &expected);
        if !others.is_empty() {
            wrong.push(format!("{}: other knobs deviate: {others:?}", fault.name));
        }
        // Every case here is one the fault changes the bits of: its knob must be identified.
        if found.is_empty() {
            wrong.push(format!(
                "{}: changes bits but no knob of {expected:?} was identified",
                fault.name
            ));
        } else {
            identified.push(fault.name);
        }
        match &fp.recheck.outcome {
            RecheckOutcome::Reproduced { .. } => {}
            other => wrong.push(format!("{}: re-check {other:?}", fault.name)),
        }
    }
    eprintln!(
        "fingerprint catalogue: {} knob-mapped faults identified, {} change no bits of the {SCAN} smallest cases they map on ({}), {} map to no knob:\n  {}",
        identified.len(),
        invisible.len(),
        invisible.join(", "),
        unmapped.len(),
        unmapped.join("\n  ")
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(!identified.is_empty());
}

#[test]
fn the_honest_reference_matches_its_claim_on_fresh_seeds() {
    let mut cases = crate::repo::quick_cases();
    cases.sort_by_key(|c| (c.suite.clone(), size(c)));
    let mut per_suite: std::collections::BTreeMap<String, usize> = Default::default();
    cases.retain(|c| {
        let n = per_suite.entry(c.suite.clone()).or_default();
        *n += 1;
        *n <= HONEST_PER_SUITE
    });
    for seed in [conform_harness::seed::fresh_seed(), 7] {
        let mut target = ReferenceTarget::new(THREADS);
        let fp = fingerprint(&mut target, &cases, &options(seed));
        assert!(
            fp.knobs
                .iter()
                .any(|k| matches!(k.verdict, KnobVerdict::Matches { .. })),
            "seed {seed}: no knob discriminated"
        );
        let off = deviating(&fp, &BTreeSet::new());
        assert!(off.is_empty(), "seed {seed}: {off:?}");
        assert!(
            matches!(fp.recheck.outcome, RecheckOutcome::Reproduced { .. }),
            "seed {seed}: {:?}",
            fp.recheck
        );
    }
}
