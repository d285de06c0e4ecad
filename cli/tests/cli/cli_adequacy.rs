//! `conform adequacy`: the quick tier kills every required fault of the catalogue (exit 0,
//! JSON with kill rate 1.0 for each), and a suite that loses the case which catches a fault
//! makes adequacy name that fault and exit 1.

use conform_reference::faults::{self, Requirement};

use crate::cli;
// `conform` with no root or required targets inherited from the caller's environment.
use cli::{conform_clean as conform, repo, text};

use crate::copy_dir;
use copy_dir::copy_dir;

#[test]
fn quick_tier_kills_every_required_fault_on_fresh_seed_sets() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("a.json");
    let o = conform(
        &repo(),
        &[
            "adequacy",
            "--seed",
            "20261125",
            "--seed-sets",
            "2",
            "--quiet",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("kill matrix"), "{}", text(&o));
    let a: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(a["format"], "conform-adequacy-v1");
    assert_eq!(a["seed_sets"].as_array().unwrap().len(), 3);
    let listed = a["faults"].as_array().unwrap();
    let catalogue = faults::catalogue();
    assert_eq!(listed.len(), catalogue.len());
    for f in catalogue {
        let entry = listed
            .iter()
            .find(|e| e["name"] == f.name)
            .unwrap_or_else(|| panic!("{} missing from the JSON", f.name));
        if f.requirement == Requirement::Quick {
            assert_eq!(entry["kill_rate"], 1.0, "{}: {entry}", f.name);
            assert_eq!(entry["killed_sets"], 3, "{}", f.name);
            assert!(!entry["killed_by"].as_array().unwrap().is_empty());
        }
    }
    assert!(a["required_survivors"].as_array().unwrap().is_empty());
}

#[test]
fn removing_the_case_that_catches_a_fault_names_the_survivor_and_exits_1() {
    let d = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("suites"), &d.path().join("suites"));
    copy_dir(&repo().join("golden"), &d.path().join("golden"));
    // Before: the tail-tile case kills the fault.
    let args = [
        "adequacy",
        "--suite",
        "mc2_matmul_allreduce",
        "--fault",
        "mc2-tail-tile-dropped",
        "--seed",
        "3",
        "--seed-sets",
        "1",
        "--quiet",
    ];
    let o = conform(d.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Remove the cases whose last M tile is short (the tail-tile case and the ring witnesses
    // over two tiles).
    let path = d.path().join("suites/mc2_matmul_allreduce.toml");
    let mut suite = std::fs::read_to_string(&path).unwrap();
    for name in [
        "f16/r4-m37-k32-n48/ring-tail-tile",
        "bf16/r8-m9-k7-n40/ring-tiled-witnesses",
    ] {
        let start = suite.find(&format!("name = \"{name}\"")).unwrap();
        let start = suite[..start].rfind("[[case]]").unwrap();
        let end = start + suite[start + 1..].find("[[").unwrap() + 1;
        suite = format!("{}{}", &suite[..start], &suite[end..]);
    }
    std::fs::write(&path, suite).unwrap();
    let o = conform(d.path(), &args);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("required fault `mc2-tail-tile-dropped` survives"),
        "{t}"
    );
    assert!(t.contains("SURVIVES"), "{t}");
}

#[test]
fn unknown_fault_and_bad_discriminates_are_usage_errors() {
    let o = conform(&repo(), &["adequacy", "--fault", "no-such-fault"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("no-such-fault"), "{}", text(&o));
    let d = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("suites"), &d.path().join("suites"));
    copy_dir(&repo().join("golden"), &d.path().join("golden"));
    let path = d.path().join("suites/paged_kv.toml");
    let suite = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        suite.replace(
            "description = \"edge: one decode token\"",
            "description = \"edge: one decode token\"\ndiscriminates = [\"kv-typo\"]",
        ),
    )
    .unwrap();
    let o = conform(d.path(), &["list"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("paged_kv.toml") && t.contains("kv-typo"), "{t}");
}

