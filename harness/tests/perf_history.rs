//! `conform perf history`: ingest, list, show (with change points), export and gate through
//! the CLI, and the refusals: a damaged file, another application's database, a newer schema,
//! an unreachable PostgreSQL server — each exit 2 with the file named, and the file left byte for byte as it
//! was.

#[path = "support/history_scenario.rs"]
mod history_scenario;
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
