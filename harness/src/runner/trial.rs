//! One trial: one case on one target, over one or more input sets, judged output by output.

use super::anti_cheat::{self, second_run_seed};
use super::expected::{expectation, Expectation};
use super::options::RunOptions;
use crate::golden::diff::describe_change;
use crate::results::{CaseResult, OutputMetrics, Status};
use crate::suite::Case;
use crate::verdict::{judge, CheckPolicy};
use conform_reference::ops::{self, OpDescription, TensorMap};
use conform_targets::poison::Fill;
use conform_targets::target::{Availability, ExecRequest, Execution, Target, TimingRequest};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// The name of the in-process reference target.
pub use conform_targets::REFERENCE_TARGET;

fn result(case: &Case, target: &str, seed: u64, status: Status, message: String) -> CaseResult {
    CaseResult {
        id: case.id.clone(),
        suite: case.suite.clone(),
        op: case.op.clone(),
        recipe: case.recipe.clone(),
        target: target.to_string(),
        status,
        message,
        seed,
        metrics: BTreeMap::new(),
        duration_ms: 0.0,
        perf: None,
        notes: Vec::new(),
        nondeterministic: None,
        golden_tensors: None,
        variant: super::kernel_variant::record(case),
        recipe_set_aside: None,
    }
}

/// Runs `case` on `target` with input seed `seed`.
pub fn run_trial(case: &Case, target: &mut dyn Target, seed: u64, opts: &RunOptions) -> CaseResult {
    let start = Instant::now();
    let name = target.name().to_string();
    let mut kept = Vec::new();
    // Under the interrupt's token: a signal cancels the reference computation at its next
    // task, and the trial ends here (the runner lists it as unfinished, never as a verdict).
    let token = crate::interrupt::cancel_token();
    let inner = conform_reference::cancel::run(token, || {
        run_trial_inner(case, target, seed, opts, &name, &mut kept)
    });
    let mut r = inner.unwrap_or_else(|_| {
        result(
            case,
            &name,
            seed,
            Status::Error,
            crate::messages::cancelled_trial(),
        )
    });
    if let Some(keep) = &opts.keep_outputs {
        // Kept files that could not be written are noted on the result; the verdict stands.
        for s in &kept {
            if let Some(e) = &s.error {
                r.notes
                    .push(super::keep_text::set_not_written(s.set, &s.path, e));
            }
        }
        let unfinished = crate::interrupt::received().is_some();
        if let Some(e) = keep.record(&r, kept, unfinished) {
            r.notes.push(super::keep_text::index_not_written(&e));
        }
    }
    r.duration_ms = start.elapsed().as_secs_f64() * 1e3;
    r
}

/// Why `target` would skip `case` before running anything (it is unavailable and not
/// required, lacks the op or a parameter, or does not implement a recipe the checks need), or
/// `None` when [`run_trial`] would run it (or end it as an error). The conformance test target
/// asks this when it lists its trials, so that test runners which cannot report a skip decided
/// at run time (nextest counts it as a pass) see these trials as ignored.
pub fn skip_reason(case: &Case, target: &mut dyn Target, opts: &RunOptions) -> Option<String> {
    let name = target.name().to_string();
    match admit(case, target, case.seed, opts, &name) {
        Admission::Done(r) if r.status == Status::Skipped => Some(r.message),
        _ => None,
    }
}

/// The largest case (estimated bytes) whose inputs the runner draws ahead of its trial.
const DRAW_AHEAD_BYTES: f64 = 256.0 * 1024.0 * 1024.0;