#[test]
fn list_faults_shows_the_catalogue() {
    let o = conform(&repo(), &["adequacy", "--list-faults"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = text(&o);
    for f in faults::catalogue() {
        assert!(t.contains(f.name), "{} not listed", f.name);
    }
}

#[test]
fn the_matrix_goes_into_its_own_page_and_the_run_report() {
    let d = tempfile::tempdir().unwrap();
    let (json, page) = (d.path().join("a.json"), d.path().join("adequacy"));
    let o = conform(
        &repo(),
        &[
            "adequacy",
            "--suite",
            "paged_kv",
            "--fault",
            "kv-slot-off-by-one",
            "--seed",
            "5",
            "--quiet",
            "--json",
            json.to_str().unwrap(),
            "--report",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let html = std::fs::read_to_string(page.join("index.html")).unwrap();
    assert!(html.contains("Fault adequacy") && html.contains("kv-slot-off-by-one"));
    let results = d.path().join("r.json");
    let o = conform(
        &repo(),
        &[
            "run",
            "--suite",
            "paged_kv",
            "--json",
            results.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = d.path().join("report");
    let o = conform(
        &repo(),
        &[
            "report",
            "--input",
            results.to_str().unwrap(),
            "--adequacy",
            json.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("href=\"#adequacy\"") && html.contains("kv-slot-off-by-one"));
    // A damaged matrix file is a clear error naming it, not a panic.
    std::fs::write(&json, "{ not json").unwrap();
    let o = conform(
        &repo(),
        &[
            "report",
            "--input",
            results.to_str().unwrap(),
            "--adequacy",
            json.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("a.json"), "{}", text(&o));
}

/// The journal of finished cells lives beside what the user asked for: beside `--json`, else
/// in the `--report` directory, and nowhere without either (nothing appears in the working
/// directory); it is removed once the outputs are written.
#[test]
fn the_journal_lives_beside_the_outputs_and_goes_once_they_are_written() {
    let d = tempfile::tempdir().unwrap();
    let args = [
        "adequacy",
        "--suite",
        "pa_decode",
        "--fault",
        "pa-last-partial-block-dropped",
        "--fault",
        "pa-read-one-past-length",
        "--seed",
        "1",
        "--quiet",
    ];
    let mut cmd = cli::command(&repo(), &args, &["CONFORM_ROOT", "CONFORM_REQUIRE_TARGETS"]);
    cmd.current_dir(d.path());
    let o = cli::output(cmd);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "written without being asked: {left:?}");
    let report = d.path().join("rep");
    let mut with_report = args.to_vec();
    with_report.extend(["--report", report.to_str().unwrap()]);
    let o = conform(&repo(), &with_report);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(report.join("index.html").exists());
    assert!(!report.join("adequacy.json.journal").exists());
}

/// `conform report --input` on an adequacy journal: one holding no finished cell is recovered
/// and says nothing was judged (exit 4); other inputs beside it are refused (exit 2).
#[test]
fn an_adequacy_journal_is_recovered_on_its_own() {
    let d = tempfile::tempdir().unwrap();
    let journal = d.path().join("a.json.journal");
    std::fs::write(
        &journal,
        r#"{"adequacy_journal": 1, "conform_version": "0", "started_at": "t",
            "seed_sets": [{"index": 0, "seed": null}],
            "faults": ["pa-last-partial-block-dropped"], "suites": ["pa_decode"],
            "ops": ["pa_decode"], "gates_quick": true}"#
            .replace('\n', "")
            + "\n",
    )
    .unwrap();
    let out = d.path().join("rec");
    let o = conform(
        &repo(),
        &[
            "report",
            "--input",
            journal.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("adequacy.json")).unwrap()).unwrap();
    assert_eq!(m["unfinished"].as_array().unwrap().len(), 1, "{m}");
    assert!(m["interrupted"].as_str().unwrap().contains("SIGKILL"));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("INTERRUPTED"));
    let o = conform(
        &repo(),
        &[
            "report",
            "--input",
            journal.to_str().unwrap(),
            "--perf",
            "p.json",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("on its own"), "{}", text(&o));
}

/// A scratch copy of the repository's suites and golden store with `edit` applied to
/// suites/`file`.
fn project_with(file: &str, edit: impl Fn(String) -> String) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("suites"), &d.path().join("suites"));
    copy_dir(&repo().join("golden"), &d.path().join("golden"));
    let path = d.path().join("suites").join(file);
    let suite = std::fs::read_to_string(&path).unwrap();
    let edited = edit(suite.clone());
    assert_ne!(edited, suite, "the edit changed nothing");
    std::fs::write(&path, edited).unwrap();
    d
}

#[test]
fn the_regime_map_lists_the_attention_regimes_and_a_thin_one_is_a_hole() {
    // The repository's quick tier reaches every regime of the decode suite with two cases or
    // more.
    let o = conform(
        &repo(),
        &[
            "adequacy",
            "--suite",
            "pa_decode",
            "--fault",
            "attn-lse-wrong-on-empty-rows",
            "--quiet",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("pa_decode")
            && t.contains("regimes: large_logits (2), late_max (2), masked_rows_lse (2)"),
        "{t}"
    );
    assert!(t.contains("paths: odd_heads (2)"), "{t}");
    assert!(!t.contains("HOLE"), "{t}");
    // Without the bf16 case's declaration, the f16 case alone holds the constructed regimes:
    // each is a hole that names it, exit 1. The structural regimes stay reached by the shapes
    // that hold them.
    let d = project_with("pa_decode.toml", |s| {
        s.replace(
            "regimes = [\"large_logits\", \"late_max\", \"masked_rows_lse\", \"batch_distinct\", \"seq_ne_heads\", \"gqa_groups\"]\n",
            "",
        )
    });
    let json = d.path().join("a.json");
    let o = conform(
        d.path(),
        &[
            "adequacy",
            "--suite",
            "pa_decode",
            "--fault",
            "attn-lse-wrong-on-empty-rows",
            "--quiet",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    for r in ["large_logits", "late_max", "masked_rows_lse"] {
        assert!(
            t.contains(&format!(
                "regime {r}: 1 case (pa_decode/f16/b3-hq6-hkv3-d64-bs16/regimes-logits-late-empty)  <- HOLE"
            )),
            "{t}"
        );
    }
    assert!(!t.contains("regime gqa_groups:"), "{t}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["regimes"][0]["suite"], "pa_decode");
    assert!(r["regimes"][0]["missing"].as_array().unwrap().is_empty());
    let covered = r["regimes"][0]["covered"].as_array().unwrap();
    let late = covered.iter().find(|c| c["regime"] == "late_max").unwrap();
    assert_eq!(late["cases"].as_array().unwrap().len(), 1);
    assert!(r["regimes"][0]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "odd_heads"));
}

#[test]
fn a_regime_the_shape_cannot_hold_or_an_unknown_one_stops_the_suites_naming_it() {
    let case = "fa_prefill/bf16/b2-s16-kv200-hq4-hkv2-d64/regimes-logits-late-empty";
    let d = project_with("fa_prefill.toml", |s| {
        s.replace(
            "kv_seq = 200, num_heads = 4, num_key_value_heads = 2, head_dim = 64, atten_mask = true, softmax_lse_flag = true }",
            "kv_seq = 200, num_heads = 4, num_key_value_heads = 2, head_dim = 64, atten_mask = true }",
        )
    });
    let o = conform(d.path(), &["list"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("fa_prefill.toml")
            && t.contains(case)
            && t.contains("regime `masked_rows_lse`: needs softmax_lse_flag = true"),
        "{t}"
    );
    let d = project_with("fa_prefill.toml", |s| {
        s.replacen("\"late_max\"", "\"late_maximum\"", 1)
    });
    let o = conform(d.path(), &["list"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("no regime `late_maximum`") && t.contains(case),
        "{t}"
    );
    // explain lists a case's regimes.
    let o = conform(&repo(), &["explain", case]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = text(&o);
    for r in ["large_logits", "late_max", "masked_rows_lse"] {
        assert!(t.contains(&format!("regime      {r}: ")), "{t}");
    }
}
