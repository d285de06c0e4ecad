//! The adequacy report: the kill matrix of every fault over every suite and seed set, as
//! `conform adequacy --json` writes it (format `conform-adequacy-v1`, described in
//! docs/adequacy.md; JSON Schema docs/schemas/adequacy.schema.json).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The format tag of the JSON document.
pub const FORMAT: &str = "conform-adequacy-v1";

/// One seed set: index 0 is the cases' own seeds; the others one fresh seed for every case
/// (replay one with `conform adequacy --seed-sets 0 --seed SEED` or `conform run --seed SEED`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SeedSet {
    pub index: u32,
    pub seed: Option<u64>,
}

/// What one fault did in one suite under one seed set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SetOutcome {
    /// A case failed: which one, with which input seed, and by which check.
    Killed {
        case: String,
        seed: u64,
        by: String,
        /// The kill's margin: output elements its element-wise checks judged wrong (summed
        /// over the failing outputs). Absent when no element-wise check failed (an aggregate
        /// check such as an error ratio, a crash, poison, a nondeterministic repeat).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        margin: Option<u64>,
    },
    /// Every case it applies to passed.
    Survived { cases: usize },
    /// No case of the suite is one it changes.
    NotApplicable,
    /// The harness could not build a case's expectation (its inputs or reference outputs):
    /// nothing was measured. Never a kill; it fails the run.
    Error {
        case: String,
        seed: u64,
        message: String,
    },
}

/// One fault x suite cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cell {
    pub fault: String,
    pub suite: String,
    /// Killed sets / applicable sets; `None` when never applicable.
    pub kill_rate: Option<f64>,
    /// One per seed set, in order.
    pub outcomes: Vec<SetOutcome>,
}

/// One fault over every suite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FaultSummary {
    pub name: String,
    pub family: String,
    /// `quick` (gated), `full` or `advisory`.
    pub requirement: String,
    pub description: String,
    /// Seed sets in which some suite applies it.
    pub applicable_sets: usize,
    /// Seed sets in which some suite killed it.
    pub killed_sets: usize,
    pub kill_rate: Option<f64>,
    /// Every case that killed it at least once.
    pub killed_by: Vec<String>,
    /// The seed sets (indices) in which it survived.
    pub survived_sets: Vec<u32>,
    /// The smallest margin of its kills (see [`SetOutcome::Killed`]) over the seed sets;
    /// absent when no kill had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_margin: Option<u64>,
    /// The margin a gated kill must reach: a kill by fewer wrong elements is one seed away
    /// from no kill, and fails the gate.
    #[serde(default)]
    pub margin_floor: u64,
    /// The seed sets (indices) whose kill had a margin below the floor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thin_sets: Vec<u32>,
    /// Whether this run gates it, and whether it passes that gate.
    pub gated: bool,
    pub passes: bool,
}

/// One suite's score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SuiteScore {
    pub suite: String,
    /// Faults that apply to at least one of its cases.
    pub applicable_faults: usize,
    /// Of those, the ones it killed on every seed set.
    pub always_killed: usize,
    /// The mean kill rate over the applicable faults.
    pub score: Option<f64>,
}

/// Everything `conform adequacy` measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AdequacyReport {
    pub format: String,
    pub seed_sets: Vec<SeedSet>,
    pub faults: Vec<FaultSummary>,
    pub matrix: Vec<Cell>,
    pub suites: Vec<SuiteScore>,
    /// The mean kill rate over every applicable fault.
    pub score: Option<f64>,
    /// Gated faults that survived some seed set, or that no selected case exercises although
    /// the selection holds cases of an op they are defined for.
    pub required_survivors: Vec<String>,
    /// Cases whose expectation could not be built (inputs or reference outputs), with why.
    pub errors: Vec<String>,
    pub duration_s: f64,
    /// Set when the matrix was stopped before every cell was measured: the signal
    /// (`SIGINT`, `SIGTERM`), or what a journal recovered after SIGKILL says. Partial results
    /// are never a pass. Absent for a complete matrix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// The cells (fault, suite, seed set) never measured, when interrupted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfinished: Vec<UnfinishedCell>,
    /// The regime map: per selected suite, which numeric regimes of its op family its
    /// quick-tier cases declare (and so guarantee on every seed) and which none does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regimes: Vec<SuiteRegimes>,
    /// Gated faults killed on every seed set, but in some set only by fewer wrong elements
    /// than their margin floor ([`FaultSummary::thin_sets`]): one seed away from surviving.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thin_kills: Vec<String>,
}

