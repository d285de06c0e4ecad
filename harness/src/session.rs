//! One run of selected cases against targets, as a program asks for it: the library's entry
//! point behind `conform run`, `conform validate` and `conform perf record`. [`execute`] loads
//! the suites, opens the targets and the golden store, runs every selected case and returns
//! the typed results with their verdict; [`write_outputs`] writes the results files. Nothing
//! here prints: the caller presents the outcome (the `conform` CLI prints its summary).

use crate::exit_code;
use crate::golden::{GoldenError, GoldenStore};
use crate::perf::{HardwareProfile, PerfError};
use crate::project::{CaseQuery, Paths, SelectError};
use crate::report::ReportError;
use crate::results::{AbResults, NotTimed, RunResults, Status};
use crate::runner::{self, RunOptions, REFERENCE_TARGET};
use crate::suite::Case;
use conform_reference::parallel::Threads;
use conform_targets::{registry, Target, WorkerTarget};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a run does: which cases, on which targets, with which options, and which files it
/// writes. `RunRequest::default()` is the main job: every quick case on the reference,
/// verified against the golden store, nothing written.
#[derive(Clone, Debug, Default)]
pub struct RunRequest {
    /// The cases.
    pub query: CaseQuery,
    /// Targets by name (empty, and no `workers`: the reference).
    pub targets: Vec<String>,
    /// Workers outside targets/, by the path of their declaration (or its directory).
    pub workers: Vec<PathBuf>,
    /// Which input seed each case gets (its own, one for all, or fresh ones).
    pub seeds: crate::seed::SeedPolicy,
    /// The results JSON to write.
    pub json: Option<PathBuf>,
    /// The JUnit XML to write.
    pub junit: Option<PathBuf>,
    /// The directory of the HTML report to write.
    pub report: Option<PathBuf>,
    /// Keep every executed input set's tensors in this directory.
    pub keep_outputs: Option<PathBuf>,
    /// Ask targets for timings.
    pub perf: bool,
    /// Every case's warm-up count under `perf`.
    pub warmup: Option<u32>,
    /// Every case's iteration count under `perf`.
    pub iterations: Option<u32>,
    /// Threads for reference computations and, with one target, for drawing the coming cases'
    /// inputs ahead (default: every core).
    pub threads: Option<usize>,
    /// Do not verify the reference target against the golden store.
    pub no_golden: bool,
    /// Hardware profile (ci/hardware/<NAME>.toml; `this-cpu` under `perf` without it).
    pub hardware: Option<String>,
    /// Memory limit per case in bytes (default: half of the available memory).
    pub max_memory: Option<u64>,
    /// A run whose every case was skipped passes instead of judging nothing.
    pub allow_skips: bool,
    /// Under `perf`: time every other target against this one (A/B).
    pub against: Option<String>,
    /// Relative slowdown that fails the A/B comparison (default 0.03).
    pub ab_threshold: Option<f64>,
    /// One-sided level of the A/B ratio interval's bounds (default: the gate's).
    pub ab_alpha: Option<f64>,
    /// Rounds of the A/B comparison, each in fresh processes (default:
    /// [`runner::ab::DEFAULT_ROUNDS`]).
    pub ab_rounds: Option<u32>,
    /// Targets that must be available (besides `CONFORM_REQUIRE_TARGETS`).
    pub require: Vec<String>,
    /// Journal the finished trials beside this output when there is no `json`.
    pub journal_beside: Option<PathBuf>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The cases could not be selected.
    #[error(transparent)]
    Select(#[from] SelectError),
    /// The selection matched no case.
    #[error("{}", crate::messages::no_cases_selected())]
    NoCases,
    /// A target that cannot be opened (unknown, a bad declaration, named twice).
    #[error(transparent)]
    Targets(#[from] OpenTargetError),
    /// `against` and its settings cannot apply.
    #[error(transparent)]
    AbSettings(#[from] AbSettingsError),
    /// The hardware profile does not load.
    #[error(transparent)]
    Hardware(#[from] PerfError),
    /// The golden store cannot be opened.
    #[error(transparent)]
    Golden(#[from] GoldenError),
    /// The directory of kept outputs cannot be used.
    #[error(transparent)]
    KeepOutputs(#[from] runner::keep::KeepError),
}

/// Why a target could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenTargetError {
    /// Unknown, or its declaration does not load.
    #[error(transparent)]
    Registry(#[from] conform_targets::registry::RegistryError),
    /// A `--worker` path that cannot be resolved.
    #[error("{}: {error}", path.display())]
    WorkerPath {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A `--worker` declaration that does not load.
    #[error(transparent)]
    Worker(#[from] conform_targets::worker::ConfigError),
    /// A `--worker` directory named like another target of the run.
    #[error(
        "two targets named `{0}`: a --worker directory is named like another target of the \
         run; run them separately"
    )]
    Duplicate(String),
}

/// Why the A/B settings of `against` cannot apply.
#[derive(Debug, thiserror::Error)]
pub enum AbSettingsError {
    /// `against` without `perf`.
    #[error("--against times the targets against another one: it needs --perf")]
    NeedsPerf,
    /// A threshold out of range.
    #[error("--ab-threshold: {0}")]
    Threshold(conform_metadata::compare::InvalidSetting),
    /// A level out of range.
    #[error("--ab-alpha: {0}")]
    Alpha(conform_metadata::compare::InvalidSetting),
}

/// Why an output of a run cannot be written, found before any case runs.
#[derive(Debug, thiserror::Error)]
pub enum OutputCheckError {
    /// A results file or the report directory.
    #[error(transparent)]
    Path(#[from] crate::atomic_file::OutputPathError),
    /// The directory of kept outputs.
    #[error(transparent)]
    KeepOutputs(#[from] runner::keep::KeepError),
}

/// What a finished run judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunVerdict {
    /// Every judged case passed (and no target was slower under A/B).
    Passed,
    /// A case failed, or a target was slower under A/B.
    Failed,
    /// Every selected case was skipped (and skips were not allowed).
    NothingJudged,
    /// Nothing failed, but the A/B comparison could not judge a case: INCONCLUSIVE (too few
    /// rounds, rounds that disagree) or not timed on both sides.
    Inconclusive,
    /// A signal stopped the run (its number).
    Interrupted(i32),
}

impl RunVerdict {
    /// The exit code the table documents for this verdict.
    pub fn exit_code(self) -> i32 {
        match self {
            RunVerdict::Passed => exit_code::SUCCESS,
            RunVerdict::Failed => exit_code::FAILURE,
            RunVerdict::NothingJudged => exit_code::NOTHING_JUDGED,
            RunVerdict::Inconclusive => exit_code::INCONCLUSIVE,
            RunVerdict::Interrupted(sig) => crate::interrupt::exit_code(sig),
        }
    }
}

/// A finished run.
#[derive(Debug)]
pub struct RunOutcome {
    /// Every case's result (and the A/B comparison when asked for).
    pub results: RunResults,
    /// What the run judged.
    pub verdict: RunVerdict,
    /// Where the input sets were kept, and how many.
    pub kept: Option<(PathBuf, usize)>,
}

/// Every target name known here: the reference and each `targets/<name>/target.toml`.
pub fn known_targets(paths: &Paths) -> Vec<String> {
    registry::known(&paths.root)
}

/// Opens the named targets (the reference in-process; workers lazily, on first use; a worker
/// directory by its path): [`registry::open`], its error as the user's message.
pub fn open_targets(
    paths: &Paths,
    names: &[String],
    threads: Threads,
) -> Result<Vec<Box<dyn Target>>, OpenTargetError> {
    Ok(registry::open(&paths.root, names, threads)?)
}

/// Opens the worker a path to its `target.toml` (or its directory) names; returns it with the
/// absolute path of its declaration (what replay lines name).
pub fn open_worker(
    paths: &Paths,
    worker: &Path,
) -> Result<(WorkerTarget, PathBuf), OpenTargetError> {
    let dir = if worker.is_dir() {
        worker.to_path_buf()
    } else {
        worker
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_else(|| PathBuf::from("."))
    };
    let dir = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    };
    // Absolute, so ${TARGET_DIR} in the declaration means the same from any working directory.
    let dir = std::fs::canonicalize(&dir).map_err(|error| OpenTargetError::WorkerPath {
        path: worker.to_path_buf(),
        error,
    })?;
    let w = WorkerTarget::from_dir(&paths.root, &dir)?;
    Ok((w, dir.join("target.toml")))
}

/// Runs the request's cases on its targets; or why nothing ran. Installs the SIGINT / SIGTERM
/// handlers (a signal stops the run at the next case: [`RunVerdict::Interrupted`]). Writes no
/// results file: [`write_outputs`] does. The run's progress goes to `progress`.
pub fn execute(
    paths: &Paths,
    req: &RunRequest,
    progress: &mut dyn runner::RunProgress,
) -> Result<RunOutcome, RunError> {
    let selected = req.query.load_selected(paths)?;
    let chosen: Vec<_> = selected.iter().collect();
    if chosen.is_empty() {
        return Err(RunError::NoCases);
    }
    let names = if req.targets.is_empty() && req.workers.is_empty() {
        vec![REFERENCE_TARGET.to_string()]
    } else {
        req.targets.clone()
    };
    let threads = req.threads.map(Threads).unwrap_or_default();
    let ab_gate = ab_settings(req)?;
    let mut against = match &req.against {
        Some(name) => open_targets(paths, std::slice::from_ref(name), threads)?.pop(),
        None => None,
    };
    let mut worker_declarations = std::collections::BTreeMap::new();
    let mut targets = open_targets(paths, &names, threads).and_then(|mut t| {
        for w in &req.workers {
            let (worker, decl) = open_worker(paths, w)?;
            if t.iter().any(|o| o.name() == worker.name()) {
                return Err(OpenTargetError::Duplicate(worker.name().to_string()));
            }
            worker_declarations.insert(worker.name().to_string(), decl);
            t.push(Box::new(worker));
        }
        Ok(t)
    })?;
    let hardware = hardware_profile(paths, req)?;
    // The golden store is opened (and its MANIFEST checked) whenever the reference target is
    // verified against it: a missing or malformed manifest stops the run before any case.
    let verifies_golden = !req.no_golden && targets.iter().any(|t| t.name() == REFERENCE_TARGET);
    let golden = if verifies_golden {
        Some(Arc::new(GoldenStore::open(&paths.golden)?))
    } else {
        None
    };
    let keep_outputs = match &req.keep_outputs {
        Some(dir) => Some(Arc::new(runner::keep::KeepOutputs::open(dir)?)),
        None => None,
    };
    let mut opts = run_options(req, threads);
    opts.golden = golden;
    opts.hardware = hardware;
    opts.keep_outputs = keep_outputs;
    opts.worker_declarations = worker_declarations;
    opts.root = paths.given_root();
    crate::interrupt::install();
    conform_targets::worker::live::clean_stale_scratch(
        &conform_targets::worker::default_scratch_root(),
    );
    let mut results = runner::run_all(&chosen, &mut targets, &opts, progress);
    if let (Some(against), Some(settings)) = (against.as_mut(), ab_gate)
        && crate::interrupt::received().is_none()
    {
        results.ab = Some(run_ab(
            &chosen,
            &results,
            &mut targets,
            against.as_mut(),
            &settings,
        ));
    }
    // Workers are shut down (and their scratch removed) before anything is reported.
    drop(targets);
    drop(against);
    let verdict = verdict(&results, req.allow_skips);
    let kept = opts
        .keep_outputs
        .as_deref()
        .map(|k| (k.dir.clone(), k.len()));
    Ok(RunOutcome {
        results,
        verdict,
        kept,
    })
}

/// What the run of `req` had finished when a second SIGINT / SIGTERM (`sig`) came: its journal
/// read back, marked interrupted by that signal; None without a journal (or one that does not
/// read). The CLI gives [`crate::interrupt::set_last_resort`] a writer of these.
pub fn recover_from_journal(req: &RunRequest, sig: i32) -> Option<RunResults> {
    let journal = req
        .json
        .as_deref()
        .or(req.journal_beside.as_deref())
        .and_then(runner::journal::path_for_output)?;
    let text = crate::input_file::read_text(&journal, crate::input_file::Limit::RESULTS).ok()?;
    let mut results = runner::journal::recover(&text).ok()?;
    results.interrupted = Some(crate::interrupt::signal_name(sig));
    Some(results)
}

/// The options a request gives a run (golden store, hardware profile and kept outputs are the
/// caller's).
fn run_options(req: &RunRequest, threads: Threads) -> RunOptions {
    RunOptions {
        golden: None,
        seeds: req.seeds,
        perf: req.perf,
        warmup: req.warmup,
        iterations: req.iterations,
        threads,
        required_targets: RunOptions::required_from_env()
            .into_iter()
            .chain(req.require.iter().cloned())
            .collect(),
        worker_input_sets: 2,
        hardware: None,
        journal: req
            .json
            .as_deref()
            .or(req.journal_beside.as_deref())
            .and_then(runner::journal::path_for_output),
        max_memory: req.max_memory.unwrap_or_else(runner::memory::default_limit),
        expectations: None,
        keep_outputs: None,
        worker_declarations: Default::default(),
        root: None,
        prefetch: None,
    }
}

/// The hardware profile a timing run uses when none is named.
pub const DEFAULT_HARDWARE: &str = "this-cpu";

/// The profile the request names ([`DEFAULT_HARDWARE`] under `perf` without one), when timing:
/// the project's file, else the built-in profile (`perf::built_in_profiles::project_profile`).
fn hardware_profile(paths: &Paths, req: &RunRequest) -> Result<Option<HardwareProfile>, PerfError> {
    if !(req.perf || req.hardware.is_some()) {
        return Ok(None);
    }
    let name = req
        .hardware
        .clone()
        .unwrap_or_else(|| DEFAULT_HARDWARE.to_string());
    crate::perf::built_in_profiles::project_profile(&paths.root, &name).map(Some)
}

/// The run's verdict: interrupted, failed (or slower under A/B), nothing judged, A/B
/// inconclusive, or passed.
fn verdict(results: &RunResults, allow_skips: bool) -> RunVerdict {
    let ab_slower = results
        .ab
        .as_ref()
        .is_some_and(|ab| ab.comparison.has_regression());
    let ab_undecided = results
        .ab
        .as_ref()
        .is_some_and(|ab| ab.comparison.has_inconclusive() || !ab.not_timed.is_empty());
    let all_skipped = results.cases.iter().all(|c| c.status == Status::Skipped);
    if let Some(sig) = crate::interrupt::received() {
        RunVerdict::Interrupted(sig)
    } else if results.cases.iter().any(|c| c.status.is_failure()) || ab_slower {
        RunVerdict::Failed
    } else if all_skipped && !allow_skips {
        RunVerdict::NothingJudged
    } else if ab_undecided {
        RunVerdict::Inconclusive
    } else {
        RunVerdict::Passed
    }
}

/// The A/B settings of `against` (None without it); an error when they cannot apply.
fn ab_settings(req: &RunRequest) -> Result<Option<runner::ab::AbSettings>, AbSettingsError> {
    if req.against.is_none() {
        return Ok(None);
    }
    if !req.perf {
        return Err(AbSettingsError::NeedsPerf);
    }
    let mut gate = runner::ab::rounds_gate(
        crate::perf::GateConfig::with_threshold(req.ab_threshold.unwrap_or(0.03))
            .map_err(AbSettingsError::Threshold)?,
    );
    if let Some(alpha) = req.ab_alpha {
        gate.ci_alpha = alpha;
        gate.validate().map_err(AbSettingsError::Alpha)?;
    }
    Ok(Some(runner::ab::AbSettings {
        gate,
        rounds: req.ab_rounds.unwrap_or(runner::ab::DEFAULT_ROUNDS),
        warmup: req.warmup,
        iterations: req.iterations,
    }))
}

/// Every target but the one compared against, timed against it.
fn run_ab(
    cases: &[&Case],
    results: &RunResults,
    targets: &mut [Box<dyn Target>],
    against: &mut dyn Target,
    settings: &runner::ab::AbSettings,
) -> AbResults {
    let mut ab = AbResults {
        against: against.name().to_string(),
        comparison: crate::perf::Comparison {
            config: settings.gate,
            cases: Vec::new(),
        },
        not_timed: Vec::new(),
    };
    for t in targets.iter_mut() {
        if t.name() == against.name() {
            continue;
        }
        let name = t.name().to_string();
        let o = runner::ab::ab_compare(cases, results, t.as_mut(), against, settings);
        ab.comparison.cases.extend(o.comparison.cases);
        ab.not_timed
            .extend(o.not_timed.into_iter().map(|(id, reason)| NotTimed {
                id,
                target: name.clone(),
                reason,
            }));
    }
    ab
}

/// Checks, before any case runs, that every output the run will write can be written: `json`,
/// `junit`, `report`, `keep_outputs` (created here when missing) and the `extra` files of the
/// caller.
pub fn check_output_paths(req: &RunRequest, extra: &[&Path]) -> Result<(), OutputCheckError> {
    let files = req.json.iter().chain(&req.junit).map(PathBuf::as_path);
    for p in files.chain(extra.iter().copied()) {
        crate::atomic_file::check_writable(p)?;
    }
    if let Some(dir) = &req.keep_outputs {
        runner::keep::check_dir(dir)?;
    }
    if let Some(dir) = &req.report {
        crate::atomic_file::check_dir_target(dir)?;
    }
    Ok(())
}

/// A results file a run wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputKind {
    /// The results JSON.
    Results,
    /// The JUnit XML.
    Junit,
    /// The HTML report (`DIR/index.html`).
    Report,
}

/// A results file that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The results could not be serialised.
    #[error(transparent)]
    Serialise(#[from] serde_json::Error),
    /// A file could not be written (or the JUnit XML not made).
    #[error("{}: {cause}", .path.display())]
    Write { path: PathBuf, cause: String },
    /// The report could not be rendered or written.
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// Writes the JSON, JUnit and report files the request asks for. Each is attempted even when
/// another could not be written (one lost file must not cost the others); one entry per file,
/// in that order: its path, or why it was not written.
pub fn write_outputs(
    results: &RunResults,
    req: &RunRequest,
) -> Vec<Result<(OutputKind, PathBuf), OutputError>> {
    let mut done = Vec::new();
    let write_err = |p: &Path| {
        let path = p.to_path_buf();
        move |e: &dyn std::fmt::Display| OutputError::Write {
            path,
            cause: e.to_string(),
        }
    };
    if let Some(p) = &req.json {
        done.push((|| {
            let text = serde_json::to_string_pretty(results)?;
            crate::atomic_file::write(p, text.as_bytes()).map_err(|e| write_err(p)(&e))?;
            // The results file is whole: the journal has served its purpose.
            if let Some(j) = runner::journal::path_for_output(p) {
                let _ = std::fs::remove_file(j);
            }
            Ok((OutputKind::Results, p.clone()))
        })());
    }
    if let Some(p) = &req.junit {
        done.push((|| {
            let mut xml = Vec::new();
            runner::junit::write_junit(results, &mut xml).map_err(|e| write_err(p)(&e))?;
            crate::atomic_file::write(p, &xml).map_err(|e| write_err(p)(&e))?;
            Ok((OutputKind::Junit, p.clone()))
        })());
    }
    if let Some(dir) = &req.report {
        done.push((|| {
            let source = req.json.clone().unwrap_or_else(|| dir.join("results.json"));
            let inputs = crate::report::ReportInputs::from_results(results.clone(), source);
            let page = crate::report::render(&inputs)?;
            let path = crate::report::write(dir, &page)?;
            Ok((OutputKind::Report, path))
        })());
    }
    done
}

/// The perf file of a finished run with timings (`conform perf record`): its environment
/// (this build, the machine, the project's git commit, the tier and the seed policy) and every
/// timed case's samples.
pub fn perf_file(
    paths: &Paths,
    req: &RunRequest,
    results: &RunResults,
) -> Result<crate::perf::PerfFile, PerfError> {
    use crate::perf::{EnvironmentCapture, PerfFile, PerfFileIo};
    let mut versions = std::collections::BTreeMap::new();
    versions.insert("conform".to_string(), env!("CARGO_PKG_VERSION").to_string());
    let mut env = crate::perf::Environment::capture(versions, None, git_commit(&paths.root));
    env.tier = Some(
        req.query
            .tier
            .unwrap_or(crate::suite::TierChoice::Quick)
            .name()
            .to_string(),
    );
    env.seed = Some(req.seeds.to_string());
    let mut file = PerfFile::new(env);
    for c in &results.cases {
        if let Some(p) = &c.perf {
            let rec: crate::perf::PerfRecord =
                serde_json::from_value(p.clone()).map_err(PerfError::Serialise)?;
            file.push(rec)?;
        }
    }
    Ok(file)
}

/// The commit checked out at `root`, when it is a git checkout.
fn git_commit(root: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Serves this build's reference over the worker protocol on `input` / `output` (the nightly
/// gate's control: a kept conform binary timed as a worker beside tonight's build); its
/// timings slowed as `CONFORM_REFERENCE_SLOWDOWN` says, like the in-process reference's.
/// `threads`: default every available core.
pub fn serve_reference(
    threads: Option<Threads>,
    input: &mut dyn std::io::BufRead,
    output: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let mut target = conform_targets::ReferenceTarget::new(threads.unwrap_or_default());
    let mut versions = std::collections::BTreeMap::new();
    versions.insert("conform".to_string(), env!("CARGO_PKG_VERSION").to_string());
    conform_targets::serve::serve(
        &mut target,
        "conform-reference",
        env!("CARGO_PKG_VERSION"),
        versions,
        input,
        output,
    )
}