/// Whether the runner may draw `case`'s first input set ahead of its trial on `target`: the
/// trial would run (not end at admission), and the case is small (at most
/// [`DRAW_AHEAD_BYTES`] estimated, and a quarter of `--max-memory`), so that holding a second
/// case never matters.
pub(super) fn worth_drawing_ahead(case: &Case, target: &mut dyn Target, opts: &RunOptions) -> bool {
    let name = target.name().to_string();
    let Admission::Run { desc, policies, .. } = admit(case, target, case.seed, opts, &name) else {
        return false;
    };
    let need = super::memory::estimate(&desc, policies.values().any(|p| p.needs().oracle));
    need.total() <= DRAW_AHEAD_BYTES.min(opts.max_memory as f64 / 4.0)
}

/// What a trial needs once it is admitted, or the result that ends it before it runs.
enum Admission {
    Run {
        desc: OpDescription,
        policies: BTreeMap<String, CheckPolicy>,
        recipe: Option<String>,
        /// Why a target declaring the case's recipe is judged without its bits.
        set_aside: Option<String>,
    },
    /// Boxed: a result is several times the size of the run's fields.
    Done(Box<CaseResult>),
}

fn done(r: CaseResult) -> Admission {
    Admission::Done(Box::new(r))
}

/// The checks before a trial runs: availability, the target's declared support, the op's
/// description, the check policies and the recipe the target is asked to emulate.
fn admit(
    case: &Case,
    target: &mut dyn Target,
    seed: u64,
    opts: &RunOptions,
    name: &str,
) -> Admission {
    let is_reference = name == REFERENCE_TARGET;
    if let Availability::Unavailable { reason } = target.availability() {
        return done(if opts.required_targets.iter().any(|t| t == name) {
            result(
                case,
                name,
                seed,
                Status::Error,
                format!("required target `{name}` is unavailable: {reason}"),
            )
        } else {
            result(
                case,
                name,
                seed,
                Status::Skipped,
                format!("target unavailable: {reason}"),
            )
        });
    }
    if let Err(skip) = target.supports(&case.op, &capability_params(case)) {
        return done(result(case, name, seed, Status::Skipped, skip.0));
    }
    let desc = match ops::find(&case.op).and_then(|f| f.describe(&case.params)) {
        Ok(d) => d,
        Err(e) => return done(result(case, name, seed, Status::Error, e.to_string())),
    };
    let mut policies = match case.output_policies(&desc, false) {
        Ok(p) => p,
        Err(e) => return done(result(case, name, seed, Status::Error, e.to_string())),
    };
    let need = super::memory::estimate(&desc, policies.values().any(|p| p.needs().oracle));
    if need.total() > opts.max_memory as f64 {
        let message = super::memory::OverMemoryLimit {
            need,
            limit: opts.max_memory,
        }
        .to_string();
        return done(result(case, name, seed, Status::Error, message));
    }
    // Which recipe the target is asked to emulate.
    let mut set_aside = None;
    let recipe = if is_reference {
        Some(case.recipe.clone())
    } else {
        let caps = target.capabilities();
        let declared = caps
            .ops
            .get(&case.op)
            .map(|o| o.recipes.clone())
            .unwrap_or_default();
        set_aside = declared
            .iter()
            .any(|r| r == &case.recipe)
            .then(|| super::kernel_variant::set_aside(case, target))
            .flatten();
        if declared.iter().any(|r| r == &case.recipe) && set_aside.is_none() {
            Some(case.recipe.clone())
        } else {
            // The target runs its own recipe (or its declared one is set aside): outputs with
            // a recipe-free policy are judged by it (against the oracle); an output still
            // checked exactly against the case's recipe makes the case inapplicable.
            policies = match case.output_policies(&desc, true) {
                Ok(p) => p,
                Err(e) => return done(result(case, name, seed, Status::Error, e.to_string())),
            };
            let exact: Vec<&str> = policies
                .values()
                .filter(|p| p.is_exact())
                .map(|p| p.name())
                .collect();
            if !exact.is_empty() {
                let message = match &set_aside {
                    Some(why) => format!(
                        "this case checks {} against recipe `{}`, whose bits are set aside for this target ({why}), and gives no check for a target with its own arithmetic",
                        exact.join("/"),
                        case.recipe
                    ),
                    None => format!(
                        "this case checks {} against recipe `{}`, which the target does not implement (it declares: {})",
                        exact.join("/"),
                        case.recipe,
                        if declared.is_empty() { "none".to_string() } else { declared.join(", ") }
                    ),
                };
                let mut r = result(case, name, seed, Status::Skipped, message);
                r.recipe_set_aside = set_aside;
                return done(r);
            }
            None
        }
    };
    Admission::Run {
        desc,
        policies,
        recipe,
        set_aside,
    }
}

