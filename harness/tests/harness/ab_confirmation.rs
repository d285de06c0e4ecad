//! `conform run --against`'s A/B session end to end in the library (`runner::ab::ab_compare`),
//! with targets whose timings the test scripts per phase: the first rounds, then the
//! confirmation rounds of the flagged cases. A slowdown in the first rounds that the fresh
//! rounds do not repeat is INCONCLUSIVE ("not confirmed"), never a REGRESSION; one that repeats
//! is a REGRESSION carrying the confirmation's ratios; a side that can no longer run a flagged
//! case in its confirmation leaves that case INCONCLUSIVE with the reason, and every other
//! case keeps its own judgement.

use conform_harness::perf::Verdict;
use conform_harness::runner::ab::{ab_compare, AbSettings};
use conform_harness::runner::{run_all, Quiet, RunOptions};
use conform_harness::suite::select::load_all;
use conform_harness::suite::Case;
use conform_reference::parallel::Threads;
use conform_targets::reference_target::ReferenceTarget;
use conform_targets::target::{
    Availability, Capabilities, ExecRequest, Execution, Target, TargetError,
};

/// Rounds of each phase: ten rounds all one way give p = 2^-10, below 0.01 even held to the
/// three cases (x 3).
const ROUNDS: u32 = 10;

/// How a scripted side times a request: its factor per case index in the first rounds and in
/// the confirmation rounds, and the case it can no longer run in the confirmation.
#[derive(Clone, Default)]
struct Script {
    first: Vec<f64>,
    confirmation: Vec<f64>,
    gone_in_confirmation: Option<usize>,
}

/// A target that computes with the reference (so its trials pass) and, for timed requests,
/// returns the scripted times: 100 us per case index, times the phase's factor, with a
/// spread of +-1% that alternates per sample.
struct Scripted {
    name: &'static str,
    inner: ReferenceTarget,
    cases: Vec<String>,
    script: Script,
    /// Renewals so far: each round renews both sides once.
    renewals: u32,
}

impl Target for Scripted {
    fn name(&self) -> &str {
        self.name
    }
    fn availability(&mut self) -> Availability {
        self.inner.availability()
    }
    fn capabilities(&mut self) -> Capabilities {
        self.inner.capabilities()
    }
    fn renew(&mut self) {
        self.renewals += 1;
    }
    fn execute(&mut self, request: &ExecRequest) -> Result<Execution, TargetError> {
        let Some(timing) = request.timing else {
            return self.inner.execute(request);
        };
        let k = self
            .cases
            .iter()
            .position(|c| *c == request.case_id)
            .expect("a scripted case");
        let confirming = self.renewals > ROUNDS;
        if confirming && self.script.gone_in_confirmation == Some(k) {
            return Err(TargetError::Unsupported("the case's op went away".into()));
        }
        let factor = if confirming {
            self.script.confirmation[k]
        } else {
            self.script.first[k]
        };
        let base = 100.0 * (k + 1) as f64 * factor;
        let timings_us = (0..timing.iterations)
            .map(|i| base * if i % 2 == 0 { 0.99 } else { 1.01 })
            .collect();
        Ok(Execution {
            outputs: Default::default(),
            timings_us,
            cpu_us: Vec::new(),
            setup_us: None,
            notes: Vec::new(),
            stderr_tail: String::new(),
        })
    }
}

fn cases() -> Vec<Case> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let all = load_all(&root.join("suites")).unwrap();
    let quick: Vec<Case> = all
        .into_iter()
        .filter(|c| c.op == "dynamic_quant" && c.tier == conform_harness::suite::Tier::Quick)
        .take(3)
        .collect();
    assert_eq!(quick.len(), 3, "three quick dynamic_quant cases");
    quick
}

fn side(name: &'static str, cases: &[Case], script: Script) -> Scripted {
    Scripted {
        name,
        inner: ReferenceTarget::new(Threads(1)),
        cases: cases.iter().map(|c| c.id.clone()).collect(),
        script,
        renewals: 0,
    }
}

