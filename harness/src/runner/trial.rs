//! One trial: one case on one target, over one or more input sets, judged output by output.

use super::expected::{expectation, Expectation};
use super::options::RunOptions;
use crate::golden::diff::describe_change;
use crate::results::{CaseResult, OutputMetrics, Status};
use crate::seed::second_run_seed;
use crate::suite::Case;
use crate::verdict::{evaluate, CheckPolicy, Comparison};
use conform_reference::ops::{self, ElemType, OpDescription};
use conform_targets::target::{Availability, ExecRequest, Execution, Target, TimingRequest};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// The name of the in-process reference target.
pub use conform_targets::REFERENCE_TARGET;

/// The check policy of every output of `case` (read when its suite was loaded); an error
/// names an output that has none.
pub fn policies(
    case: &Case,
    desc: &OpDescription,
) -> Result<BTreeMap<String, CheckPolicy>, String> {
    policies_for(case, desc, false)
}

/// The check policies of every output: the case's own (`own_recipe = false`), or those for a
/// target that runs its own recipe (`checks_without_recipe` where given).
pub fn policies_for(
    case: &Case,
    desc: &OpDescription,
    own_recipe: bool,
) -> Result<BTreeMap<String, CheckPolicy>, String> {
    let typed = if own_recipe {
        &case.policies_without_recipe
    } else {
        &case.policies
    };
    desc.outputs
        .iter()
        .map(|spec| match typed.get(&spec.name) {
            Some(p) => Ok((spec.name.clone(), p.clone())),
            None => Err(format!(
                "output `{}` has no check policy (the case was not loaded by `load_all`, which reads them)",
                spec.name
            )),
        })
        .collect()
}

/// The poison bit patterns of a dtype (what an unwritten element holds).
pub fn poison_bits(dtype: ElemType) -> Vec<u64> {
    use conform_targets::poison;
    match dtype {
        ElemType::Bf16 => vec![poison::BF16 as u64],
        ElemType::F16 => vec![poison::F16 as u64],
        ElemType::F32 => vec![poison::F32 as u64],
        ElemType::F64 => vec![poison::F64],
        ElemType::U8 => vec![poison::U8 as u64],
        ElemType::I32 => vec![poison::I32 as u64],
        ElemType::I64 => vec![poison::I64],
    }
}

fn result(case: &Case, target: &str, seed: u64, status: Status, message: String) -> CaseResult {
    CaseResult {
        id: case.id.clone(),
        suite: case.suite.clone(),
        op: case.op.clone(),
        target: target.to_string(),
        status,
        message,
        seed,
        metrics: BTreeMap::new(),
        duration_ms: 0.0,
        perf: None,
        notes: Vec::new(),
    }
}

