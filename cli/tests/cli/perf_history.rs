//! `conform perf history`: ingest, list, show (with change points), export and gate through
//! the CLI, and the refusals: a damaged file, another application's database, a newer schema,
//! an unreachable PostgreSQL server — each exit 2 with the file named, and the file left byte for byte as it
//! was.

use crate::history_scenario;
use history_scenario::{conform, text, write_night};
use std::path::Path;

#[test]
fn ingest_list_show_export_and_gate() {
    let dir = tempfile::tempdir().unwrap();
    history_scenario::ingest_list_show_export_and_gate(dir.path(), "h.sqlite");
}

fn assert_refused(d: &Path, file: &str, want: &str) {
    let before = std::fs::read(d.join(file)).unwrap();
    for args in [
        vec!["perf", "history", "ingest", "--db", file, "n.json"],
        vec!["perf", "history", "list", "--db", file],
        vec![
            "perf",
            "history",
            "gate",
            "--db",
            file,
            "--candidate",
            "n.json",
        ],
    ] {
        let o = conform(&args, d);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains(file) && t.contains(want), "{args:?}: {t}");
        assert!(!t.contains("panicked"), "{t}");
        assert_eq!(
            std::fs::read(d.join(file)).unwrap(),
            before,
            "{file} was changed"
        );
    }
}

#[test]
fn damaged_foreign_and_newer_files_are_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_night(d, 1, 99, 100.0);
    std::fs::rename(d.join("night01.json"), d.join("n.json")).unwrap();

    std::fs::write(
        d.join("garbage.sqlite"),
        b"this is not a database, just text".repeat(200),
    )
    .unwrap();
    assert_refused(d, "garbage.sqlite", "not a SQLite database");

    let foreign = rusqlite::Connection::open(d.join("foreign.sqlite")).unwrap();
    foreign
        .execute_batch("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5);")
        .unwrap();
    drop(foreign);
    assert_refused(
        d,
        "foreign.sqlite",
        "not a conform perf history (its tables: invoices)",
    );

    let o = conform(
        &[
            "perf",
            "history",
            "ingest",
            "--db",
            "newer.sqlite",
            "n.json",
        ],
        d,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let c = rusqlite::Connection::open(d.join("newer.sqlite")).unwrap();
    c.execute(
        "UPDATE conform_history SET value = '99' WHERE key = 'schema_version'",
        [],
    )
    .unwrap();
    drop(c);
    assert_refused(d, "newer.sqlite", "schema version 99 is newer");

    let o = conform(&["perf", "history", "list", "--db", "absent.sqlite"], d);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("absent.sqlite: no such perf history"),
        "{}",
        text(&o)
    );
    assert!(!d.join("absent.sqlite").exists(), "a read created the file");

    // An unreachable PostgreSQL server: named (its password hidden), exit 2.
    let o = conform(
        &[
            "perf",
            "history",
            "ingest",
            "--db",
            "postgres://ci:secret@127.0.0.1:1/perf",
            "n.json",
        ],
        d,
    );
    assert_eq!(o.status.code(), Some(2));
    let t = text(&o);
    assert!(
        t.contains("postgres://ci:***@127.0.0.1:1/perf: cannot connect to the PostgreSQL server"),
        "{t}"
    );
    assert!(!t.contains("secret"), "{t}");

    // A bad perf file is refused before the store is created.
    std::fs::write(d.join("bad.json"), "{\"cases\": [{\"id\": 1}]}").unwrap();
    let o = conform(
        &[
            "perf",
            "history",
            "ingest",
            "--db",
            "new.sqlite",
            "bad.json",
        ],
        d,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("bad.json"), "{}", text(&o));
    assert!(!d.join("new.sqlite").exists());
}

