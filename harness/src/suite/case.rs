//! A resolved case: everything needed to generate inputs, run a target and judge the outputs.

use super::schema::{PerfSettings, Tier};
use crate::perf::Budgets;
use crate::verdict::CheckPolicy;
use conform_reference::ops::ValueDist;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One case of a suite, after defaults and grid expansion.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Case {
    /// Stable, readable id: `<suite>/<name>`.
    pub id: String,
    pub suite: String,
    pub op: String,
    /// Op parameters, as a JSON object (the names the reference ops and workers use).
    pub params: serde_json::Value,
    pub recipe: String,
    /// The hardware profile whose SoC the recipe models (`recipe_hardware`), if any; its
    /// counts are in `params` under the names of `hardware_params`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recipe_hardware: Option<String>,
    /// The parameters `params` took from the `recipe_hardware` profile: not part of the
    /// case's definition digest (the profile is its own input: a change to it shows as
    /// golden drift, which `conform golden verify` reports).
    #[serde(skip)]
    pub hardware_params: Vec<String>,
    pub tier: Tier,
    pub inputs: ValueDist,
    /// Default check policy (TOML table with a `policy` key), if any.
    pub check: Option<toml::Table>,
    /// Per-output check policies (inherited from `[defaults]` and the case's own).
    pub checks: BTreeMap<String, toml::Table>,
    /// Per-output policies for a target without the case's recipe (see the suite schema).
    pub checks_without_recipe: BTreeMap<String, toml::Table>,
    /// The output names the case's own `checks` table names (each must be an output of the
    /// case; inherited defaults may name outputs only some cases have, e.g. `softmax_lse`).
    #[serde(skip)]
    pub own_checks: Vec<String>,
    /// Each output's check policy, read from `check` / `checks` and validated against the
    /// output's dtype when the suite was loaded ([`super::select::load_all`]).
    #[serde(skip)]
    pub policies: BTreeMap<String, CheckPolicy>,
    /// Each output's check policy for a target without the case's recipe (from
    /// `checks_without_recipe`, else as in `policies`).
    #[serde(skip)]
    pub policies_without_recipe: BTreeMap<String, CheckPolicy>,
    pub perf: PerfSettings,
    pub budget: Option<toml::Table>,
    /// `budget`, read and validated when the suite was loaded.
    #[serde(skip)]
    pub budgets: Budgets,
    /// The case's fixed seed (overridden by `--seed` / `--fresh-seeds`).
    pub seed: u64,
    pub description: String,
    /// Faults the case's inputs must make visible to its checks (searched for by the input
    /// generator; see [`crate::case_data::discriminate`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub discriminates: Vec<String>,
    /// Numeric regimes the case's inputs hold on every seed (guaranteed by the op's
    /// generator; checked against the shape when the suite loads).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub regimes: Vec<conform_reference::ops::Regime>,
    /// The suite file the case came from.
    pub source: PathBuf,
}

impl Case {
    /// The check policy table for output `name`.
    pub fn check_for(&self, output: &str) -> Option<&toml::Table> {
        self.checks.get(output).or(self.check.as_ref())
    }

    /// The relative path of this case's golden file under `golden/`.
    pub fn golden_relpath(&self) -> PathBuf {
        PathBuf::from(format!("{}.safetensors", self.id))
    }
}

/// An output whose check policy was never read: the case was not loaded by `load_all`.
#[derive(Debug, thiserror::Error)]
#[error(
    "output `{0}` has no check policy (the case was not loaded by `load_all`, which reads them)"
)]
pub struct UnloadedChecks(pub String);

impl Case {
    /// The check policy of every output of the op `desc` describes: the case's own
    /// (`own_recipe = false`), or those for a target that runs its own recipe
    /// (`checks_without_recipe` where given). An error names an output that has none.
    pub fn output_policies(
        &self,
        desc: &conform_reference::ops::OpDescription,
        own_recipe: bool,
    ) -> Result<std::collections::BTreeMap<String, CheckPolicy>, UnloadedChecks> {
        let typed = if own_recipe {
            &self.policies_without_recipe
        } else {
            &self.policies
        };
        desc.outputs
            .iter()
            .map(|spec| match typed.get(&spec.name) {
                Some(p) => Ok((spec.name.clone(), p.clone())),
                None => Err(UnloadedChecks(spec.name.clone())),
            })
            .collect()
    }
}
