//! The user-facing messages of the `conform` CLI that belong to no one layer (per command in
//! submodules). The text of a layer's own outcomes lives in that layer, so no arrow runs back
//! up from here: `golden::text` (verify, bless, accept, review), `adequacy::text` (the kill
//! matrix), `runner::keep_text` (kept outputs), `runner::memory::OverMemoryLimit`,
//! `perf::budget` (a budget outcome's `Display`).

pub mod mc2;
pub mod perf;
pub mod perf_history;
pub mod report;

use crate::results::{RunResults, Status};

/// `conform list`: one line per case.
pub fn list_line(id: &str, tier: &str, recipe: &str) -> String {
    format!("{id}  [{tier}] recipe={recipe}")
}

/// `conform list` footer.
pub fn list_footer(n: usize, suites: usize) -> String {
    format!("{n} cases in {suites} suites")
}

/// Nothing matched the selection.
pub fn no_cases_selected() -> String {
    "no case matches the selection (check --suite, --filter and --tier; `conform list` shows every case)".to_string()
}

/// An unknown suite name.
pub fn unknown_suites(names: &[String]) -> String {
    format!(
        "unknown suite(s): {} (see `conform list`)",
        names.join(", ")
    )
}

/// An unknown case id for `explain`.
pub fn unknown_case(id: &str) -> String {
    format!("no case `{id}` (see `conform list`)")
}

/// A suite name given where a case id is expected (`conform explain fa_prefill`).
pub fn suite_not_case(name: &str) -> String {
    format!(
        "no case `{name}`: `{name}` is a suite, not a case id; its cases: `conform list --suite \
         {name}` (then `conform explain <case id>`)"
    )
}

/// Run outside any conform checkout without `--root`.
pub fn no_project_root(cwd: &std::path::Path) -> String {
    format!(
        "no conform project here: neither {} nor any parent holds suites/ and golden/ \
         (run inside a checkout, or pass --root DIR / set CONFORM_ROOT)",
        cwd.display()
    )
}

/// `--root` / `CONFORM_ROOT` names a directory that is not a project root.
pub fn not_a_project_root(root: &std::path::Path) -> String {
    format!(
        "{}: not a conform project root (it must hold suites/ and golden/)",
        root.display()
    )
}

/// Why an unfinished trial has no verdict (its JUnit error and report line).
pub fn unfinished_trial(signal: Option<&str>) -> String {
    format!(
        "not finished: the run was interrupted by {} before this trial ended",
        signal.unwrap_or("a signal")
    )
}

/// `CONFORM_PARENT_PID` names a process that died before conform could tie itself to it.
pub fn parent_gone(pid: i32) -> String {
    format!(
        "conform: the process that started it ({pid}, CONFORM_PARENT_PID) has already ended; stopping (as on SIGTERM)"
    )
}

/// A second SIGINT / SIGTERM came before the run had written its outputs.
pub fn second_signal() -> String {
    "conform: second signal: writing the results of what finished (from the journal) and \
     stopping now"
        .to_string()
}

/// The result of a trial that an interrupt cut short inside the reference (never a verdict:
/// the runner lists the trial as unfinished).
pub fn cancelled_trial() -> String {
    "interrupted: the reference computation was cancelled".to_string()
}

/// An interrupted run: what finished, what did not.
pub fn interrupted(results: &RunResults) -> String {
    format!(
        "interrupted by {}: {} trial(s) finished (in the table above and in the output files asked \
         for, marked interrupted), {} not finished",
        results.interrupted.as_deref().unwrap_or("a signal"),
        results.cases.len(),
        results.unfinished.len()
    )
}

/// A fatal error line.
pub fn error_line(e: &dyn std::fmt::Display) -> String {
    format!("error: {e}")
}

