//! The fidelity ledger (docs/ascend.md) and the code stay in step: every knob of every Ascend
//! preset (attention, FP4 dequant, W4A16, MC2) and every fixed claim (planner, cost model, paged
//! KV cache, CANN cast, CANN precision standards) has exactly one row, every row names a knob
//! the code defines, and every status is one the ledger knows.

use conform_harness::ledger::{self, Status};
use std::collections::BTreeSet;

#[test]
fn every_knob_has_a_row_and_every_row_a_knob() {
    let rows = ledger::parse(ledger::LEDGER_TEXT).unwrap_or_else(|e| panic!("{e}"));
    let knobs: BTreeSet<String> = ledger::knob_ids().into_iter().collect();
    let ids: BTreeSet<String> = rows.iter().map(|r| r.id.clone()).collect();
    let missing: Vec<&String> = knobs.difference(&ids).collect();
    let unknown: Vec<String> = rows
        .iter()
        .filter(|r| !knobs.contains(&r.id) && !r.is_worker_claim())
        .map(|r| format!("{} (line {})", r.id, r.line))
        .collect();
    assert!(
        missing.is_empty(),
        "knobs without a row in {}: {missing:?}",
        ledger::LEDGER_PATH
    );
    assert!(
        unknown.is_empty(),
        "rows in {} naming no knob the code defines: {unknown:?}",
        ledger::LEDGER_PATH
    );
    for r in &rows {
        assert!(Status::ALL.contains(&r.status));
        assert!(
            r.status == Status::Assumed || !r.source.eq_ignore_ascii_case("none"),
            "{}: a row that is not `assumed` needs a source",
            r.id
        );
    }
}

#[test]
fn the_torch_npu_worker_has_its_claims_in_the_ledger() {
    let rows = ledger::parse(ledger::LEDGER_TEXT).unwrap_or_else(|e| panic!("{e}"));
    let worker: Vec<_> = rows.iter().filter(|r| r.is_worker_claim()).collect();
    // The worker's argument mappings (MC2 epilogue, inner_precise, the TND limits, device
    // probes) and the setup script's CANN detection each have rows.
    for id in ["npu.", "ci."] {
        assert!(
            worker.iter().any(|r| r.id.starts_with(id)),
            "no `{id}*` row in {}",
            ledger::LEDGER_PATH
        );
    }
    let knobs: BTreeSet<String> = ledger::knob_ids().into_iter().collect();
    for r in &worker {
        assert!(
            !knobs.contains(&r.id),
            "{} is both a knob and a worker claim",
            r.id
        );
    }
}

#[test]
fn the_binary_carries_the_committed_ledger() {
    // include_str! takes the file at build time: the compiled-in text is the file's.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let on_disk = std::fs::read_to_string(dir.join(ledger::LEDGER_PATH)).unwrap();
    assert_eq!(on_disk, ledger::LEDGER_TEXT);
}

#[test]
fn a_case_on_an_ascend_recipe_lists_its_weak_knobs() {
    let knobs = ledger::case_knobs(
        "fa_prefill",
        "ascend_pfa_bf16",
        conform_reference::formats::DType::Bf16,
    )
    .expect("an Ascend preset has knobs");
    assert!(knobs.iter().all(|k| k.row.is_some()));
    assert!(knobs.iter().any(|k| k.status() == Some(Status::Assumed)));
    assert!(ledger::case_knobs(
        "fa_prefill",
        "fa2_cuda",
        conform_reference::formats::DType::Bf16
    )
    .is_none());
}

/// `conform explain` prints every claim fixed in the code with its ledger row's text (the one
/// copy the report prints too): for every case of every suite on an Ascend recipe, each claim
/// line is the row's claim, word for word. (The int8 quant_matmul case once printed a claim
/// text the ledger had replaced.)
#[test]
fn explain_prints_each_claim_as_the_ledger_writes_it() {
    let cases = conform_harness::suite::select::load_all(&crate::repo::repo().join("suites"))
        .expect("the suites load");
    let mut claims = 0;
    for case in &cases {
        let Some(text) = conform_harness::messages::explain_knobs(case) else {
            continue;
        };
        let knobs = ledger::case_knobs(&case.op, &case.recipe, ledger::case_dtype(&case.params))
            .expect("a case with explained knobs has knobs");
        for k in knobs.iter().filter(|k| k.knob.is_claim()) {
            let row = k.row.expect("every claim has a row");
            let line = format!("knob        {}: {} [", k.knob.id, row.claim);
            assert!(
                text.contains(&line),
                "{}: `{}` is not printed as the ledger writes it:\n{text}",
                case.id,
                k.knob.id
            );
            claims += 1;
        }
    }
    assert!(claims > 0, "no case printed a claim");
    let int8 = cases
        .iter()
        .find(|c| c.op == "quant_matmul" && c.params["out"] == "int8")
        .expect("an int8 quant_matmul case");
    let text = conform_harness::messages::explain_knobs(int8).unwrap();
    assert!(
        !text.contains("not modelled; no case passes an offset"),
        "the stale claim is back:\n{text}"
    );
}
