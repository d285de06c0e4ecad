//! The perf history workflow shared by the SQLite and the PostgreSQL tests: ingest 23 nights
//! (a +12% step at night 13), list, show with the change point and its commits, export CSV,
//! gate night 24 against the new segment, a slower run, and changed op parameters.

use std::path::Path;
use std::process::{Command, Output};

/// `conform ARGS...` run in `dir`, in the caller's environment.
pub fn conform(args: &[&str], dir: &Path) -> Output {
    Command::new(crate::cli::binary())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

// Stdout then stderr, as one text.
pub use crate::cli::text;

/// A deterministic spread of about +-2% around `level`.
pub fn samples(level: f64, n: usize, salt: usize) -> Vec<f64> {
    (0..n)
        .map(|i| level * (1.0 + 0.02 * ((((i + salt) * 7919) % 101) as f64 / 50.0 - 1.0)))
        .collect()
}

/// Night `k` (1-based) of two cases; `fa` steps from 100 to `fa_after` us at night `step`.
pub fn write_night(dir: &Path, k: usize, step: usize, fa_after: f64) -> std::path::PathBuf {
    let fa = if k >= step { fa_after } else { 100.0 };
    let file = serde_json::json!({
        "schema": "conform-perf/1",
        "environment": {
            "commit": format!("{k:02}{}", "c".repeat(38)),
            "date": format!("2026-10-{k:02}T02:00:00Z"),
            "versions": {"cann": "8.0.RC3", "torch_npu": "2.1.0.post8"},
            "device": "Atlas 800I A2",
            "tier": "full",
            "seed": "cases"
        },
        "cases": [
            {"id": "fa/x", "target": "t", "hardware": "hw", "samples_us": samples(fa, 30, k),
             "params_digest": "aaaa"},
            {"id": "pa/y", "target": "t", "hardware": "hw", "samples_us": samples(50.0, 30, 3 * k)}
        ]
    });
    let p = dir.join(format!("night{k:02}.json"));
    std::fs::write(&p, serde_json::to_string_pretty(&file).unwrap()).unwrap();
    p
}

/// The whole workflow against the history at `db` (a file in `d`, or a PostgreSQL URL), run in
/// the directory `d`.
pub fn ingest_list_show_export_and_gate(d: &Path, db: &str) {
    ingest_23_nights_once(d, db);
    list_shows_both_series(d, db);
    show_finds_the_step_with_its_commits(d, db);
    export_writes_one_csv_row_per_sample(d, db);
    gate_judges_against_the_newest_segment(d, db);
    gate_flags_a_slower_night_and_skips_changed_params(d, db);
}

/// Writes nights 1 to 24 (a +12% step at night 13) and ingests 1 to 23; the same file again
/// adds nothing.
fn ingest_23_nights_once(d: &Path, db: &str) {
    let files: Vec<String> = (1..=24)
        .map(|k| {
            write_night(d, k, 13, 112.0)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut args = vec!["perf", "history", "ingest", "--db", db];
    args.extend(files[..23].iter().map(String::as_str));
    let o = conform(&args, d);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("run 23, 2 series, 60 samples"),
        "{}",
        text(&o)
    );
    // The same file again adds nothing.
    let o = conform(
        &["perf", "history", "ingest", "--db", db, "night01.json"],
        d,
    );
    assert_eq!(o.status.code(), Some(0));
    assert!(
        text(&o).contains(&format!("already in {db} as run 1")),
        "{}",
        text(&o)
    );
}

fn list_shows_both_series(d: &Path, db: &str) {
    let o = conform(&["perf", "history", "list", "--db", db], d);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("fa/x") && t.contains("pa/y") && t.contains("2 series"),
        "{t}"
    );
    assert!(
        t.lines()
            .any(|l| l.starts_with("fa/x") && l.contains(" 23 ") && l.contains(" 690 ")),
        "{t}"
    );
}

/// The step at night 13 is found, with the commits on either side.
fn show_finds_the_step_with_its_commits(d: &Path, db: &str) {
    let o = conform(&["perf", "history", "show", "--db", db, "fa/x"], d);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("slower +12.0%"), "{t}");
    assert!(
        t.contains(&format!("between commit 12{}", "c".repeat(8)))
            && t.contains(&format!("and commit 13{}", "c".repeat(8))),
        "{t}"
    );
    let o = conform(&["perf", "history", "show", "--db", db, "pa/y"], d);
    assert!(text(&o).contains("no change point"), "{}", text(&o));
    let o = conform(&["perf", "history", "show", "--db", db, "nope"], d);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("no series for case `nope`"),
        "{}",
        text(&o)
    );
}

/// CSV: a header and one row per sample, with the run's metadata.
fn export_writes_one_csv_row_per_sample(d: &Path, db: &str) {
    let o = conform(
        &[
            "perf", "history", "export", "--db", db, "--csv", "all.csv", "--case", "^fa/",
        ],
        d,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let csv = std::fs::read_to_string(d.join("all.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 23 * 30);
    assert!(lines[0].starts_with("run_id,date,commit,"));
    assert!(
        lines[1].contains(",full,cases,fa/x,t,hw,aaaa,0,"),
        "{}",
        lines[1]
    );
}

/// Night 24 is at the new level: judged against the newest segment, not the old baseline.
fn gate_judges_against_the_newest_segment(d: &Path, db: &str) {
    let o = conform(
        &[
            "perf",
            "history",
            "gate",
            "--db",
            db,
            "--candidate",
            "night24.json",
            "--json",
            "g.json",
        ],
        d,
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("2 UNCHANGED"), "{t}");
    let g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("g.json")).unwrap()).unwrap();
    assert_eq!(g["references"][0]["reference_runs"], 10);
    assert_eq!(g["references"][0]["changes"].as_array().unwrap().len(), 1);
}

/// A night 25% slower than the newest segment is a regression, named by its commits; changed
/// op parameters have no history, so nothing is judged.
fn gate_flags_a_slower_night_and_skips_changed_params(d: &Path, db: &str) {
    let slow = serde_json::json!({
        "environment": {"commit": "f".repeat(40), "date": "2026-10-30T02:00:00Z"},
        "cases": [{"id": "fa/x", "target": "t", "hardware": "hw", "params_digest": "aaaa",
                   "samples_us": samples(140.0, 30, 99)}]
    });
    std::fs::write(d.join("slow.json"), slow.to_string()).unwrap();
    let o = conform(
        &[
            "perf",
            "history",
            "gate",
            "--db",
            db,
            "--candidate",
            "slow.json",
        ],
        d,
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains(&format!("between commit 23{}", "c".repeat(8)))
            && t.contains(&format!("and commit {}", "f".repeat(10))),
        "{t}"
    );
    // Changed op parameters: no history for them, nothing judged.
    let other = serde_json::json!({
        "cases": [{"id": "fa/x", "target": "t", "hardware": "hw", "params_digest": "bbbb",
                   "samples_us": samples(140.0, 30, 1)}]
    });
    std::fs::write(d.join("other.json"), other.to_string()).unwrap();
    let o = conform(
        &[
            "perf",
            "history",
            "gate",
            "--db",
            db,
            "--candidate",
            "other.json",
        ],
        d,
    );
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
}
