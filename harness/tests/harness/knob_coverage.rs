//! Knob coverage (docs/ascend.md, "Conventions"): every bit-changing choice of an Ascend
//! recipe that `conform_reference::knob_flips` lists is flipped on the quick cases whose recipe
//! has that knob, and some case's output bits must change. A choice no case can see is a
//! ledger row nothing tests.

use conform_harness::case_data::generate_inputs;
use conform_harness::ledger;
use conform_harness::suite::Case;
use conform_reference::fidelity;
use conform_reference::knob_flips::{flip_of, KNOB_FLIPS};
use conform_reference::ops;
use conform_reference::parallel::Threads;
use std::collections::BTreeMap;

/// Input seeds tried per case (a choice may show only on some draws).
const SEEDS: u64 = 3;

/// Whether flipping the knob `id` changes the bits of `case` on one of its seeds.
fn changes_bits(case: &Case, id: &str) -> bool {
    let Some((flip, _)) = flip_of(id) else {
        return false;
    };
    let family = ops::find(&case.op).unwrap();
    for s in 0..SEEDS {
        let inputs = generate_inputs(case, case.seed + s).unwrap();
        let clean = family
            .run(&case.params, &case.recipe, &inputs, Threads(2))
            .unwrap();
        let edited = family
            .run_with_recipe_edit(&case.params, &case.recipe, &flip.edit, &inputs, Threads(2))
            .unwrap();
        if edited.is_some_and(|e| e != clean) {
            return true;
        }
    }
    false
}

#[test]
fn every_listed_choice_changes_some_quick_cases_bits() {
    assert!(!KNOB_FLIPS.is_empty());
    // Knob id -> (cases whose model has it, whether one changed).
    let mut seen: BTreeMap<String, (Vec<String>, bool)> = BTreeMap::new();
    for case in crate::repo::quick_cases() {
        let Some(model) = ledger::case_model(&case.op, &case.recipe, &case.params) else {
            continue;
        };
        for k in &model.knobs {
            let Some((_, inert)) = flip_of(&k.knob.id) else {
                continue;
            };
            if inert.is_some() {
                continue;
            }
            let entry = seen.entry(k.knob.id.clone()).or_default();
            if entry.1 {
                continue;
            }
            entry.0.push(case.id.clone());
            entry.1 = changes_bits(&case, &k.knob.id);
        }
    }
    // Every family of the table is reached by some case.
    for f in KNOB_FLIPS {
        assert!(
            seen.keys()
                .any(|id| id.starts_with(&format!("{}.", f.family)) && id.ends_with(f.field)),
            "no quick case has a knob `{}.*.{}`",
            f.family,
            f.field
        );
    }
    let dead: Vec<String> = seen
        .iter()
        .filter(|(_, (_, changed))| !changed)
        .map(|(id, (cases, _))| format!("{id} (tried on {})", cases.join(", ")))
        .collect();
    assert!(
        dead.is_empty(),
        "listed choices that change no quick case's bits: {dead:?}"
    );
    // The flips name real knobs of the ledger.
    let ids = fidelity::knob_ids();
    for id in seen.keys() {
        assert!(ids.contains(id), "{id} is not a knob");
    }
}
