//! The fidelity ledger (docs/ascend.md) and the code stay in step: every knob of every Ascend
//! preset (attention, FP4 dequant, W4A16, MC2) and every fixed claim (planner, cost model, paged
//! KV cache, CANN cast, CANN precision standards) has exactly one row, every row names a knob
//! the code defines, and every status is one the ledger knows.

use conform_harness::ledger::{self, Status};
use std::collections::{BTreeMap, BTreeSet};

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

/// The file names of the kernel sources a ledger text cites: CANN kernel files written out
/// (`op_kernel/...`, a word ending in `.h`, a kernel `.cpp`), and the files the abbreviations
/// defined in the ledger's Sources paragraphs (`**QMM-opt** `..._pertoken_opt.h``) stand for.
/// Host tiling files are not kernels.
fn cited_kernel_files(
    text: &str,
    abbreviations: &BTreeMap<String, Vec<String>>,
) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    for w in text.split(|c: char| c.is_whitespace() || "(),;`".contains(c)) {
        let w = w.trim_end_matches(['.', ':']);
        if let Some(f) = abbreviations.get(w) {
            files.extend(f.iter().cloned());
        }
        if let Some(f) = kernel_file(w) {
            files.insert(f);
        }
    }
    files
}

/// The file name of a kernel source path (`.h`, or a `.cpp` that is not a host tiling).
fn kernel_file(word: &str) -> Option<String> {
    let name = word.rsplit('/').next().unwrap_or(word);
    let kernel = name.ends_with(".h") || (name.ends_with(".cpp") && !name.contains("tiling"));
    (kernel && name.len() > 4 && !word.contains("op_host")).then(|| name.to_string())
}

/// The abbreviations the ledger's Sources paragraphs define, each with the kernel files it
/// stands for: `**A** is ... `path``, `**A** `file``, `**A** and **B** are ... `p` and
/// `q`` (paired in order). A name defined without a file of its own (`**DQ-db-8.5** the file
/// at v8.5.0`) stands for the files of the name it extends (`DQ-db`).
fn abbreviations(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for para in text
        .split("\n\n")
        .filter(|p| !p.trim_start().starts_with('|'))
    {
        let pieces: Vec<&str> = para.split("**").collect();
        // pieces[1], [3], ... are bold names; each is followed by its text up to the next name.
        let mut i = 1;
        while i + 1 < pieces.len() {
            let mut names = vec![pieces[i].to_string()];
            let mut body = pieces[i + 1];
            while body.trim() == "and" && i + 3 < pieces.len() {
                i += 2;
                names.push(pieces[i].to_string());
                body = pieces[i + 1];
            }
            i += 2;
            if !names
                .iter()
                .all(|n| n.contains('-') || n.chars().all(|c| c.is_ascii_uppercase()))
            {
                continue;
            }
            let files: Vec<String> = body
                .split('`')
                .skip(1)
                .step_by(2)
                .filter_map(kernel_file)
                .collect();
            if names.len() > 1 && files.len() >= names.len() {
                for (n, f) in names.iter().zip(&files) {
                    map.entry(n.clone()).or_default().push(f.clone());
                }
            } else {
                for n in names {
                    map.entry(n).or_default().extend(files.iter().cloned());
                }
            }
        }
    }
    let bare: Vec<String> = map
        .iter()
        .filter(|(_, f)| f.is_empty())
        .map(|(n, _)| n.clone())
        .collect();
    for n in bare {
        let parent = map
            .iter()
            .filter(|(p, f)| !f.is_empty() && n.starts_with(&format!("{p}-")))
            .max_by_key(|(p, _)| p.len())
            .map(|(_, f)| f.clone());
        if let Some(f) = parent {
            map.insert(n, f);
        }
    }
    map.retain(|_, f| !f.is_empty());
    map
}

/// No `confirmed` row cites a kernel the dispatch does not pick for the cases that rely on it:
/// for every suite case whose op's dispatch is modelled, each confirmed row of the preset it
/// lands on that cites CANN kernel files (written out or through an abbreviation of the Sources
/// paragraphs) names one of the variant's own kernel files among them, whole file names
/// compared, or a base header they share (`<prefix>_base.h`, the prefix starting the kernel's
/// name).
#[test]
fn confirmed_rows_cite_the_kernel_their_cases_run() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cases = conform_harness::suite::select::load_all(&root.join("suites")).unwrap();
    let abbr = abbreviations(ledger::LEDGER_TEXT);
    for (a, f) in [
        ("QMM-opt", "quant_batch_matmul_v3_pertoken_opt.h"),
        ("DQ-multi-row", "dynamic_quant_multi_row.h"),
        ("MOE-combine-A2", "moe_distribute_combine_a2.h"),
    ] {
        assert!(
            abbr.get(a).is_some_and(|v| v.iter().any(|x| x == f)),
            "the Sources abbreviation {a} resolves to {f}: {:?}",
            abbr.get(a)
        );
    }
    let mut bad = BTreeSet::new();
    let mut checked = BTreeSet::new();
    for c in &cases {
        let Some(model) = ledger::case_model(&c.op, &c.recipe, &c.params) else {
            continue;
        };
        let Some(d) = model.dispatch.as_ref().filter(|d| d.variant.modelled()) else {
            continue;
        };
        let own_files = cited_kernel_files(d.variant.kernel, &BTreeMap::new());
        assert!(
            !own_files.is_empty(),
            "variant {} names its kernel file",
            d.variant.id
        );
        let own = format!(
            "{}.{}.",
            conform_reference::fidelity::knob_family(&c.op),
            d.variant.preset
        );
        for k in &model.knobs {
            let Some(row) = k.row.filter(|r| r.status == Status::Confirmed) else {
                continue;
            };
            // A variant's own row cites the tiling that selects the kernel, which the test
            // above checks; the kernel entry it may name includes every variant.
            let cited = cited_kernel_files(&row.source, &abbr);
            if !k.knob.id.starts_with(&own) || k.knob.id.ends_with(".variant") || cited.is_empty() {
                continue;
            }
            checked.insert(row.id.clone());
            let runs = cited.iter().any(|f| {
                own_files.contains(f)
                    || f.strip_suffix("_base.h")
                        .is_some_and(|p| own_files.iter().any(|o| o.starts_with(p)))
            });
            if !runs {
                bad.insert(format!(
                    "{} (line {}): case {} runs {own_files:?}, the row cites {cited:?}",
                    row.id, row.line, c.id
                ));
            }
        }
    }
    for family in ["dynq.", "qmm.", "moe.", "mc2.", "fa.", "c8."] {
        assert!(
            checked.iter().any(|id| id.starts_with(family)),
            "no confirmed {family}* row citing a kernel was checked: {checked:?}"
        );
    }
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
