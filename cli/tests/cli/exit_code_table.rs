//! The exit codes are documented in one table, repeated word for word in README.md and
//! docs/results.md, and that table lists exactly the codes `metadata/src/exit_code.rs`
//! defines: a code added, removed or renumbered in the code without the table fails here.
//! Then each row of the table, run: the binary exits with the row's code for what the row
//! says (0, 1 with an output lost after the work, 2, 4 here; 130 / 143 and 141 in the tests
//! named by `signal_and_pipe_rows_have_their_tests`).

use crate::cli;
use crate::copy_dir;

use cli::{command, conform, repo, text};
use conform_harness::exit_code;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

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
        exit_code::INCONCLUSIVE,
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

/// Asserts `o` exited with `code`; the message shows everything it printed.
fn exits(o: &Output, code: i32, what: &str) {
    assert_eq!(o.status.code(), Some(code), "{what}: {}", text(o));
}

#[test]
fn row_0_a_command_that_succeeded_or_cases_that_all_passed() {
    let root = repo();
    exits(&conform(&root, &["list", "--suite", "paged_kv"]), 0, "list");
    let o = conform(&root, &["run", "--suite", "paged_kv"]);
    exits(&o, 0, "run");
    assert!(text(&o).contains("PASSED"), "{}", text(&o));
}

#[test]
fn row_1_a_failed_case_and_a_performance_regression() {
    let root = repo();
    let o = conform(&root, &["run", "--suite", "paged_kv", "--max-memory", "1K"]);
    exits(&o, 1, "a case over the memory limit");
    let fixture = |p: &str| root.join("cli/tests/fixtures/perf").join(p);
    let o = conform(
        &root,
        &[
            "perf",
            "compare",
            "--baseline",
            fixture("baseline.json").to_str().unwrap(),
            "--candidate",
            fixture("slowdown_10pct.json").to_str().unwrap(),
        ],
    );
    exits(&o, 1, "a 10% slowdown");
}

#[test]
fn row_3_a_comparison_with_a_case_it_could_not_judge() {
    let root = repo();
    let fixture = |p: &str| root.join("cli/tests/fixtures/perf").join(p);
    let o = conform(
        &root,
        &[
            "perf",
            "compare",
            "--baseline",
            fixture("baseline.json").to_str().unwrap(),
            "--candidate",
            fixture("three_samples.json").to_str().unwrap(),
        ],
    );
    exits(&o, 3, "three samples: INCONCLUSIVE");
    assert!(text(&o).contains("INCONCLUSIVE"), "{}", text(&o));
}