/// A perf file with no case is refused with exit 4 before the store is touched (the default
/// store is not even created); the default store is the nightly script's
/// (`perf-history/perf-history.sqlite`), and `export` writes to standard output by default.
#[test]
fn a_file_without_a_case_records_nothing_and_the_default_store_is_the_nightly_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("empty.json"), r#"{"cases": []}"#).unwrap();
    let o = conform(&["perf", "history", "ingest", "empty.json"], d);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(text(&o).contains("holds no case"), "{}", text(&o));
    assert!(!d.join("perf-history").exists(), "a store was created");

    write_night(d, 1, 99, 100.0);
    let o = conform(&["perf", "history", "ingest", "night01.json"], d);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(d.join("perf-history/perf-history.sqlite").is_file());
    let o = conform(&["perf", "history", "export", "--case", "^fa/"], d);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let csv = String::from_utf8_lossy(&o.stdout);
    assert!(csv.starts_with("run_id,date,commit"), "{csv}");
    assert_eq!(csv.lines().count(), 1 + 30, "{csv}");
}

/// Night `k` of case `fa/x` on `commit`, at `level` us.
fn night_on(d: &Path, k: usize, commit: &str, level: f64) -> String {
    let file = serde_json::json!({
        "environment": {"commit": commit, "date": format!("2026-10-{k:02}T02:00:00Z")},
        "cases": [{"id": "fa/x", "target": "t", "hardware": "hw",
                   "samples_us": history_scenario::samples(level, 30, k)}]
    });
    let name = format!("same{k:02}.json");
    std::fs::write(d.join(&name), serde_json::to_string(&file).unwrap()).unwrap();
    name
}

/// Nights on one commit whose level moves by 30% are environment drift for the gate and for
/// `show`: never "a REGRESSION between commit X and commit X".
#[test]
fn a_move_on_the_same_commit_is_drift_never_a_regression_between_a_commit_and_itself() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let commit = "ab".repeat(20);
    let names: Vec<String> = (1..=3).map(|k| night_on(d, k, &commit, 100.0)).collect();
    let mut args = vec!["perf", "history", "ingest", "--db", "h.sqlite"];
    args.extend(names.iter().map(String::as_str));
    assert_eq!(conform(&args, d).status.code(), Some(0));
    let slow = night_on(d, 4, &commit, 130.0);
    let o = conform(
        &[
            "perf",
            "history",
            "gate",
            "--db",
            "h.sqlite",
            "--candidate",
            &slow,
        ],
        d,
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("DRIFT fa/x [t]: environment drift: the same commit"),
        "{t}"
    );
    assert!(!t.contains("REGRESSION fa/x"), "{t}");
    let o = conform(&["perf", "history", "ingest", "--db", "h.sqlite", &slow], d);
    assert_eq!(o.status.code(), Some(0));
    let o = conform(&["perf", "history", "show", "--db", "h.sqlite", "fa/x"], d);
    let t = text(&o);
    assert!(t.contains("no run flagged by the gate"), "{t}");
    assert!(t.contains("DRIFT +30."), "{t}");
    assert!(!t.contains("REGRESSION"), "{t}");
}

/// With distinct commits, a move inside the spread learned from earlier nights is drift, and
/// one far outside it a REGRESSION that names the band.
#[test]
fn the_learned_night_to_night_spread_tells_drift_from_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Eight nights whose whole run moves by up to +-15% (a shared runner).
    let levels = [100.0, 115.0, 88.0, 108.0, 93.0, 112.0, 86.0, 104.0];
    let names: Vec<String> = levels
        .iter()
        .enumerate()
        .map(|(i, l)| night_on(d, i + 1, &format!("{:040x}", i + 1), *l))
        .collect();
    let mut args = vec!["perf", "history", "ingest", "--db", "h.sqlite"];
    args.extend(names.iter().map(String::as_str));
    assert_eq!(conform(&args, d).status.code(), Some(0));
    let gate = |level: f64, k: usize| {
        let n = night_on(d, k, &format!("{k:040x}"), level);
        let o = conform(
            &[
                "perf",
                "history",
                "gate",
                "--db",
                "h.sqlite",
                "--candidate",
                &n,
            ],
            d,
        );
        (o.status.code(), text(&o))
    };
    // +16%: its own interval moves, the nights' spread holds it.
    let (code, t) = gate(116.0, 9);
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("inside the nights' spread"), "{t}");
    // Three times slower: outside both.
    let (code, t) = gate(300.0, 10);
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("outside the nights' spread"), "{t}");
}