fn run_trial_inner(
    case: &Case,
    target: &mut dyn Target,
    seed: u64,
    opts: &RunOptions,
    name: &str,
    kept: &mut Vec<super::keep::KeptSet>,
) -> CaseResult {
    let (desc, policies, recipe, set_aside) = match admit(case, target, seed, opts, name) {
        Admission::Run {
            desc,
            policies,
            recipe,
            set_aside,
        } => (desc, policies, recipe, set_aside),
        Admission::Done(r) => return *r,
    };
    let mut out = result(case, name, seed, Status::Passed, String::new());
    out.recipe_set_aside = set_aside;
    let mut run = TrialRun {
        case,
        name,
        opts,
        want_oracle: policies.values().any(|p| p.needs().oracle),
        desc,
        policies,
        recipe,
        out,
        failures: Vec::new(),
        first_run: None,
    };
    let sets = anti_cheat::input_sets(name, opts.worker_input_sets);
    let mut set_seed = seed;
    for set in 0..sets {
        if set > 0 {
            set_seed = second_run_seed(set_seed);
        }
        if let Err((status, message)) = run.input_set(target, set, set_seed, kept) {
            run.out.status = status;
            run.out.message = message;
            return run.out;
        }
        if !run.failures.is_empty() {
            break;
        }
    }
    if run.failures.is_empty()
        && let Err((status, message)) = run.repeat_first_set(target, sets)
    {
        run.out.status = status;
        run.out.message = message;
        return run.out;
    }
    let mut out = run.out;
    if !run.failures.is_empty() {
        out.status = Status::Failed;
        out.message = run.failures.join("; ");
    }
    out
}

/// An admitted trial while its input sets run: what it runs with, the result so far, the
/// failures found so far and the first set's request and execution (for the anti-cheat check).
struct TrialRun<'a> {
    case: &'a Case,
    name: &'a str,
    opts: &'a RunOptions,
    desc: OpDescription,
    policies: BTreeMap<String, CheckPolicy>,
    recipe: Option<String>,
    want_oracle: bool,
    out: CaseResult,
    failures: Vec<String>,
    first_run: Option<(ExecRequest, Execution)>,
}

/// What ends a trial early: its status and message.
type Ended = (Status, String);

