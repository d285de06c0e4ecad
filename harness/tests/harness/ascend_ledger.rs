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
    let knobs =
        ledger::preset_knobs("fa_prefill", "ascend_pfa_bf16").expect("an Ascend preset has knobs");
    assert!(knobs.iter().all(|k| k.row.is_some()));
    assert!(knobs.iter().any(|k| k.status() == Some(Status::Assumed)));
    assert!(ledger::preset_knobs("fa_prefill", "fa2_cuda").is_none());
}

/// A confirmed row that cites a CANN kernel file names the host tiling that selects that
/// kernel (docs/ascend.md, "Kernel variants"): a kernel cited without the tiling branch that
/// reaches it is how a recipe came to describe a kernel the suites' shapes never run. Rows of
/// custom kernels called directly say so ("no tiling dispatch").
#[test]
fn every_confirmed_row_that_cites_a_kernel_cites_its_tiling() {
    let rows = ledger::parse(ledger::LEDGER_TEXT).unwrap_or_else(|e| panic!("{e}"));
    let cites_kernel = |src: &str| {
        src.contains("op_kernel")
            || src
                .split(|c: char| c.is_whitespace() || "(),;`".contains(c))
                .any(|w| w.ends_with(".h"))
    };
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| r.status == Status::Confirmed && cites_kernel(&r.source))
        .filter(|r| {
            let s = r.source.to_ascii_lowercase();
            !(s.contains("tiling") || s.contains("no tiling dispatch"))
        })
        .map(|r| format!("{} (line {})", r.id, r.line))
        .collect();
    assert!(
        bad.is_empty(),
        "confirmed rows in {} citing a kernel without the tiling that selects it: {bad:?}",
        ledger::LEDGER_PATH
    );
}

/// Every kernel variant has its own ledger row (`<family>.<preset>.variant`), and a variant
/// row that is confirmed cites the tiling function the variant names.
#[test]
fn every_variant_row_cites_its_tiling_function() {
    let rows = ledger::parse(ledger::LEDGER_TEXT).unwrap_or_else(|e| panic!("{e}"));
    for (op, v) in conform_reference::fidelity::kernel_variants() {
        let id = conform_reference::fidelity::variant_knob_id(op, v.id);
        let Some(row) = rows.iter().find(|r| r.id == id) else {
            panic!("no row `{id}` in {}", ledger::LEDGER_PATH);
        };
        if row.status == Status::Confirmed {
            let function = v.tiling.rsplit(' ').next().unwrap_or(v.tiling);
            assert!(
                row.source.contains(function),
                "{id}: a confirmed variant row cites its tiling function `{function}`"
            );
        }
    }
}

/// No `confirmed` row cites a kernel the dispatch does not pick for the cases that rely on it:
/// for every suite case whose op's dispatch is modelled, each confirmed row of the preset it
/// lands on that cites a CANN kernel file names the variant's own kernel among its sources
/// (its file name, or a header of the same kernel: `<kernel>_base.h`).
#[test]
fn confirmed_rows_cite_the_kernel_their_cases_run() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cases = conform_harness::suite::select::load_all(&root.join("suites")).unwrap();
    let mut bad = BTreeSet::new();
    let mut checked = 0;
    for c in &cases {
        let Some(model) = ledger::case_model(&c.op, &c.recipe, &c.params) else {
            continue;
        };
        let Some(d) = model.dispatch.as_ref().filter(|d| d.variant.modelled()) else {
            continue;
        };
        let kernel = d
            .variant
            .kernel
            .rsplit('/')
            .next()
            .unwrap_or(d.variant.kernel);
        let stem = kernel.trim_end_matches(".h").trim_end_matches(".cpp");
        let own = format!(
            "{}.{}.",
            conform_reference::fidelity::knob_family(&c.op),
            d.variant.preset
        );
        for k in &model.knobs {
            let Some(row) = k.row.filter(|r| r.status == Status::Confirmed) else {
                continue;
            };
            let cites_kernel = row.source.contains("op_kernel");
            if !k.knob.id.starts_with(&own) || !cites_kernel {
                continue;
            }
            checked += 1;
            if !row.source.contains(stem) {
                bad.insert(format!(
                    "{} (line {}): case {} runs {kernel}",
                    row.id, row.line, c.id
                ));
            }
        }
    }
    assert!(checked > 0, "no confirmed row citing a kernel was checked");
    assert!(
        bad.is_empty(),
        "confirmed rows citing a kernel their cases do not run: {bad:?}"
    );
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
        let model = ledger::case_model(&case.op, &case.recipe, &case.params)
            .expect("a case with explained knobs has a model");
        for k in model.knobs.iter().filter(|k| k.knob.is_claim()) {
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
