//! A run never exits green having checked nothing, and never loses its results to a bad
//! output path: the "nothing judged" exit code (4) with the skip reasons printed, output paths
//! refused before any case runs, broken pipes, negative numbers, absurd MC2 shapes and a binary
//! started outside any checkout.

use std::path::Path;
use std::process::{Command, Output};

use crate::cli;
// `conform` with no root or required targets inherited from the caller's environment.
use cli::{conform_clean as conform, conform_in, repo, text};

fn no_panic(o: &Output) {
    assert!(!text(o).contains("panicked at"), "{}", text(o));
}

/// A project with the repository's suites and golden store, plus a target whose command does
/// not exist.
fn project_with_ghost_target() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["suites", "golden", "ci/hardware"] {
        copy_dir(&repo().join(sub), &dir.path().join(sub));
    }
    write_ghost_worker(&dir.path().join("targets/ghost"));
    dir
}

/// Writes `dir/target.toml`: a worker whose command does not exist.
fn write_ghost_worker(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("target.toml"),
        "description = \"a worker whose command is not installed\"\n\
         command = \"/nonexistent/conform-ghost-worker\"\nargs = []\ndevice_group = \"cpu\"\n",
    )
    .unwrap();
}

use crate::copy_dir;
use copy_dir::copy_dir;