impl TrialRun<'_> {
    /// One input set: its expectation, the target's execution, then the checks (golden drift,
    /// the verdicts, the anti-cheat comparison with the first set). Failures are collected;
    /// an error ends the trial.
    fn input_set(
        &mut self,
        target: &mut dyn Target,
        set: u32,
        set_seed: u64,
        kept: &mut Vec<super::keep::KeptSet>,
    ) -> Result<(), Ended> {
        let exp = self
            .expectation(set, set_seed)
            .map_err(|e| (Status::Error, e.to_string()))?;
        let request = self.request(set, &exp);
        let exec = self.execute(target, &request, &exp, set, set_seed, kept)?;
        self.record_notes_and_perf(set, &exec);
        if exp.from_golden {
            self.check_golden_drift(&exp, &exec);
        }
        let alternate = self.alternate_fill(target, &request, &exp, &exec, set, set_seed)?;
        let metrics = judge(
            &self.desc,
            &self.policies,
            &exp.expected,
            exp.oracle.as_ref(),
            &exec.outputs,
            alternate.as_ref(),
            self.opts.threads,
        )
        .map_err(|e| (Status::Error, e.to_string()))?;
        self.record_metrics(set, set_seed, metrics);
        self.check_against_first_run(request, exec);
        Ok(())
    }

    /// The expectation of an input set: the golden file's for the reference's first set, else
    /// the shared cache's when there is one, else computed here.
    fn expectation(
        &self,
        set: u32,
        set_seed: u64,
    ) -> Result<Arc<Expectation>, crate::golden::GoldenError> {
        let golden = if self.name == REFERENCE_TARGET && set == 0 {
            self.opts.golden.as_deref()
        } else {
            None
        };
        match (&self.opts.expectations, golden) {
            (Some(cache), None) => {
                cache.get(self.case, set_seed, self.want_oracle, self.opts.threads)
            }
            _ => {
                let drawn = (set == 0)
                    .then_some(self.opts.prefetch.as_deref())
                    .flatten()
                    .and_then(|p| p.take(&self.case.id, set_seed));
                expectation(
                    self.case,
                    set_seed,
                    drawn,
                    golden,
                    self.want_oracle,
                    self.opts.threads,
                )
                .map(Arc::new)
            }
        }
    }

    /// The request for an input set (timed on the first set when the run measures).
    fn request(&self, set: u32, exp: &Expectation) -> ExecRequest {
        let (case, opts) = (self.case, self.opts);
        let timing = (opts.perf && set == 0).then(|| TimingRequest {
            warmup: opts.warmup.unwrap_or(case.perf.warmup),
            iterations: opts.iterations.unwrap_or(case.perf.iterations),
        });
        ExecRequest {
            case_id: case.id.clone(),
            input_set: set,
            op: case.op.clone(),
            params: case.params.clone(),
            recipe: self.recipe.clone(),
            inputs: exp.inputs.clone(),
            expected_outputs: self.desc.outputs.clone(),
            poison: Fill::Primary,
            timing,
        }
    }

    /// Runs the request on the target, keeps the set's files when asked, and turns a target
    /// error into the trial's end (naming the input set after the first).
    fn execute(
        &self,
        target: &mut dyn Target,
        request: &ExecRequest,
        exp: &Expectation,
        set: u32,
        set_seed: u64,
        kept: &mut Vec<super::keep::KeptSet>,
    ) -> Result<Execution, Ended> {
        let executed = target.execute(request);
        if let Some(keep) = &self.opts.keep_outputs {
            kept.push(keep.write_set(&super::keep::SetRecord {
                case: self.case,
                target: self.name,
                set,
                requested_recipe: self.recipe.as_deref(),
                expectation: exp,
                outputs: executed.as_ref().ok().map(|x| &x.outputs),
            }));
        }
        executed.map_err(|e| {
            let message = if set > 0 {
                format!("input set {set} (seed {set_seed}): {e}")
            } else {
                e.to_string()
            };
            (e.status(), message)
        })
    }

    /// The two-fill test ([`crate::verdict::two_fill`]): when an integer output holds the
    /// primary poison pattern where another value is expected, the same request once more
    /// with the outputs filled with the alternate pattern (untimed), whose outputs tell the
    /// unwritten elements from written ones. `None` (no execution) when nothing is in doubt,
    /// which is every passing trial.
    fn alternate_fill(
        &self,
        target: &mut dyn Target,
        request: &ExecRequest,
        exp: &Expectation,
        exec: &Execution,
        set: u32,
        set_seed: u64,
    ) -> Result<Option<TensorMap>, Ended> {
        if !crate::verdict::two_fill::any_suspects(&self.desc.outputs, &exp.expected, &exec.outputs)
        {
            return Ok(None);
        }
        let again = ExecRequest {
            timing: None,
            poison: Fill::Alternate,
            ..request.clone()
        };
        let second = target.execute(&again).map_err(|e| {
            (
                e.status(),
                format!(
                    "input set {set} (seed {set_seed}) given again with the alternate poison \
                     pattern, to tell unwritten integer elements from written ones: {e}"
                ),
            )
        })?;
        Ok(Some(second.outputs))
    }

    /// The worker's stderr tail and notes (each text once, however many input sets repeat
    /// it), and on the first set of a measuring run the perf record and its budget outcome.
    fn record_notes_and_perf(&mut self, set: u32, exec: &Execution) {
        let stderr = Some(&exec.stderr_tail).filter(|t| !t.trim().is_empty());
        for note in stderr.into_iter().chain(&exec.notes) {
            if !self.out.notes.contains(note) {
                self.out.notes.push(note.clone());
            }
        }
        if set != 0 || !self.opts.perf {
            return;
        }
        match perf_record(self.case, self.name, &self.desc, exec, self.opts) {
            Ok((record, budget)) => {
                self.out.perf = serde_json::to_value(&record).ok();
                match budget {
                    Some(b) if !b.passed() => self.failures.push(b.to_string()),
                    Some(b) => self.out.notes.push(b.to_string()),
                    None => {}
                }
            }
            Err(e) => self.failures.push(format!("timing: {e}")),
        }
    }

    /// The reference against its golden data: every output bit-identical.
    fn check_golden_drift(&mut self, exp: &Expectation, exec: &Execution) {
        *self.out.golden_tensors.get_or_insert(0) += exp.expected.len() as u32;
        for (k, golden_t) in &exp.expected {
            match exec.outputs.get(k) {
                Some(t) if t == golden_t => {}
                Some(t) => self.failures.push(format!(
                    "`{k}` differs from golden data (drift: {})",
                    describe_change(golden_t, t)
                )),
                None => self.failures.push(format!("`{k}` missing")),
            }
        }
    }

    /// The verdicts of an input set: each failed output is a failure; the first set's metrics
    /// (or a later set's, when one of its outputs failed) go on the result.
    fn record_metrics(
        &mut self,
        set: u32,
        set_seed: u64,
        metrics: BTreeMap<String, OutputMetrics>,
    ) {
        for (k, m) in &metrics {
            if !m.passed {
                let which = if set > 0 {
                    format!(" (input set {set}, seed {set_seed})")
                } else {
                    String::new()
                };
                self.failures.push(format!("`{k}`{which}: {}", m.reason));
            }
        }
        if set == 0 || metrics.values().any(|m| !m.passed) {
            self.out.metrics = metrics;
        }
    }

    /// The determinism check ([`super::determinism`]): input set 0 once more, as input set
    /// `index`, untimed and under the alternate poison fill; other bits are a failure unless
    /// the target declares itself nondeterministic (then the result records its reason and
    /// nothing is repeated), and integer elements holding both fills are unwritten.
    fn repeat_first_set(&mut self, target: &mut dyn Target, index: u32) -> Result<(), Ended> {
        if let Some(why) = target.nondeterministic() {
            self.out.nondeterministic = Some(why.to_string());
            return Ok(());
        }
        let Some((first_request, first_exec)) = &self.first_run else {
            return Ok(());
        };
        let request = ExecRequest {
            input_set: index,
            timing: None,
            poison: Fill::Alternate,
            ..first_request.clone()
        };
        let again = target.execute(&request).map_err(|e| {
            (
                e.status(),
                format!("input set 0 given again (the determinism check): {e}"),
            )
        })?;
        self.failures.extend(super::determinism::repeat_findings(
            &first_exec.outputs,
            &again.outputs,
        ));
        Ok(())
    }

    /// Keeps the first set's request and execution; a later set whose outputs are identical to
    /// the first's (on different inputs) fails.
    fn check_against_first_run(&mut self, request: ExecRequest, exec: Execution) {
        if let Some(first) = &self.first_run {
            if let Some(msg) =
                anti_cheat::identical_outputs((&first.0, &first.1), (&request, &exec))
            {
                self.failures.push(msg);
            }
        } else {
            self.first_run = Some((request, exec));
        }
    }
}

