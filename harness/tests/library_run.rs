//! A program runs a suite through the library, without the `conform` CLI: the suites loaded,
//! one quick suite run on the reference target (verified against the golden store), and the
//! typed outcome and errors asserted on.

use conform_harness::project::{CaseQuery, Paths, SelectError};
use conform_harness::results::Status;
use conform_harness::session::{self, RunError, RunRequest, RunVerdict};
use std::path::Path;

fn paths() -> Paths {
    Paths::at(&Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
}

fn query(suite: &str, filter: Option<&str>) -> CaseQuery {
    CaseQuery {
        suites: vec![suite.to_string()],
        filter: filter.map(str::to_string),
        tier: None,
    }
}

#[test]
fn a_quick_suite_runs_on_the_reference_and_every_case_passes() {
    let paths = paths();
    let selected = query("paged_kv", None).load_selected(&paths).unwrap();
    assert!(!selected.is_empty(), "paged_kv has quick cases");
    let req = RunRequest {
        query: query("paged_kv", None),
        threads: Some(2),
        ..RunRequest::default()
    };
    let outcome = session::execute(&paths, &req).expect("the run starts");
    assert_eq!(outcome.verdict, RunVerdict::Passed);
    assert_eq!(
        outcome.verdict.exit_code(),
        conform_harness::exit_code::SUCCESS
    );
    let mut ran: Vec<&str> = outcome
        .results
        .cases
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    let mut want: Vec<&str> = selected.iter().map(|c| c.id.as_str()).collect();
    ran.sort_unstable();
    want.sort_unstable();
    assert_eq!(ran, want, "one result per selected case");
    for c in &outcome.results.cases {
        assert_eq!(c.target, "reference", "{}", c.id);
        assert_eq!(c.status, Status::Passed, "{}: {}", c.id, c.message);
        assert!(!c.metrics.is_empty(), "{}: judged outputs", c.id);
    }
    assert!(outcome.kept.is_none());
}

#[test]
fn why_nothing_ran_is_a_typed_error() {
    let paths = paths();
    let run = |q: CaseQuery| {
        session::execute(
            &paths,
            &RunRequest {
                query: q,
                ..RunRequest::default()
            },
        )
    };
    assert!(matches!(
        run(query("paged_kv", Some("^no such case$"))),
        Err(RunError::NoCases)
    ));
    assert!(matches!(
        run(query("paged_kv", Some("("))),
        Err(RunError::Select(SelectError::Filter(_)))
    ));
    match run(query("no_such_suite", None)) {
        Err(RunError::Select(SelectError::UnknownSuites(names))) => {
            assert_eq!(names, ["no_such_suite"]);
        }
        other => panic!("expected unknown suites, got {other:?}"),
    }
}
