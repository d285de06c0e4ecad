//! The TOML schema of a suite file (documented in docs/suites.md). Unknown keys are errors.

use conform_reference::ops::ValueDist;
use serde::Deserialize;
use std::collections::BTreeMap;

/// A whole suite file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteFile {
    pub suite: SuiteHeader,
    /// Fields every case and grid of the file inherits (params are merged key by key).
    #[serde(default)]
    pub defaults: Entry,
    /// Single cases.
    #[serde(default, rename = "case")]
    pub cases: Vec<Entry>,
    /// Parametric grids: the cartesian product of `axes`, filtered by `only` / `exclude`.
    #[serde(default, rename = "grid")]
    pub grids: Vec<Entry>,
}

/// `[suite]`: the suite's name (equal to the file stem) and op.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteHeader {
    pub name: String,
    pub op: String,
    #[serde(default)]
    pub description: String,
}

/// Which run a case belongs to.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Small shapes: `cargo test` and the main job; golden files stored in full.
    Quick,
    /// Real-model shapes: run on demand (`--tier full`); golden digests only.
    Full,
}

impl Tier {
    pub fn name(self) -> &'static str {
        match self {
            Tier::Quick => "quick",
            Tier::Full => "full",
        }
    }
}

/// The tiers a command selects (`--tier quick|full|all`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierChoice {
    Quick,
    Full,
    All,
}

impl TierChoice {
    pub fn name(self) -> &'static str {
        match self {
            TierChoice::Quick => "quick",
            TierChoice::Full => "full",
            TierChoice::All => "all",
        }
    }

    /// Whether a case of `tier` is selected.
    pub fn includes(self, tier: Tier) -> bool {
        match self {
            TierChoice::Quick => tier == Tier::Quick,
            TierChoice::Full => tier == Tier::Full,
            TierChoice::All => true,
        }
    }
}

/// Timing settings of a case under `--perf`.
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PerfSettings {
    #[serde(default = "default_warmup")]
    pub warmup: u32,
    #[serde(default = "default_iterations")]
    pub iterations: u32,
}

fn default_warmup() -> u32 {
    3
}
fn default_iterations() -> u32 {
    20
}

impl Default for PerfSettings {
    fn default() -> Self {
        PerfSettings {
            warmup: default_warmup(),
            iterations: default_iterations(),
        }
    }
}

/// The fields of `[defaults]`, `[[case]]` and `[[grid]]`. Which ones are allowed where is
/// checked when the file is resolved (e.g. `axes` only in a grid).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// `[[case]]`: the case name (id = `<suite>/<name>`); `[[grid]]`: an id template with
    /// `{axis}` / `{param}` placeholders.
    pub name: Option<String>,
    /// The op of these cases, when not the suite's `op` (e.g. `nvfp4_dequant` in
    /// `fp4_dequant.toml`).
    pub op: Option<String>,
    /// Op parameters (merged over the defaults' params; grid axes are merged over these).
    pub params: Option<toml::Table>,
    /// The reference recipe the case's expected output is computed with.
    pub recipe: Option<String>,
    /// The hardware profile (`ci/hardware/<id>.toml`) whose SoC the recipe models, where the
    /// recipe follows a kernel's run-time choice that depends on it (the decode kernel's split
    /// over the vector cores): its `[soc]` counts become the case's parameters
    /// (`conform_harness::perf::soc::RECIPE_PARAMS`).
    pub recipe_hardware: Option<String>,
    pub tier: Option<Tier>,
    /// The input value distribution.
    pub inputs: Option<ValueDist>,
    /// The check policy of every output (see docs/verdicts.md).
    pub check: Option<toml::Table>,
    /// Per-output check policies, overriding `check`.
    pub checks: Option<BTreeMap<String, toml::Table>>,
    /// Per-output check policies for a target that runs its own recipe instead of the case's
    /// (a contributed kernel): an output whose `checks` entry is exact (bitwise / ulp against
    /// the recipe) is judged by this tolerance policy against the f64 oracle instead of the
    /// whole case being skipped.
    pub checks_without_recipe: Option<BTreeMap<String, toml::Table>>,
    /// Timing settings under `--perf`.
    pub perf: Option<PerfSettings>,
    /// Performance budgets per hardware profile (see docs/perf.md).
    pub budget: Option<toml::Table>,
    /// A fixed input seed for this case (default 0).
    pub seed: Option<u64>,
    /// Grid axes: name -> values (scalars set the param of the same name; tables are merged
    /// into params, their `label` key naming the value in ids and constraints).
    pub axes: Option<toml::Table>,
    /// Grid: keep only combinations matching at least one of these (axis -> label).
    pub only: Option<Vec<toml::Table>>,
    /// Grid: drop combinations matching any of these (axis -> label).
    pub exclude: Option<Vec<toml::Table>>,
    /// Free text shown by `conform explain`.
    pub description: Option<String>,
    /// Faults of the catalogue (`conform adequacy --list-faults`) this case must kill on every
    /// seed: the input generator searches the seed's stream (bounded, deterministic) for an
    /// input set on which each of them fails the case's checks, or ends with an error naming
    /// the faults it could not pin. See docs/adequacy.md.
    pub discriminates: Option<Vec<String>>,
    /// Numeric regimes the case exercises (`large_logits`, `late_max`, `masked_rows_lse`,
    /// `overflow_to_inf`, `subnormal_outputs`, `format_extremes`): the op's input generator guarantees each of them on every seed, or the suite is
    /// refused with an error naming the regime. See docs/suites.md.
    pub regimes: Option<Vec<String>>,
}