/// Runs `case` on `target` with input seed `seed`.
pub fn run_trial(case: &Case, target: &mut dyn Target, seed: u64, opts: &RunOptions) -> CaseResult {
    let start = Instant::now();
    let name = target.name().to_string();
    let mut kept = Vec::new();
    let mut r = run_trial_inner(case, target, seed, opts, &name, &mut kept);
    if let Some(keep) = &opts.keep_outputs {
        // Kept files that could not be written are noted on the result; the verdict stands.
        for s in &kept {
            if let Some(e) = &s.error {
                r.notes
                    .push(crate::messages::keep::set_not_written(s.set, &s.path, e));
            }
        }
        let unfinished = crate::interrupt::received().is_some();
        if let Some(e) = keep.record(&r, kept, unfinished) {
            r.notes.push(crate::messages::keep::index_not_written(&e));
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

/// What a trial needs once it is admitted, or the result that ends it before it runs.
enum Admission {
    Run {
        desc: OpDescription,
        policies: BTreeMap<String, CheckPolicy>,
        recipe: Option<String>,
    },
    Done(CaseResult),
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
    use Admission::Done;
    let is_reference = name == REFERENCE_TARGET;
    if let Availability::Unavailable { reason } = target.availability() {
        return Done(if opts.required_targets.iter().any(|t| t == name) {
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
    if let Err(skip) = target.supports(&case.op, &case.params) {
        return Done(result(case, name, seed, Status::Skipped, skip.0));
    }
    let desc = match ops::find(&case.op).and_then(|f| f.describe(&case.params)) {
        Ok(d) => d,
        Err(e) => return Done(result(case, name, seed, Status::Error, e.to_string())),
    };
    let mut policies = match policies(case, &desc) {
        Ok(p) => p,
        Err(e) => return Done(result(case, name, seed, Status::Error, e)),
    };
    let need = super::memory::estimate(&desc, policies.values().any(|p| p.needs().oracle));
    if need.total() > opts.max_memory as f64 {
        let message = crate::messages::over_memory_limit(&need, opts.max_memory);
        return Done(result(case, name, seed, Status::Error, message));
    }
    // Which recipe the target is asked to emulate.
    let recipe = if is_reference {
        Some(case.recipe.clone())
    } else {
        let caps = target.capabilities();
        let declared = caps
            .ops
            .get(&case.op)
            .map(|o| o.recipes.clone())
            .unwrap_or_default();
        if declared.iter().any(|r| r == &case.recipe) {
            Some(case.recipe.clone())
        } else {
            // The target runs its own recipe: outputs with a recipe-free policy are judged by
            // it (against the oracle); an output still checked exactly against the case's
            // recipe makes the case inapplicable.
            policies = match policies_for(case, &desc, true) {
                Ok(p) => p,
                Err(e) => return Done(result(case, name, seed, Status::Error, e)),
            };
            let exact: Vec<&str> = policies
                .values()
                .filter(|p| p.is_exact())
                .map(|p| p.name())
                .collect();
            if !exact.is_empty() {
                return Done(result(
                    case,
                    name,
                    seed,
                    Status::Skipped,
                    format!(
                        "this case checks {} against recipe `{}`, which the target does not implement (it declares: {})",
                        exact.join("/"),
                        case.recipe,
                        if declared.is_empty() { "none".to_string() } else { declared.join(", ") }
                    ),
                ));
            }
            None
        }
    };
    Admission::Run {
        desc,
        policies,
        recipe,
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
    let is_reference = name == REFERENCE_TARGET;
    let (desc, policies, recipe) = match admit(case, target, seed, opts, name) {
        Admission::Run {
            desc,
            policies,
            recipe,
        } => (desc, policies, recipe),
        Admission::Done(r) => return r,
    };
    let want_oracle = policies.values().any(|p| p.needs().oracle);
    let sets = conform_targets::anti_cheat::input_sets(name, opts.worker_input_sets);
    let mut out = result(case, name, seed, Status::Passed, String::new());
    let mut failures = Vec::new();
    let mut set_seed = seed;
    let mut first_run: Option<(ExecRequest, Execution)> = None;
    for set in 0..sets {
        if set > 0 {
            set_seed = second_run_seed(set_seed);
        }
        let golden = if is_reference && set == 0 {
            opts.golden.as_deref()
        } else {
            None
        };
        let computed = match (&opts.expectations, golden) {
            (Some(cache), None) => cache.get(case, set_seed, want_oracle, opts.threads),
            _ => expectation(case, set_seed, golden, want_oracle, opts.threads).map(Arc::new),
        };
        let exp = match computed {
            Ok(e) => e,
            Err(e) => {
                out.status = Status::Error;
                out.message = e.to_string();
                return out;
            }
        };
        let timing = (opts.perf && set == 0).then(|| TimingRequest {
            warmup: opts.warmup.unwrap_or(case.perf.warmup),
            iterations: opts.iterations.unwrap_or(case.perf.iterations),
        });
        let request = ExecRequest {
            case_id: case.id.clone(),
            input_set: set,
            op: case.op.clone(),
            params: case.params.clone(),
            recipe: recipe.clone(),
            inputs: exp.inputs.clone(),
            expected_outputs: desc.outputs.clone(),
            timing,
        };
        let executed = target.execute(&request);
        if let Some(keep) = &opts.keep_outputs {
            kept.push(keep.write_set(&super::keep::SetRecord {
                case,
                target: name,
                set,
                requested_recipe: recipe.as_deref(),
                expectation: &exp,
                outputs: executed.as_ref().ok().map(|x| &x.outputs),
            }));
        }
        let exec = match executed {
            Ok(x) => x,
            Err(e) => {
                out.status = e.status();
                out.message = if set > 0 {
                    format!("input set {set} (seed {set_seed}): {e}")
                } else {
                    e.to_string()
                };
                return out;
            }
        };
        if !exec.stderr_tail.trim().is_empty() {
            out.notes.push(exec.stderr_tail.clone());
        }
        out.notes.extend(exec.notes.iter().cloned());
        if set == 0 && opts.perf {
            match perf_record(case, name, &desc, &exec, opts) {
                Ok((record, budget)) => {
                    out.perf = serde_json::to_value(&record).ok();
                    if let Some(b) = budget {
                        if !b.passed {
                            failures.push(b.message);
                        } else {
                            out.notes.push(b.message);
                        }
                    }
                }
                Err(e) => failures.push(format!("timing: {e}")),
            }
        }
        if exp.from_golden {
            for (k, golden_t) in &exp.expected {
                match exec.outputs.get(k) {
                    Some(t) if t == golden_t => {}
                    Some(t) => failures.push(format!(
                        "`{k}` differs from golden data (drift: {})",
                        describe_change(golden_t, t)
                    )),
                    None => failures.push(format!("`{k}` missing")),
                }
            }
        }
        let judged = judge(&desc, &policies, &exp, &exec, opts);
        match judged {
            Ok(metrics) => {
                for (k, m) in &metrics {
                    if !m.passed {
                        let which = if set > 0 {
                            format!(" (input set {set}, seed {set_seed})")
                        } else {
                            String::new()
                        };
                        failures.push(format!("`{k}`{which}: {}", m.reason));
                    }
                }
                if set == 0 || metrics.values().any(|m| !m.passed) {
                    out.metrics = metrics;
                }
            }
            Err(e) => {
                out.status = Status::Error;
                out.message = e;
                return out;
            }
        }
        if let Some(first) = &first_run {
            if let Some(msg) = conform_targets::anti_cheat::identical_outputs(
                (&first.0, &first.1),
                (&request, &exec),
            ) {
                failures.push(msg);
            }
        } else {
            first_run = Some((request, exec));
        }
        if !failures.is_empty() {
            break;
        }
    }
    if !failures.is_empty() {
        out.status = Status::Failed;
        out.message = failures.join("; ");
    }
    out
}

pub(crate) fn judge(
    desc: &OpDescription,
    policies: &BTreeMap<String, CheckPolicy>,
    exp: &Expectation,
    exec: &Execution,
    opts: &RunOptions,
) -> Result<BTreeMap<String, OutputMetrics>, String> {
    let mut metrics = BTreeMap::new();
    for spec in &desc.outputs {
        let policy = &policies[&spec.name];
        let expected = exp
            .expected
            .get(&spec.name)
            .ok_or_else(|| format!("the reference produced no `{}`", spec.name))?;
        let Some(actual) = exec.outputs.get(&spec.name) else {
            metrics.insert(
                spec.name.clone(),
                OutputMetrics {
                    policy: policy.label(spec.dtype),
                    passed: false,
                    reason: "output missing".into(),
                    ..Default::default()
                },
            );
            continue;
        };
        let poison = poison_bits(spec.dtype);
        let mut cmp = Comparison::new(spec, actual, expected).with_poison(&poison);
        let oracle_t = exp.oracle.as_ref().and_then(|o| o.get(&spec.name));
        if let Some(o) = oracle_t {
            cmp = cmp.with_oracle(o).with_baseline(expected);
        }
        let m = evaluate(policy, &cmp, opts.threads).map_err(|e| e.to_string())?;
        metrics.insert(spec.name.clone(), m);
    }
    Ok(metrics)
}

/// The first 16 hex digits of blake3 over the case's parameters as JSON (keys sorted).
fn params_digest(params: &serde_json::Value) -> String {
    let text = serde_json::to_string(params).unwrap_or_default();
    blake3::hash(text.as_bytes()).to_hex()[..16].to_string()
}

/// The perf record of a timed execution: raw samples, setup time, the op's FLOPs and bytes,
/// the roofline figures on the run's hardware profile, and the budget outcome there.
fn perf_record(
    case: &Case,
    target: &str,
    desc: &OpDescription,
    exec: &Execution,
    opts: &RunOptions,
) -> Result<(crate::perf::PerfRecord, Option<crate::perf::BudgetOutcome>), String> {
    use crate::perf::{evaluate_budget, stats::median, PerfRecord, PerfRecordBuild, Work};
    let warmup = opts.warmup.unwrap_or(case.perf.warmup);
    let iterations = opts.iterations.unwrap_or(case.perf.iterations);
    let mut record = PerfRecord::from_samples(&case.id, target, exec.timings_us.clone())
        .map_err(|e| format!("the target returned no usable samples: {e}"))?
        .with_protocol(warmup, iterations);
    record.params_digest = Some(params_digest(&case.params));
    if let Some(setup) = exec.setup_us {
        record = record.with_setup(vec![setup]).map_err(|e| e.to_string())?;
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
    record = record
        .with_work(work, profile.map(|p| (p, dtype)))
        .map_err(|e| e.to_string())?;
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
