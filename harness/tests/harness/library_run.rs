//! A program runs a suite through the library, without the `conform` CLI: the suites loaded,
//! one quick suite run on the reference target (verified against the golden store), and the
//! typed outcome and errors asserted on.

use conform_harness::project::{CaseQuery, Paths, SelectError};
use conform_harness::results::Status;
use conform_harness::runner::Quiet;
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
    let outcome = session::execute(&paths, &req, &mut Quiet).expect("the run starts");
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
            &mut Quiet,
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

/// The reference behind another name (so the runner treats it as a worker: two input sets and
/// the repeat), answering every request of a case it has seen with its first answer when
/// `caching`.
struct Impostor {
    name: &'static str,
    inner: conform_targets::ReferenceTarget,
    caching: bool,
    seen: std::collections::BTreeMap<String, conform_targets::Execution>,
}

impl conform_targets::Target for Impostor {
    fn name(&self) -> &str {
        self.name
    }
    fn availability(&mut self) -> conform_targets::Availability {
        self.inner.availability()
    }
    fn capabilities(&mut self) -> conform_targets::Capabilities {
        self.inner.capabilities()
    }
    fn execute(
        &mut self,
        request: &conform_targets::ExecRequest,
    ) -> Result<conform_targets::Execution, conform_targets::TargetError> {
        if self.caching
            && let Some(first) = self.seen.get(&request.case_id)
        {
            return Ok(first.clone());
        }
        let e = self.inner.execute(request)?;
        self.seen.insert(request.case_id.clone(), e.clone());
        Ok(e)
    }
}

#[test]
fn a_target_that_answers_from_a_cache_fails_every_case_and_is_named_for_it() {
    use conform_harness::runner::{anti_cheat, run_all, RunOptions};
    use conform_reference::parallel::Threads;
    let paths = paths();
    let cases = query("paged_kv", None).load_selected(&paths).unwrap();
    let cases: Vec<_> = cases.iter().collect();
    let opts = RunOptions {
        threads: Threads::ONE,
        ..RunOptions::default()
    };
    let run = |name: &'static str, caching: bool| {
        let mut targets: Vec<Box<dyn conform_targets::Target>> = vec![Box::new(Impostor {
            name,
            inner: conform_targets::ReferenceTarget::new(Threads::ONE),
            caching,
            seen: Default::default(),
        })];
        run_all(&cases, &mut targets, &opts, &mut Quiet).cases
    };
    assert_eq!(anti_cheat::input_sets("honest", opts.worker_input_sets), 2);
    // The same computation answered honestly passes every input set...
    for c in run("honest", false) {
        assert_eq!(c.status, Status::Passed, "{}: {}", c.id, c.message);
    }
    // ...and answered from the first set's cache fails each case, saying why.
    let cached = run("cached", true);
    assert_eq!(cached.len(), cases.len());
    for c in cached {
        assert_eq!(c.status, Status::Failed, "{}: {}", c.id, c.message);
        assert!(
            c.message.contains("returned a cached result"),
            "{}: {}",
            c.id,
            c.message
        );
    }
}

/// With more than one thread the runner draws the coming cases' inputs ahead, on other
/// threads: the results are those of a one-thread run, case for case (status, seed, every
/// metric), for the cases' own seeds (golden-verified) and for another seed.
#[test]
fn drawing_inputs_ahead_changes_no_result() {
    let paths = paths();
    let run = |threads: usize, seed: Option<u64>| {
        let req = RunRequest {
            query: CaseQuery {
                suites: vec![
                    "mla_decode".into(),
                    "dynamic_quant".into(),
                    "paged_kv".into(),
                ],
                filter: None,
                tier: None,
            },
            threads: Some(threads),
            seeds: seed.map_or(conform_harness::seed::SeedPolicy::Suite, |s| {
                conform_harness::seed::SeedPolicy::Fixed(s)
            }),
            ..RunRequest::default()
        };
        session::execute(&paths, &req, &mut Quiet).expect("the run starts")
    };
    for seed in [None, Some(0x05ee_d0fa_4ead)] {
        let one = run(1, seed);
        let three = run(3, seed);
        assert_eq!(one.verdict, RunVerdict::Passed, "seed {seed:?}");
        assert_eq!(one.results.cases.len(), three.results.cases.len());
        for (a, b) in one.results.cases.iter().zip(&three.results.cases) {
            assert_eq!((&a.id, a.status, a.seed), (&b.id, b.status, b.seed));
            assert_eq!(a.message, b.message, "{}", a.id);
            assert_eq!(
                serde_json::to_value(&a.metrics).unwrap(),
                serde_json::to_value(&b.metrics).unwrap(),
                "{}: metrics differ between 1 and 3 threads",
                a.id
            );
        }
    }
}