#[test]
fn a_run_on_an_unavailable_worker_judges_nothing_exits_4_and_prints_why() {
    let p = project_with_ghost_target();
    let o = conform(
        p.path(),
        &["run", "--target", "ghost", "--suite", "paged_kv"],
    );
    no_panic(&o);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("nothing judged"), "{out}");
    // The reasons, per target, at the end of the run.
    assert!(out.contains("skipped:") && out.contains("[ghost]"), "{out}");
    assert!(out.contains("conform-ghost-worker"), "{out}");
    // --allow-skips accepts a run that checks nothing.
    let o = conform(
        p.path(),
        &[
            "run",
            "--target",
            "ghost",
            "--suite",
            "paged_kv",
            "--allow-skips",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn perf_record_of_an_unavailable_target_and_empty_comparisons_are_not_green() {
    let p = project_with_ghost_target();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("cand.json");
    let o = conform(
        p.path(),
        &[
            "perf",
            "record",
            "--out",
            out.to_str().unwrap(),
            "--target",
            "ghost",
            "--suite",
            "paged_kv",
        ],
    );
    no_panic(&o);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    // Comparing that empty file with itself compares nothing.
    let o = conform(
        p.path(),
        &[
            "perf",
            "compare",
            "--baseline",
            out.to_str().unwrap(),
            "--candidate",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(text(&o).contains("nothing judged"), "{}", text(&o));
    // A baseline whose cases the candidate lost: no case on both sides.
    let base = repo().join("cli/tests/fixtures/perf/baseline.json");
    let o = conform(
        p.path(),
        &[
            "perf",
            "compare",
            "--baseline",
            base.to_str().unwrap(),
            "--candidate",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
}

#[test]
fn bad_output_paths_are_refused_before_any_case_runs() {
    let root = repo();
    for args in [
        &["run", "--json", "/nonexistent/dir/r.json"][..],
        &["run", "--junit", "/nonexistent/dir/r.xml"][..],
        &["run", "--report", "/nonexistent/dir/report"][..],
        &["perf", "record", "--out", "/nonexistent/dir/p.json"][..],
    ] {
        let o = conform(&root, args);
        no_panic(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let out = text(&o);
        assert!(out.contains("/nonexistent/dir"), "{args:?}: {out}");
        // Nothing ran: no case line, no summary table.
        assert!(!out.contains("PASSED") && !out.contains("total"), "{out}");
    }
}

/// `conform validate` writes results.json, junit.xml and index.html into --out: a path there
/// that cannot be written is found before the worker's cases run, not after.
#[test]
fn validate_checks_its_report_files_before_running_the_worker() {
    let dir = project_with_ghost_target();
    let out = dir.path().join("out");
    std::fs::create_dir_all(out.join("results.json")).unwrap();
    let o = conform(
        dir.path(),
        &[
            "validate",
            "--worker",
            dir.path().join("targets/ghost").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--suite",
            "paged_kv",
        ],
    );
    no_panic(&o);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("results.json: is a directory"), "{t}");
    // Nothing ran: no case line, no summary table.
    assert!(!t.contains("ERROR") && !t.contains("total"), "{t}");
}

/// A suite tree copied without `ci/hardware/` (only suites/ and golden/, as docs/perf.md says
/// a suite may be copied) still times and validates: the commands that need a hardware profile
/// fall back to the profile built into the library, as the suite loader does.
#[test]
fn a_tree_without_hardware_profiles_times_and_validates_on_the_built_in_ones() {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["suites", "golden"] {
        copy_dir(&repo().join(sub), &dir.path().join(sub));
    }
    assert!(!dir.path().join("ci").exists());
    // The reference target, timed against the default profile (this-cpu): its cases run.
    let o = conform(
        dir.path(),
        &["run", "--suite", "paged_kv", "--tier", "quick", "--perf"],
    );
    no_panic(&o);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(!t.contains("cannot read"), "{t}");
    assert!(t.contains("total"), "{t}");
    // validate (profile this-cpu by default): it reaches the cases, which the worker cannot
    // run (each an ERROR line, exit 1), instead of stopping at a missing profile file.
    let ghost = dir.path().join("contrib/ghost");
    write_ghost_worker(&ghost);
    let out = dir.path().join("v");
    let o = conform(
        dir.path(),
        &[
            "validate",
            "--worker",
            ghost.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--suite",
            "paged_kv",
            "--tier",
            "quick",
        ],
    );
    no_panic(&o);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(!t.contains("cannot read"), "{t}");
    assert!(t.contains("ERROR paged_kv/") && t.contains("total"), "{t}");
    assert!(out.join("results.json").exists(), "{t}");
}

#[test]
fn results_files_are_written_whole() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("r.json");
    let xml = d.path().join("r.xml");
    let o = conform(
        &repo(),
        &[
            "run",
            "--suite",
            "paged_kv",
            "--json",
            json.to_str().unwrap(),
            "--junit",
            xml.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).expect("complete JSON");
    assert!(!v["cases"].as_array().unwrap().is_empty());
    assert!(std::fs::read_to_string(&xml)
        .unwrap()
        .contains("</testsuites>"));
    // Only the two results files: no temporary left behind.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 2);
    // Readable as a plain write leaves a file (0666 less the umask), not owner-only like the
    // temporary file they were written through.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let other = tempfile::tempdir().unwrap();
        let plain = other.path().join("plain");
        std::fs::write(&plain, b"x").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&json), mode(&plain));
        assert_eq!(mode(&xml), mode(&plain));
    }
}

#[test]
fn a_broken_pipe_never_panics() {
    for _ in 0..20 {
        let o = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "'{}' --root '{}' list --tier all | head -1 >/dev/null; echo \"${{PIPESTATUS[0]}}\"",
                env!("CARGO_BIN_EXE_conform"),
                repo().display()
            ))
            .output()
            .unwrap();
        let status = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert_ne!(status, "101", "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            status == "0" || status == "141",
            "conform list exited {status}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
    }
}

/// Counts that cannot be zero are refused when parsed, naming the flag, before any case runs:
/// `--iterations 0` used to run every case under --perf and fail each with "no samples".
#[test]
fn zero_iterations_or_threads_are_value_errors_before_any_case_runs() {
    let root = repo();
    for (args, flag) in [
        (&["run", "--perf", "--iterations", "0"][..], "--iterations"),
        (&["perf", "record", "--iterations", "0"][..], "--iterations"),
        (&["run", "--threads", "0"][..], "--threads"),
    ] {
        let o = conform(&root, args);
        no_panic(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let out = text(&o);
        assert!(out.contains(flag) && out.contains("'0'"), "{args:?}: {out}");
        assert!(!out.contains("PASSED") && !out.contains("ERROR"), "{out}");
    }
}

#[test]
fn negative_numbers_get_a_value_error_not_an_unknown_argument() {
    let root = repo();
    for (args, flag) in [
        (&["run", "--seed", "-1"][..], "--seed"),
        (
            &[
                "perf",
                "compare",
                "--baseline",
                "a",
                "--candidate",
                "b",
                "--threshold",
                "-1",
            ][..],
            "threshold",
        ),
        (
            &[
                "mc2", "plan", "--m", "64", "--k", "-1", "--n", "8", "--dtype", "f16", "--costs",
                "c.toml",
            ][..],
            "--k",
        ),
    ] {
        let o = conform(&root, args);
        no_panic(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let out = text(&o);
        assert!(!out.contains("unexpected argument"), "{args:?}: {out}");
        assert!(out.contains(flag), "{args:?}: {out}");
    }
}

#[test]
fn mc2_plan_refuses_absurd_shapes_naming_the_limit() {
    let root = repo();
    let costs = root.join("suites/mc2/costs-seed-example.toml");
    let o = conform(
        &root,
        &[
            "mc2",
            "plan",
            "--m",
            "1000000000000000",
            "--k",
            "3072",
            "--n",
            "8192",
            "--dtype",
            "f16",
            "--costs",
            costs.to_str().unwrap(),
        ],
    );
    no_panic(&o);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("2147483647"), "{}", text(&o));
}

#[test]
fn outside_any_checkout_the_binary_says_so_instead_of_using_its_build_tree() {
    let d = tempfile::tempdir().unwrap();
    let o = conform_in(d.path(), None, &["list"]);
    no_panic(&o);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--root"), "{}", text(&o));
    // With --root it works from anywhere.
    let o = conform_in(d.path(), Some(&repo()), &["list"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The commands that only read the files they are given need no project at all.
    let fixture = |p: &str| repo().join("cli/tests/fixtures").join(p);
    let report = d.path().join("report");
    let results = fixture("report/results-failing.json");
    let costs = repo().join("suites/mc2/costs-seed-example.toml");
    let (base, slow) = (
        fixture("perf/baseline.json"),
        fixture("perf/slowdown_10pct.json"),
    );
    for (args, code) in [
        (
            vec!["report", "--input", results.to_str().unwrap()]
                .into_iter()
                .chain(["--out", report.to_str().unwrap()])
                .collect::<Vec<_>>(),
            0,
        ),
        (
            vec!["perf", "compare", "--baseline", base.to_str().unwrap()]
                .into_iter()
                .chain(["--candidate", slow.to_str().unwrap()])
                .collect(),
            1,
        ),
        (
            vec![
                "mc2", "plan", "--m", "64", "--k", "3072", "--n", "8192", "--dtype", "f16",
            ]
            .into_iter()
            .chain(["--costs", costs.to_str().unwrap()])
            .collect(),
            0,
        ),
    ] {
        let o = conform_in(d.path(), None, &args);
        no_panic(&o);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains("no conform project"), "{}", text(&o));
    }
    assert!(report.join("index.html").is_file());
    // perf record runs cases: it needs the project like run.
    let o = conform_in(d.path(), None, &["perf", "record", "--out", "p.json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--root"), "{}", text(&o));
}

#[test]
fn a_case_too_large_for_memory_is_an_error_and_the_run_goes_on() {
    let p = project_with_ghost_target();
    let suite = p.path().join("suites/fa_prefill.toml");
    let mut s = std::fs::read_to_string(&suite).unwrap();
    s.push_str(
        "\n[[case]]\nname = \"bf16/huge\"\ntier = \"full\"\n\
         params = { dtype = \"bf16\", q_seq = 1000000000, kv_seq = 1000000000, num_heads = 32, \
         num_key_value_heads = 8, head_dim = 128, sparse_mode = 3 }\n",
    );
    std::fs::write(&suite, s).unwrap();
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("r.json");
    let o = conform(
        p.path(),
        &[
            "run",
            "--tier",
            "all",
            "--suite",
            "fa_prefill",
            "--filter",
            "huge|s24-hq8-hkv2-d128/causal_br",
            "--no-golden",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    no_panic(&o);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let cases = v["cases"].as_array().unwrap();
    let huge = cases
        .iter()
        .find(|c| c["id"].as_str().unwrap().ends_with("huge"))
        .unwrap();
    assert_eq!(huge["status"], "error");
    let msg = huge["message"].as_str().unwrap();
    assert!(msg.contains("over the memory limit"), "{msg}");
    // The others ran and passed.
    assert!(cases.len() > 1);
    assert!(cases
        .iter()
        .filter(|c| !c["id"].as_str().unwrap().ends_with("huge"))
        .all(|c| c["status"] == "passed"));
    // --max-memory applies to ordinary cases too.
    let o = conform(
        p.path(),
        &["run", "--suite", "paged_kv", "--max-memory", "1K"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("over the memory limit"), "{}", text(&o));
}

#[test]
fn a_worker_that_says_unavailable_and_exits_never_kills_conform_with_sigpipe() {
    let p = project_with_ghost_target();
    let t = p.path().join("targets/gone");
    std::fs::create_dir_all(&t).unwrap();
    std::fs::write(
        t.join("worker.py"),
        "import json\nprint(json.dumps({\"type\": \"unavailable\", \"protocol\": 1, \
         \"reason\": \"import failed: no kernel here\"}), flush=True)\n",
    )
    .unwrap();
    std::fs::write(
        t.join("target.toml"),
        "description = \"exits after its handshake\"\ncommand = \"python3\"\n\
         args = [\"${TARGET_DIR}/worker.py\"]\n",
    )
    .unwrap();
    for _ in 0..3 {
        let o = conform(
            p.path(),
            &["run", "--target", "gone", "--suite", "paged_kv"],
        );
        assert_eq!(o.status.code(), Some(4), "{}", text(&o));
        assert!(text(&o).contains("no kernel here"), "{}", text(&o));
    }
}