/// `run` and `perf record`: `--keep-outputs K` creates `K/paged_kv/...` directories while the
/// cases run, so a results file named `K/paged_kv` passes the check before the work and finds
/// a directory in its place after it: exit 1, not 2, naming the path, the cases' summary
/// printed and the run's other output (JUnit) still written.
#[test]
fn row_1_an_output_that_cannot_be_written_after_the_cases_ran() {
    let d = tempfile::tempdir().unwrap();
    let keep = d.path().join("keep");
    std::fs::create_dir(&keep).unwrap();
    let json = keep.join("paged_kv");
    let junit = d.path().join("r.xml");
    let o = conform(
        &repo(),
        &[
            "run",
            "--suite",
            "paged_kv",
            "--keep-outputs",
            keep.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    exits(&o, 1, "run whose --json became a directory");
    let t = text(&o);
    assert!(
        t.contains("PASSED") && t.contains("total"),
        "the cases ran: {t}"
    );
    assert!(
        t.contains(&format!("{}: is a directory", json.display())),
        "{t}"
    );
    assert!(std::fs::read_to_string(&junit)
        .unwrap()
        .contains("</testsuites>"));

    let keep = d.path().join("keep2");
    std::fs::create_dir(&keep).unwrap();
    let out = keep.join("paged_kv");
    let o = conform(
        &repo(),
        &[
            "perf",
            "record",
            "--suite",
            "paged_kv",
            "--iterations",
            "1",
            "--warmup",
            "0",
            "--keep-outputs",
            keep.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
    );
    exits(&o, 1, "perf record whose --out became a directory");
    assert!(
        text(&o).contains(&format!("{}: ", out.display())),
        "{}",
        text(&o)
    );
}

/// Makes a FIFO at `path` (a scratch path under a temporary directory of the test).
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo of a new path under a temporary directory this test owns.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Once `child` opens the FIFO `fifo` to read its input (after it checked its output paths),
/// runs `meanwhile`, then feeds it `content`; returns the child's output.
fn feed_when_read(
    mut child: Child,
    fifo: &Path,
    meanwhile: impl FnOnce(),
    content: &[u8],
) -> Output {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let start = Instant::now();
    // Non-blocking until a reader is there (ENXIO before), so a child that ended early
    // fails the test instead of hanging it.
    let mut w = loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
        {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if let Some(status) = child.try_wait().unwrap() {
                    panic!("ended ({status}) before reading {}", fifo.display());
                }
                assert!(start.elapsed() < Duration::from_secs(60), "never read");
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("{}: {e}", fifo.display()),
        }
    };
    meanwhile();
    // SAFETY: clears O_NONBLOCK on a descriptor this test owns.
    unsafe {
        use std::os::fd::AsRawFd;
        let flags = libc::fcntl(w.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(w.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    w.write_all(content).unwrap();
    drop(w);
    output_of(child)
}

fn output_of(child: Child) -> Output {
    let o = child.wait_with_output().unwrap();
    assert!(!text(&o).contains("panicked at"), "{}", text(&o));
    o
}

/// `perf compare` and `perf history gate`: their `--json` is checked before the files are
/// read, and written after the comparison. An input read from a FIFO holds the command
/// between the two while the test puts a directory where the JSON goes: the comparison is
/// made and printed, its JSON is lost, exit 1 (it used to be 2, a usage error).
#[test]
fn row_1_a_comparison_whose_json_cannot_be_written_after_it_was_made() {
    let root = repo();
    let d = tempfile::tempdir().unwrap();
    let base = root.join("cli/tests/fixtures/perf/baseline.json");
    let content = std::fs::read(&base).unwrap();

    let fifo = d.path().join("baseline.fifo");
    mkfifo(&fifo);
    let json = d.path().join("cmp.json");
    let child = command(
        &root,
        &[
            "perf",
            "compare",
            "--baseline",
            fifo.to_str().unwrap(),
            "--candidate",
            base.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ],
        &[],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let o = feed_when_read(
        child,
        &fifo,
        || std::fs::create_dir(&json).unwrap(),
        &content,
    );
    exits(&o, 1, "perf compare whose --json became a directory");
    let t = text(&o);
    assert!(t.contains(&json.display().to_string()), "{t}");
    assert!(
        t.contains("fa_prefill/seq1024"),
        "the comparison's table: {t}"
    );

    // The history gate: a store holding the baseline, the candidate through a FIFO.
    let db = d.path().join("h.sqlite");
    let o = conform(
        &root,
        &[
            "perf",
            "history",
            "ingest",
            "--db",
            db.to_str().unwrap(),
            base.to_str().unwrap(),
        ],
    );
    exits(&o, 0, "ingest");
    let fifo = d.path().join("candidate.fifo");
    mkfifo(&fifo);
    let json = d.path().join("gate.json");
    let child = command(
        &root,
        &[
            "perf",
            "history",
            "gate",
            "--db",
            db.to_str().unwrap(),
            "--candidate",
            fifo.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ],
        &[],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let o = feed_when_read(
        child,
        &fifo,
        || std::fs::create_dir(&json).unwrap(),
        &content,
    );
    exits(&o, 1, "perf history gate whose --json became a directory");
    assert!(
        text(&o).contains(&json.display().to_string()),
        "{}",
        text(&o)
    );
}

/// `adequacy`: the kill matrix is measured, then its `--json` is found to be a directory (made
/// by the test mid-run, once a cell was journaled): exit 1, and the journal stays, named.
#[test]
fn row_1_a_kill_matrix_whose_json_cannot_be_written_after_it_was_measured() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("a.json");
    let journal = d.path().join("a.json.journal");
    let mut child = command(
        &repo(),
        &[
            "adequacy",
            "--suite",
            "paged_kv",
            "--seed-sets",
            "200",
            "--seed",
            "1",
            "--quiet",
            "--json",
            json.to_str().unwrap(),
        ],
        &[],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let start = Instant::now();
    // The header and a finished cell: the matrix is being measured.
    while std::fs::read_to_string(&journal).map_or(0, |t| t.lines().count()) < 2 {
        assert!(child.try_wait().unwrap().is_none(), "adequacy ended early");
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no cell journaled"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Held still while the directory is made, so the matrix cannot finish first.
    let pid = child.id() as libc::pid_t;
    // SAFETY: signals the child this test started and still holds (not yet waited for).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    std::fs::create_dir(&json).unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let o = output_of(child);
    exits(&o, 1, "adequacy whose --json became a directory");
    let t = text(&o);
    assert!(t.contains("a.json: is a directory"), "{t}");
    assert!(t.contains("the finished cells stay in"), "{t}");
    assert!(journal.is_file(), "the journal is the only record left");
}

#[test]
fn row_2_usage_suite_golden_store_input_file_and_output_path_errors_before_any_case() {
    let root = repo();
    let p = tempfile::tempdir().unwrap();
    for sub in ["suites", "golden"] {
        copy_dir::copy_dir(&root.join(sub), &p.path().join(sub));
    }
    std::fs::remove_file(p.path().join("golden/MANIFEST.toml")).unwrap();
    let bad_suite = tempfile::tempdir().unwrap();
    copy_dir::copy_dir(&root.join("suites"), &bad_suite.path().join("suites"));
    std::fs::create_dir(bad_suite.path().join("golden")).unwrap();
    std::fs::write(bad_suite.path().join("suites/broken.toml"), "[[case]\n").unwrap();
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("missing.json");
    let cases: [(&Path, Vec<&str>, &str); 6] = [
        (&root, vec!["run", "--filter", "("], "--filter"),
        (
            &root,
            vec!["run", "--suite", "no_such_suite"],
            "no_such_suite",
        ),
        (bad_suite.path(), vec!["list"], "broken.toml"),
        (p.path(), vec!["run", "--suite", "paged_kv"], "MANIFEST"),
        (
            &root,
            vec![
                "perf",
                "compare",
                "--baseline",
                missing.to_str().unwrap(),
                "--candidate",
                missing.to_str().unwrap(),
            ],
            "missing.json",
        ),
        (
            &root,
            // (run's own bad paths: cli_honest_exits.rs) a --json that is a directory.
            vec![
                "adequacy",
                "--suite",
                "paged_kv",
                "--json",
                d.path().to_str().unwrap(),
            ],
            "is a directory",
        ),
    ];
    for (project, args, named) in cases {
        let o = conform(project, &args);
        exits(&o, 2, &format!("{args:?}"));
        let t = text(&o);
        assert!(t.contains("error: ") && t.contains(named), "{args:?}: {t}");
        assert!(
            !t.contains("PASSED") && !t.contains("total"),
            "a case ran: {t}"
        );
    }
}

#[test]
fn row_4_nothing_judged() {
    let root = repo();
    let none = "^no case has this id$";
    for args in [
        vec!["run", "--filter", none],
        vec!["list", "--filter", none],
        vec!["golden", "verify", "--filter", none],
        vec!["adequacy", "--filter", none],
    ] {
        let o = conform(&root, &args);
        exits(&o, 4, &format!("{args:?}"));
    }
    // Every selected case skipped: a worker that is not installed.
    let p = tempfile::tempdir().unwrap();
    for sub in ["suites", "golden"] {
        copy_dir::copy_dir(&root.join(sub), &p.path().join(sub));
    }
    let ghost = p.path().join("targets/ghost");
    std::fs::create_dir_all(&ghost).unwrap();
    std::fs::write(
        ghost.join("target.toml"),
        "description = \"not installed\"\ncommand = \"/nonexistent/conform-ghost\"\nargs = []\n",
    )
    .unwrap();
    let o = conform(
        p.path(),
        &["run", "--target", "ghost", "--suite", "paged_kv"],
    );
    exits(&o, 4, "every case skipped");
    assert!(text(&o).contains("nothing judged"), "{}", text(&o));
}

/// The rows a process must be signalled or piped for have their tests beside the commands
/// they stop: each named test exists and expects the row's code.
#[test]
fn signal_and_pipe_rows_have_their_tests() {
    let rows = [
        (
            exit_code::INTERRUPTED_SIGINT,
            "cli_interrupt.rs",
            "fn sigint_with_a_hanging_worker_leaves_no_process_no_scratch_and_readable_results",
        ),
        (
            exit_code::INTERRUPTED_SIGTERM,
            "cli_interrupt.rs",
            "fn sigterm_as_ci_runners_send_it_exits_143",
        ),
        (
            exit_code::BROKEN_PIPE,
            "cli_honest_exits.rs",
            "fn a_broken_pipe_never_panics",
        ),
    ];
    for (code, file, test) in rows {
        // Beside this file (the modules of the tests/cli binary).
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/cli")
            .join(file);
        let source = std::fs::read_to_string(&path).unwrap();
        assert!(source.contains(test), "{file}: no `{test}` for exit {code}");
        assert!(
            source.contains(&code.to_string()),
            "{file} never expects exit {code}"
        );
    }
}