/// The first 16 hex digits of blake3 over the case's parameters as JSON (keys sorted).
fn params_digest(params: &serde_json::Value) -> String {
    let text = serde_json::to_string(params).unwrap_or_default();
    blake3::hash(text.as_bytes()).to_hex()[..16].to_string()
}

/// Why a timed execution gives no perf record.
#[derive(Debug, thiserror::Error)]
enum TimingError {
    /// The samples are empty or not finite.
    #[error("the target returned no usable samples: {0}")]
    NoSamples(crate::perf::PerfError),
    /// The setup time or the work does not fit the record.
    #[error(transparent)]
    Record(#[from] crate::perf::PerfError),
}

/// The perf record of a timed execution: raw samples, setup time, the op's FLOPs and bytes,
/// the roofline figures on the run's hardware profile, and the budget outcome there.
fn perf_record(
    case: &Case,
    target: &str,
    desc: &OpDescription,
    exec: &Execution,
    opts: &RunOptions,
) -> Result<(crate::perf::PerfRecord, Option<crate::perf::BudgetOutcome>), TimingError> {
    use crate::perf::{evaluate_budget, stats::median, PerfRecord, PerfRecordBuild, Work};
    let warmup = opts.warmup.unwrap_or(case.perf.warmup);
    let iterations = opts.iterations.unwrap_or(case.perf.iterations);
    let mut record = PerfRecord::from_samples(&case.id, target, exec.timings_us.clone())
        .map_err(TimingError::NoSamples)?
        .with_protocol(warmup, iterations);
    record.params_digest = Some(params_digest(&case.params));
    if exec.cpu_us.len() == exec.timings_us.len() {
        record.cpu_us = exec.cpu_us.clone();
    }
    if let Some(setup) = exec.setup_us {
        record = record.with_setup(vec![setup])?;
    }
    // The compute ceiling is the peak of the op's compute type, as the op describes it.
    let dtype = desc.cost.compute.suite_name();
    let work = Work {
        flops: desc.cost.flops,
        bytes: desc.cost.bytes,
    };
    let profile = opts
        .hardware
        .as_ref()
        .filter(|p| p.peak_flops(dtype).is_ok());
    record = record.with_work(work, profile.map(|p| (p, dtype)))?;
    if let (Some(hw), None) = (&opts.hardware, profile) {
        record = record.on_hardware(hw.id.clone());
    }
    let outcome = match &opts.hardware {
        Some(hw) => case.budgets.get(&hw.id).map(|budget| {
            let m = median(&record.samples_us).unwrap_or(f64::NAN);
            evaluate_budget(&case.id, &hw.id, budget, m, record.roofline.as_ref())
        }),
        None => None,
    };
    Ok((record, outcome))
}

/// The parameters a target's capabilities are checked against: the case's, with the op's
/// default `dtype` where the case leaves it out (a worker declaring `dtypes = ["bf16"]` runs
/// the cases of an FP4 op that write no `dtype`, which are bf16). The request still carries
/// the case's own parameters (targets/PROTOCOL.md, "Requests").
pub fn capability_params(case: &Case) -> std::borrow::Cow<'_, serde_json::Value> {
    let default = ops::find(&case.op).ok().and_then(|f| f.default_dtype());
    match (default, case.params.as_object()) {
        (Some(d), Some(map)) if !map.contains_key(conform_metadata::capabilities::DTYPE_PARAM) => {
            let mut map = map.clone();
            map.insert(
                conform_metadata::capabilities::DTYPE_PARAM.to_string(),
                serde_json::Value::from(d),
            );
            std::borrow::Cow::Owned(serde_json::Value::Object(map))
        }
        _ => std::borrow::Cow::Borrowed(&case.params),
    }
}