/// The summary table printed after a run: one row per (suite, target).
pub fn summary_table(results: &RunResults) -> String {
    use std::collections::BTreeMap;
    let mut rows: BTreeMap<(String, String), [usize; 6]> = BTreeMap::new();
    for c in &results.cases {
        let r = rows.entry((c.suite.clone(), c.target.clone())).or_default();
        r[Status::ALL.iter().position(|s| *s == c.status).unwrap_or(0)] += 1;
    }
    let mut out = format!(
        "{:<24} {:<14} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}\n",
        "suite", "target", "passed", "failed", "skipped", "error", "timeout", "crashed"
    );
    let mut total = [0usize; 6];
    for ((suite, target), r) in &rows {
        out.push_str(&format!(
            "{:<24} {:<14} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}\n",
            suite, target, r[0], r[1], r[2], r[3], r[4], r[5]
        ));
        for i in 0..6 {
            total[i] += r[i];
        }
    }
    out.push_str(&format!(
        "{:<24} {:<14} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "total", "", total[0], total[1], total[2], total[3], total[4], total[5]
    ));
    out
}

/// Whether, and how much, the reference's outputs were verified against the golden store in a
/// run (None when the reference target did not run): the main job says that it checked the
/// golden data, never leaves it to be assumed.
pub fn golden_verified(results: &RunResults) -> Option<String> {
    let reference: Vec<_> = results
        .cases
        .iter()
        .filter(|c| c.target == conform_targets::REFERENCE_TARGET)
        .collect();
    if reference.is_empty() {
        return None;
    }
    let verified: Vec<u32> = reference.iter().filter_map(|c| c.golden_tensors).collect();
    let tensors: u64 = verified.iter().map(|&n| u64::from(n)).sum();
    Some(if verified.is_empty() {
        format!(
            "golden: not verified: none of the reference's {} trial(s) was compared with the \
             golden store (--no-golden, full-tier cases and other seeds are not; a trial that \
             ended before its comparison says why above)",
            reference.len()
        )
    } else {
        format!(
            "golden: {tensors} output tensor(s) of {} case(s) verified bit for bit against the \
             golden store{}",
            verified.len(),
            match reference.len() - verified.len() {
                0 => String::new(),
                n => format!(
                    " ({n} other reference trial(s) not compared: full tier or another seed)"
                ),
            }
        )
    })
}

/// One finished case, for plain (non-terminal) progress output.
pub fn case_line(status: Status, id: &str, target: &str, ms: f64, message: &str) -> String {
    let mut s = format!(
        "{:<8} {id} [{target}] ({ms:.0} ms)",
        status.name().to_uppercase()
    );
    if !message.is_empty() {
        s.push_str(" — ");
        s.push_str(message.lines().next().unwrap_or(""));
    }
    s
}

/// The replay command of a case: every tier (the id filter picks the one case), its seed, and
/// its target by name, or by the path of its declaration for a worker given by path
/// (`validate`, `run --worker`), and the project root when the run was given one (`--root`,
/// `CONFORM_ROOT`: `root` is then its absolute path), so the line runs when pasted anywhere.
pub fn replay_command(
    id: &str,
    seed: u64,
    target: &str,
    worker: Option<&str>,
    root: Option<&str>,
) -> String {
    let which = match worker {
        Some(decl) => format!("--worker {}", shell_quote(decl)),
        None => format!("--target {}", shell_quote(target)),
    };
    let root = root.map_or_else(String::new, |r| format!(" --root {}", shell_quote(r)));
    format!(
        "conform run --tier all --filter {} --seed {seed} {which}{root}",
        shell_quote(&format!("^{}$", regex_escape(id)))
    )
}

/// Single-quotes `s` for a POSIX shell (as it is when every character is plainly safe).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-=:,".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The declaration path the results record for `target` (a worker given by path), if any.
pub fn worker_declaration<'a>(results: &'a RunResults, target: &str) -> Option<&'a str> {
    results
        .targets
        .iter()
        .find(|t| t.name == target)
        .and_then(|t| t.worker.as_deref())
}

/// Escapes regex metacharacters so a filter matches `s` literally.
pub fn regex_escape(s: &str) -> String {
    let mut o = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            o.push('\\');
        }
        o.push(c);
    }
    o
}