/// The A/B session of the three cases, the candidate's timings scripted.
fn session(candidate: Script) -> Vec<(String, Verdict, String, Vec<f64>)> {
    let cases = cases();
    let refs: Vec<&Case> = cases.iter().collect();
    let steady = Script {
        first: vec![1.0; 3],
        confirmation: vec![1.0; 3],
        gone_in_confirmation: None,
    };
    let mut targets: Vec<Box<dyn Target>> = vec![Box::new(side("candidate", &cases, candidate))];
    let results = run_all(&refs, &mut targets, &RunOptions::default(), &mut Quiet);
    let mut candidate = targets.pop().unwrap();
    let mut against = side("kept", &cases, steady);
    let settings = AbSettings {
        rounds: ROUNDS,
        ..AbSettings::default()
    };
    let out = ab_compare(&refs, &results, candidate.as_mut(), &mut against, &settings);
    assert!(out.not_timed.is_empty(), "{:?}", out.not_timed);
    out.comparison
        .cases
        .into_iter()
        .map(|c| {
            let confirmation = c
                .result
                .rounds
                .as_ref()
                .map(|r| r.confirmation.clone())
                .unwrap_or_default();
            (c.id, c.result.verdict, c.result.reason, confirmation)
        })
        .collect()
}

#[test]
fn a_slowdown_that_repeats_is_a_regression_with_the_confirmation_ratios() {
    let got = session(Script {
        first: vec![1.3, 1.0, 1.0],
        confirmation: vec![1.3, 1.0, 1.0],
        gone_in_confirmation: None,
    });
    assert_eq!(got[0].1, Verdict::Regression, "{}", got[0].2);
    assert!(
        got[0].2.contains("confirmed by 10 fresh rounds"),
        "{}",
        got[0].2
    );
    assert_eq!(got[0].3.len(), ROUNDS as usize);
    assert!(
        got[0].3.iter().all(|&x| (x - 1.3).abs() < 0.01),
        "{:?}",
        got[0].3
    );
    for c in &got[1..] {
        assert_eq!(c.1, Verdict::Unchanged, "{}", c.2);
        assert!(c.3.is_empty(), "a case not flagged is not re-timed");
    }
}

#[test]
fn a_slowdown_that_does_not_repeat_is_inconclusive_never_a_regression() {
    let got = session(Script {
        first: vec![1.0, 1.3, 1.0],
        confirmation: vec![1.0, 1.0, 1.0],
        gone_in_confirmation: None,
    });
    assert_eq!(got[1].1, Verdict::Inconclusive, "{}", got[1].2);
    assert!(
        got[1]
            .2
            .starts_with("not confirmed: the first 10 rounds point to a REGRESSION"),
        "{}",
        got[1].2
    );
    assert_eq!(got[1].3.len(), ROUNDS as usize);
    assert_eq!(
        (got[0].1, got[2].1),
        (Verdict::Unchanged, Verdict::Unchanged)
    );
}

#[test]
fn a_flagged_case_its_side_cannot_run_again_is_inconclusive_and_the_others_keep_theirs() {
    let got = session(Script {
        first: vec![1.3, 1.3, 1.0],
        confirmation: vec![1.3, 1.3, 1.0],
        gone_in_confirmation: Some(0),
    });
    let ids: Vec<String> = cases().into_iter().map(|c| c.id).collect();
    assert_eq!(got.iter().map(|c| c.0.clone()).collect::<Vec<_>>(), ids);
    assert_eq!(got[0].1, Verdict::Inconclusive, "{}", got[0].2);
    assert!(
        got[0]
            .2
            .starts_with("too few rounds to confirm the first rounds' REGRESSION"),
        "{}",
        got[0].2
    );
    assert!(
        got[0].2.contains("the confirmation rounds: `candidate`"),
        "{}",
        got[0].2
    );
    assert_eq!(got[1].1, Verdict::Regression, "{}", got[1].2);
    assert_eq!(got[2].1, Verdict::Unchanged, "{}", got[2].2);
}