/// Runs of one case id whose op parameters changed (another `params_digest`) are another
/// case: `history show` analyses the series with its newest parameters only and says how many
/// runs it left out; before, it cut the two cases' runs into one series and flagged the change
/// of parameters as a REGRESSION.
#[test]
fn show_never_analyses_a_series_across_a_change_of_its_op_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut names = Vec::new();
    for k in 1..=8 {
        let (digest, level) = if k <= 4 {
            ("aaaa", 100.0)
        } else {
            ("bbbb", 200.0)
        };
        let file = serde_json::json!({
            "environment": {"commit": format!("{k:040x}"), "date": format!("2026-10-{k:02}T02:00:00Z")},
            "cases": [{"id": "fa/x", "target": "t", "hardware": "hw", "params_digest": digest,
                       "samples_us": history_scenario::samples(level, 30, k)}]
        });
        let name = format!("p{k:02}.json");
        std::fs::write(d.join(&name), serde_json::to_string(&file).unwrap()).unwrap();
        names.push(name);
    }
    let mut args = vec!["perf", "history", "ingest", "--db", "h.sqlite"];
    args.extend(names.iter().map(String::as_str));
    assert_eq!(conform(&args, d).status.code(), Some(0));
    let o = conform(&["perf", "history", "show", "--db", "h.sqlite", "fa/x"], d);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains("4 run(s) of this series were timed with other op parameters"),
        "{t}"
    );
    assert!(!t.contains("REGRESSION"), "{t}");
}

/// A perf file holding an absurd time (1e308 us: a broken timer or a corrupt file) is refused
/// by `history ingest` and `history gate` with exit 2, naming the file, the field and the
/// sample, and the store is left as it was; before, 1e308 was a finite time > 0, so ingest
/// stored it and the history's means could overflow.
#[test]
fn ingest_and_gate_refuse_absurd_samples_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_night(d, 1, 99, 100.0);
    let ok = conform(
        &[
            "perf",
            "history",
            "ingest",
            "--db",
            "h.sqlite",
            "night01.json",
        ],
        d,
    );
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));
    let before = std::fs::read(d.join("h.sqlite")).unwrap();
    for (name, bad) in [("huge.json", 1e308), ("over.json", 2e12)] {
        let mut samples = history_scenario::samples(100.0, 30, 2);
        samples[3] = bad;
        let file = serde_json::json!({
            "environment": {"commit": format!("{:040x}", 2), "date": "2026-10-02T02:00:00Z"},
            "cases": [{"id": "fa/x", "target": "t", "hardware": "hw", "samples_us": samples}]
        });
        std::fs::write(d.join(name), serde_json::to_string(&file).unwrap()).unwrap();
        for verb in ["ingest", "gate"] {
            let args: Vec<&str> = if verb == "ingest" {
                vec!["perf", "history", "ingest", "--db", "h.sqlite", name]
            } else {
                vec![
                    "perf",
                    "history",
                    "gate",
                    "--db",
                    "h.sqlite",
                    "--candidate",
                    name,
                ]
            };
            let o = conform(&args, d);
            let t = text(&o);
            assert_eq!(o.status.code(), Some(2), "{verb} {name}: {t}");
            assert!(
                t.contains(name) && t.contains("samples_us") && t.contains("[3]"),
                "{verb} {name}: {t}"
            );
            assert!(!t.contains("panicked"), "{t}");
            assert_eq!(
                std::fs::read(d.join("h.sqlite")).unwrap(),
                before,
                "{verb} {name} changed the store"
            );
        }
    }
}