/// Where results were written.
pub fn wrote(what: &str, path: &std::path::Path) -> String {
    format!("wrote {what}: {}", path.display())
}

/// `conform explain`.
pub fn explain(
    case: &crate::suite::Case,
    desc: &conform_reference::ops::OpDescription,
    golden: &std::path::Path,
    definition: &str,
) -> String {
    let mut s = String::new();
    s.push_str(&format!("case        {}\n", case.id));
    s.push_str(&format!(
        "suite       {} ({})\n",
        case.suite,
        case.source.display()
    ));
    s.push_str(&format!("op          {}\n", case.op));
    s.push_str(&format!("tier        {}\n", case.tier.name()));
    s.push_str(&format!("recipe      {}\n", case.recipe));
    s.push_str(&format!("seed        {}\n", case.seed));
    s.push_str(&format!(
        "inputs      {}\n",
        serde_json::to_string(&case.inputs).unwrap_or_default()
    ));
    s.push_str(&format!("params      {}\n", case.params));
    if !case.description.is_empty() {
        s.push_str(&format!("about       {}\n", case.description));
    }
    for r in &case.regimes {
        s.push_str(&format!("regime      {}: {}\n", r.name(), r.description()));
    }
    for r in conform_reference::ops::Regime::ALL
        .into_iter()
        .filter(|r| r.by_runner() && r.applies_to(&case.op))
    {
        s.push_str(&format!(
            "regime      {} (the runner, every case): {}\n",
            r.name(),
            r.description()
        ));
    }
    if let Ok(paths) = conform_reference::ops::find(&case.op).and_then(|f| f.paths(&case.params)) {
        for p in paths.iter().filter(|p| p.reached) {
            s.push_str(&format!("path        {}: {}\n", p.name, p.description));
        }
    }
    for t in &desc.inputs {
        s.push_str(&format!(
            "input       {} {} {:?} axes {:?}\n",
            t.name,
            t.dtype.name(),
            t.shape,
            t.axes
        ));
    }
    for t in &desc.outputs {
        let check = case
            .policies
            .get(&t.name)
            .map(|p| format!("{}: {}", p.label(t.dtype), p.describe()))
            .unwrap_or_else(|| "(none)".into());
        s.push_str(&format!(
            "output      {} {} {:?} axes {:?}; check {}\n",
            t.name,
            t.dtype.name(),
            t.shape,
            t.axes,
            check.trim()
        ));
    }
    s.push_str(&format!(
        "cost        {:.3e} FLOP, {:.3e} bytes\n",
        desc.cost.flops, desc.cost.bytes
    ));
    let gf = golden.join(case.golden_relpath());
    let golden_line = match case.tier {
        crate::suite::Tier::Quick => format!(
            "{}{}",
            gf.display(),
            if gf.exists() { "" } else { " (missing)" }
        ),
        crate::suite::Tier::Full => "digests only, in golden/MANIFEST.toml".to_string(),
    };
    s.push_str(&format!("golden      {golden_line}\n"));
    s.push_str(&format!("definition  {definition}"));
    s
}

/// The ledger's summary of a recipe's knobs: `9 knobs, 5 confirmed, 4 assumed`.
pub fn knob_tally(knobs: &[crate::ledger::CaseKnob]) -> String {
    let parts: Vec<String> = crate::ledger::tally(knobs)
        .into_iter()
        .map(|(st, n)| format!("{n} {}", st.map_or("without a ledger row", |s| s.name())))
        .collect();
    format!("{} knobs, {}", knobs.len(), parts.join(", "))
}

