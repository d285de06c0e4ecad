//! Run-time ignorable tests for the test binaries whose subject may be missing here (the Python
//! venv, chromium): each binary is a libtest-mimic `main` (`harness = false`), and a test whose
//! subject is absent is *ignored* with its reason — listed as ignored, so cargo test and nextest
//! report it as skipped, never as passed. Where CI requires the subject
//! (`CONFORM_REQUIRE_TARGETS`, `CONFORM_REQUIRE_CHROMIUM`) the caller passes no reason, so the
//! test runs and fails.

use libtest_mimic::{Arguments, Failed, Trial};

/// One test: its name, its body, and why it cannot run here (None: it runs).
pub struct Test {
    pub name: &'static str,
    pub body: fn(),
    pub missing: Option<String>,
}

/// Runs `tests` under libtest's command line; prints each distinct skip reason once.
pub fn run(tests: Vec<Test>) -> ! {
    run_with(Arguments::from_args(), tests)
}

/// As [`run`], one test at a time unless `--test-threads` says otherwise: for tests that time
/// something and must not load each other's cores.
pub fn run_one_at_a_time(tests: Vec<Test>) -> ! {
    let mut args = Arguments::from_args();
    args.test_threads.get_or_insert(1);
    run_with(args, tests)
}

fn run_with(args: Arguments, tests: Vec<Test>) -> ! {
    let mut reasons: Vec<&str> = tests.iter().filter_map(|t| t.missing.as_deref()).collect();
    reasons.dedup();
    for r in reasons {
        eprintln!("ignored here: {r}");
    }
    let trials = tests
        .into_iter()
        .map(|t| {
            let body = t.body;
            Trial::test(t.name, move || {
                std::panic::catch_unwind(body).map_err(|e| Failed::from(panic_message(&*e)))
            })
            .with_ignored_flag(t.missing.is_some())
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}

fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panicked".to_string())
}
