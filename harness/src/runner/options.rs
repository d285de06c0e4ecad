//! What a run does.

use conform_reference::parallel::Threads;

#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Verify the reference target's outputs against the golden store (the main job).
    pub golden: Option<std::sync::Arc<crate::golden::GoldenStore>>,
    /// Which seed each case gets: its own, `--seed` (replay) or a fresh one (`--fresh-seeds`).
    pub seeds: crate::seed::SeedPolicy,
    /// Ask targets for timings — `--perf`.
    pub perf: bool,
    /// Override warm-up / iteration counts of every case.
    pub warmup: Option<u32>,
    pub iterations: Option<u32>,
    /// Threads for the reference computations (results never depend on it).
    pub threads: Threads,
    /// Targets that must be available: a missing one is an error, not a skip.
    pub required_targets: Vec<String>,
    /// How many input sets a worker target runs per case (anti-cheat; at least 2).
    pub worker_input_sets: u32,
    /// The hardware profile timings are judged against (roofline figures and budgets).
    pub hardware: Option<crate::perf::HardwareProfile>,
    /// Append each finished trial's result as one JSON line here while the run goes on, so
    /// even a SIGKILL leaves the finished cases readable (`--json PATH` journals to
    /// `PATH.journal`, removed once PATH is written).
    pub journal: Option<std::path::PathBuf>,
    /// Cases whose estimated memory exceeds this many bytes end as `error` before anything
    /// is allocated (`--max-memory`; default: half of the available memory).
    pub max_memory: u64,
    /// Expectations shared by every trial that runs with these options: a case's inputs,
    /// recipe outputs and oracle are computed once per input seed, whatever the number of
    /// targets (`None`: computed per trial).
    pub expectations: Option<std::sync::Arc<super::expected::ExpectationCache>>,
    /// Write every executed input set's inputs, outputs, expectation and oracle here
    /// (`--keep-outputs DIR`), listed in `DIR/index.json`.
    pub keep_outputs: Option<std::sync::Arc<super::keep::KeepOutputs>>,
    /// Target name -> the declaration (`target.toml`) of each worker given by path (`--worker`,
    /// `validate`), recorded in the results so replay lines can name it.
    pub worker_declarations: std::collections::BTreeMap<String, std::path::PathBuf>,
    /// The project root the run was given, absolute (`--root`, `CONFORM_ROOT`), recorded in the
    /// results so replay lines can name it.
    pub root: Option<String>,
    /// The first input set of the coming cases, drawn one case ahead on a second thread
    /// (set by the runner for runs with one target; `None`: each trial draws its own).
    pub prefetch: Option<std::sync::Arc<super::prefetch::InputPrefetch>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            golden: None,
            seeds: crate::seed::SeedPolicy::Suite,
            perf: false,
            warmup: None,
            iterations: None,
            threads: Threads::available(),
            required_targets: Vec::new(),
            worker_input_sets: 2,
            hardware: None,
            journal: None,
            max_memory: super::memory::default_limit(),
            expectations: None,
            keep_outputs: None,
            worker_declarations: Default::default(),
            root: None,
            prefetch: None,
        }
    }
}

impl RunOptions {
    /// The required targets named by `CONFORM_REQUIRE_TARGETS`, read as the target registry
    /// reads it (one parser: comma- or space-separated).
    pub fn required_from_env() -> Vec<String> {
        conform_targets::registry::required_targets()
            .into_iter()
            .collect()
    }
}