/// `conform explain`: for a case judged against a recipe that models a CANN kernel, the knobs
/// its verdict rests on, each with its ledger status, and the weak ones (assumed, or
/// contradicted and not fixed) named again on one line. None for every other recipe.
pub fn explain_knobs(case: &crate::suite::Case) -> Option<String> {
    use crate::ledger::{self, Status};
    let model = ledger::case_model(&case.op, &case.recipe, &case.params)?;
    let knobs = &model.knobs;
    let mut s = String::new();
    if let Some(d) = &model.dispatch {
        let v = d.variant;
        let socs: Vec<String> = v.socs.iter().map(|s| s.to_string()).collect();
        s.push_str(&format!(
            "variant     {} (tiling key {}, {})\n\
             dispatch    {}\n\
             describes   {}; {}\n",
            v.kernel,
            v.key,
            v.tiling,
            d.detail,
            socs.join(", "),
            v.releases
        ));
        if v.modelled() {
            s.push_str(&format!("preset      {}\n", v.preset));
        } else {
            s.push_str("preset      none: conform has no recipe for this kernel; a device is judged by the checks for a target with its own arithmetic\n");
        }
        if !v.conventions.is_empty() {
            s.push_str(&format!(
                "conventions {} (assumed, and no device is known to share them: a device target is judged by the checks for a target with its own arithmetic)\n",
                v.conventions.join(", ")
            ));
        }
    }
    s.push_str(&format!(
        "knobs       recipe {} models a CANN kernel: {} ({}; `assumed` means no public source says it)\n",
        case.recipe,
        knob_tally(knobs),
        ledger::LEDGER_PATH
    ));
    for k in knobs {
        let status = k.status().map_or("no ledger row", Status::name);
        // A claim's text is its ledger row's (the one source the report prints too).
        if k.knob.is_claim() {
            s.push_str(&format!(
                "knob        {}: {} [{status}]\n",
                k.knob.id,
                k.row.map_or("", |r| r.claim.as_str())
            ));
        } else {
            s.push_str(&format!(
                "knob        {} = {} [{status}]\n",
                k.knob.id, k.knob.value
            ));
        }
    }
    for st in [Status::Assumed, Status::ContradictedNotFixed] {
        let weak: Vec<&str> = knobs
            .iter()
            .filter(|k| k.status() == Some(st))
            .map(|k| k.knob.id.as_str())
            .collect();
        if !weak.is_empty() {
            s.push_str(&format!("{:<11} {}\n", st.name(), weak.join(", ")));
        }
    }
    Some(s.trim_end().to_string())
}

/// `conform explain`: what the case's seed generates, per input tensor. Integer tensors (FP4
/// codes, E8M0 / E4M3 scales) list the distinct values present; float tensors their range and
/// special values.
pub fn explain_inputs(inputs: &conform_reference::ops::TensorMap) -> String {
    use conform_reference::ops::ElemType;
    let mut s = String::from("generated inputs (the case's own seed):");
    for (name, t) in inputs {
        let line = if t.dtype == ElemType::U8 {
            let mut seen = [false; 256];
            for &b in &t.data {
                seen[b as usize] = true;
            }
            format!("values present {}", byte_ranges(&seen))
        } else {
            let v = t.to_f64_vec();
            let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
            let (lo, hi) = finite
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                });
            let count = |f: &dyn Fn(f64) -> bool| v.iter().filter(|&&x| f(x)).count();
            format!(
                "range [{lo:e}, {hi:e}], zeros {}, NaN {}, +Inf {}, -Inf {}",
                count(&|x| x == 0.0),
                count(&|x| x.is_nan()),
                count(&|x| x == f64::INFINITY),
                count(&|x| x == f64::NEG_INFINITY)
            )
        };
        s.push_str(&format!("\n  {name:<12} {:?} {}", t.shape, line));
    }
    s
}

/// `0 1 117-137 253-255`: the bytes present, as ranges.
fn byte_ranges(seen: &[bool; 256]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < 256 {
        if seen[i] {
            let start = i;
            while i + 1 < 256 && seen[i + 1] {
                i += 1;
            }
            parts.push(if start == i {
                format!("{start}")
            } else {
                format!("{start}-{i}")
            });
        }
        i += 1;
    }
    parts.join(" ")
}

