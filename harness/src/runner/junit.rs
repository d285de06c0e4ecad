//! JUnit XML for `conform run --junit` (junit-report): one test suite per (suite, target);
//! the trials an interrupt left unfinished are listed as errors of type `interrupted`.

use crate::results::{RunResults, Status};
use junit_report::{Duration, ReportBuilder, TestCase, TestSuiteBuilder};
use std::collections::BTreeMap;

/// Writes `results` as JUnit XML.
pub fn write_junit(
    results: &RunResults,
    out: &mut dyn std::io::Write,
) -> Result<(), junit_report::Error> {
    let mut groups: BTreeMap<(String, String), Vec<TestCase>> = BTreeMap::new();
    for c in &results.cases {
        let d = Duration::milliseconds(c.duration_ms.round() as i64);
        let name = c.id.clone();
        let tc = match c.status {
            Status::Passed => TestCase::success(&name, d),
            Status::Skipped => TestCase::skipped_with_cause(&name, "skipped", &c.message),
            Status::Failed => TestCase::failure(&name, d, "failed", &c.message),
            Status::Error | Status::Timeout | Status::Crashed => {
                TestCase::error(&name, d, c.status.name(), &c.message)
            }
        };
        let mut tc = tc;
        tc.set_classname(&format!("{}.{}", c.target, c.suite));
        groups
            .entry((c.suite.clone(), c.target.clone()))
            .or_default()
            .push(tc);
    }
    // Trials an interrupt left unfinished are errors of their own kind, so a cancelled CI job's
    // JUnit never reads as a clean pass of the trials that happened to finish.
    let why = crate::messages::unfinished_trial(results.interrupted.as_deref());
    for u in &results.unfinished {
        let suite = u.id.split('/').next().unwrap_or(&u.id).to_string();
        let mut tc = TestCase::error(&u.id, Duration::ZERO, "interrupted", &why);
        tc.set_classname(&format!("{}.{}", u.target, suite));
        groups
            .entry((suite, u.target.clone()))
            .or_default()
            .push(tc);
    }
    let mut report = ReportBuilder::new();
    for ((suite, target), cases) in groups {
        report.add_testsuite(
            TestSuiteBuilder::new(&format!("{suite} [{target}]"))
                .add_testcases(cases)
                .build(),
        );
    }
    report.build().write_xml(out)
}
