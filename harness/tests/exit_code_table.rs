//! The exit codes are documented in one table, repeated word for word in README.md and
//! docs/results.md, and that table lists exactly the codes `metadata/src/exit_code.rs`
//! defines: a code added, removed or renumbered in the code without the table fails here.

use conform_harness::exit_code;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The rows of the `| code | meaning |` table in `file`.
fn table(file: &str) -> Vec<String> {
    let path = repo().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut lines = text
        .lines()
        .skip_while(|l| l.trim() != "| code | meaning |");
    assert!(
        lines.next().is_some(),
        "{file}: no `| code | meaning |` table"
    );
    lines
        .skip(1) // |---|---|
        .take_while(|l| l.starts_with('|'))
        .map(str::to_string)
        .collect()
}

/// The codes a table row documents: its first cell, `130 / 143` naming two.
fn codes(rows: &[String]) -> BTreeSet<i32> {
    rows.iter()
        .flat_map(|r| {
            let cell = r.trim_start_matches('|').split('|').next().unwrap();
            cell.split('/')
                .map(|c| {
                    c.trim()
                        .parse::<i32>()
                        .unwrap_or_else(|e| panic!("row {r:?}: code {c:?}: {e}"))
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn readme_and_results_doc_carry_the_same_table_of_exactly_the_codes_the_binary_uses() {
    let readme = table("README.md");
    let results = table("docs/results.md");
    assert_eq!(readme, results, "README.md and docs/results.md disagree");

    let defined = [
        exit_code::SUCCESS,
        exit_code::FAILURE,
        exit_code::USAGE,
        exit_code::NOTHING_JUDGED,
        exit_code::BROKEN_PIPE,
        exit_code::INTERRUPTED_SIGINT,
        exit_code::INTERRUPTED_SIGTERM,
    ];
    // Every constant of exit_code.rs is in the list above, so none escapes the comparison.
    let source = std::fs::read_to_string(repo().join("metadata/src/exit_code.rs")).unwrap();
    let declared = source
        .lines()
        .filter(|l| l.trim_start().starts_with("pub const") && l.contains(": i32"))
        .count();
    assert_eq!(
        declared,
        defined.len(),
        "exit_code.rs declares codes this test does not know"
    );

    let documented = codes(&readme);
    let defined: BTreeSet<i32> = defined.into_iter().collect();
    assert_eq!(documented, defined, "the table and exit_code.rs disagree");
}