/// A failing case after the summary: id, target, message and the replay command.
pub fn failure_block(c: &crate::results::CaseResult, results: &RunResults) -> String {
    format!(
        "\n{} {} [{}]\n  {}\n  replay: {}",
        c.status.name().to_uppercase(),
        c.id,
        c.target,
        c.message.replace('\n', "\n  "),
        replay_command(
            &c.id,
            c.seed,
            &c.target,
            worker_declaration(results, &c.target),
            results.root.as_deref()
        )
    )
}

/// Every selected case was skipped: the run judged nothing, so it is not green.
pub fn nothing_judged_run() -> String {
    "nothing judged: every selected case was skipped (reasons above); exit 4 \
     (pass --allow-skips to accept a run that checks nothing)"
        .to_string()
}

/// The skip reasons of a run, per target (None when nothing was skipped). Printed at the end
/// of every run, on a terminal too, so a skip is never silent.
pub fn skip_summary(results: &RunResults) -> Option<String> {
    use std::collections::BTreeMap;
    let mut by_target: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    for c in results.cases.iter().filter(|c| c.status == Status::Skipped) {
        let reason = c.message.lines().next().unwrap_or("(no reason given)");
        *by_target
            .entry(&c.target)
            .or_default()
            .entry(reason)
            .or_default() += 1;
    }
    if by_target.is_empty() {
        return None;
    }
    let mut s = String::from("skipped:");
    for (target, reasons) in by_target {
        for (reason, n) in reasons {
            s.push_str(&format!("\n  [{target}] {n} case(s): {reason}"));
        }
    }
    Some(s)
}

/// `conform validate` start line.
pub fn validate_start(worker: &str, out: &std::path::Path) -> String {
    format!("validating worker `{worker}`: fresh seeds, every applicable suite, correctness and budgets; report in {}", out.display())
}

/// What a `conform validate` run did not judge, printed after its summary: the cases of ops
/// the worker declares that its own capabilities (dtypes, layouts, limits, `unavailable`)
/// skipped, per op, and the hardware profile the budgets were judged against. A green validate
/// covers only the cases that ran; these lines say which did not.
pub fn validate_coverage(
    results: &RunResults,
    declared_ops: &std::collections::BTreeSet<String>,
    hardware: &str,
) -> Vec<String> {
    use std::collections::BTreeMap;
    let mut per_op: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for c in results
        .cases
        .iter()
        .filter(|c| declared_ops.contains(&c.op))
    {
        let e = per_op.entry(&c.op).or_default();
        e.1 += 1;
        if c.status == Status::Skipped {
            e.0 += 1;
        }
    }
    let mut lines: Vec<String> = per_op
        .into_iter()
        .filter(|(_, (skipped, _))| *skipped > 0)
        .map(|(op, (skipped, all))| {
            format!(
                "note: {skipped} of the {all} case(s) of `{op}`, an op this worker declares, were \
                 skipped by its declared capabilities and not judged (reasons above): a green \
                 validate covers only the cases that ran"
            )
        })
        .collect();
    lines.push(format!(
        "budgets: judged against the hardware profile `{hardware}` (--hardware NAME for another: \
         a suite's budgets name the ci/hardware profile they hold for)"
    ));
    lines
}

/// Why a `--threads` value cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ThreadsError {
    #[error("`{0}` is not a whole number of threads")]
    NotANumber(String),
    #[error("at least 1 thread is needed")]
    Zero,
    #[error(
        "at most {max} on this machine ({per_core} per available core; results never depend on \
         the count)",
        per_core = conform_reference::parallel::MAX_THREADS_PER_CORE
    )]
    OverMax { max: usize },
}

/// Parses a `--threads` value: a whole number from 1 to `max` (this machine's ceiling).
pub fn parse_threads(s: &str, max: usize) -> Result<usize, ThreadsError> {
    let n: u128 = s
        .trim()
        .parse()
        .map_err(|_| ThreadsError::NotANumber(s.to_string()))?;
    if n == 0 {
        return Err(ThreadsError::Zero);
    }
    if n > max as u128 {
        return Err(ThreadsError::OverMax { max });
    }
    Ok(n as usize)
}