/// A fault x suite x seed set that an interrupted matrix never measured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UnfinishedCell {
    pub fault: String,
    pub suite: String,
    /// The seed set's index.
    pub set: u32,
}

/// One suite's row of the regime map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SuiteRegimes {
    pub suite: String,
    pub op: String,
    /// Regimes of the op family that a quick-tier case declares, each with the cases.
    pub covered: Vec<RegimeCoverage>,
    /// Regimes of the op family that no selected quick-tier case declares.
    pub missing: Vec<String>,
    /// The op family's parameter paths (a branch of the kernel, or a stride-bearing size that
    /// is not a multiple of 2, 4 and 8), each with the quick-tier cases that reach it (none
    /// for a path no case reaches).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathCoverage>,
    /// Every value a knob of the kernel model takes in some quick-tier case (`knob = value`,
    /// the kernel variant among them), with the cases whose recipe and shape give it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knobs: Vec<PathCoverage>,
    /// Whether the holes (a regime, path or knob value reached by fewer than
    /// [`MIN_CASES_PER_PATH`] quick-tier cases) fail the run (the quick tier is gated).
    pub gated: bool,
}

/// How many quick-tier cases must reach each regime, parameter path and knob value: one
/// unlucky case is not a guard.
pub const MIN_CASES_PER_PATH: usize = 2;

/// A regime and the quick-tier cases that declare it (or, for a structural regime, whose
/// shape holds it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RegimeCoverage {
    pub regime: String,
    pub cases: Vec<String>,
}

/// A parameter path or knob value, and the quick-tier cases that reach it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PathCoverage {
    pub name: String,
    pub cases: Vec<String>,
}

impl SuiteRegimes {
    /// What fewer than [`MIN_CASES_PER_PATH`] quick-tier cases reach: each regime that no
    /// case covers or one case alone does (the runner's repeated call aside, which every case
    /// reaches), each parameter path and knob value reached by one case or none, as
    /// `"regime moderate_late_max: 1 case (id)"`.
    pub fn holes(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .missing
            .iter()
            .map(|r| format!("regime {r}: no case"))
            .collect();
        let thin = |kind: &str, name: &str, cases: &[String]| {
            (cases.len() < MIN_CASES_PER_PATH).then(|| match cases {
                [] => format!("{kind} {name}: no case"),
                [one] => format!("{kind} {name}: 1 case ({one})"),
                _ => format!("{kind} {name}: {} cases", cases.len()),
            })
        };
        out.extend(
            self.covered
                .iter()
                .filter_map(|c| thin("regime", &c.regime, &c.cases)),
        );
        out.extend(
            self.paths
                .iter()
                .filter_map(|p| thin("path", &p.name, &p.cases)),
        );
        out.extend(
            self.knobs
                .iter()
                .filter_map(|k| thin("knob", &k.name, &k.cases)),
        );
        out
    }
}

impl AdequacyReport {
    /// Whether every gated fault was killed on every seed set, each kill at or above its
    /// margin floor (never for an interrupted, partial matrix).
    pub fn passes(&self) -> bool {
        self.required_survivors.is_empty()
            && self.thin_kills.is_empty()
            && self.errors.is_empty()
            && self.interrupted.is_none()
            && self.regime_holes() == 0
    }

    /// Regimes, parameter paths and knob values of gated suites that fewer than
    /// [`MIN_CASES_PER_PATH`] quick-tier cases reach ([`SuiteRegimes::holes`]).
    pub fn regime_holes(&self) -> usize {
        self.regimes
            .iter()
            .filter(|r| r.gated)
            .map(|r| r.holes().len())
            .sum()
    }
}
