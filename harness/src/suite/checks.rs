//! A case's checks and budgets as typed values: each output's check policy (the judge with
//! its validated parameters) and the per-hardware budgets, read once when the suite is loaded
//! so that every command (and the cargo-test trials) reports a bad one at load, by name.

use super::case::Case;
use crate::perf::{validate_budgets, Budgets};
use crate::verdict::CheckPolicy;
use crate::verdict::{CheckError, PolicyError};
use conform_reference::ops::OpDescription;
use std::collections::BTreeMap;

/// Why a case's checks do not fit its op's outputs; each names the output and the field.
#[derive(Debug, thiserror::Error)]
pub enum CaseChecksError {
    /// A check table that is no check policy.
    #[error("check of output `{output}` (`{field}`): {error}")]
    Read {
        output: String,
        field: String,
        error: CheckError,
    },
    /// A check policy that does not apply to the output (its parameters or its dtype).
    #[error("check of output `{output}` (`{field}`): {error}")]
    Invalid {
        output: String,
        field: String,
        error: PolicyError,
    },
    /// An output without a check.
    #[error("output `{0}` has no check policy (set `check` or `checks.{0}`)")]
    NoPolicy(String),
    /// A `checks.<name>` for an output the op does not have.
    #[error("`checks.{name}` names no output of op `{op}`")]
    NoSuchOutput { name: String, op: String },
}

/// Why a case's budgets cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BudgetsError {
    /// The table is not budgets.
    #[error("budget: {0}")]
    Parse(String),
    /// A budget out of range.
    #[error("budget: {0}")]
    Invalid(crate::perf::PerfError),
}

/// Where output `output`'s check is written: `checks.<output>`, or the case's `check`.
fn field(own: bool, output: &str) -> String {
    if own {
        format!("checks.{output}")
    } else {
        "check".to_string()
    }
}

/// Reads one table; an error names the output and the field it came from.
fn read(table: &toml::Table, output: &str, field: &str) -> Result<CheckPolicy, CaseChecksError> {
    CheckPolicy::from_table(table).map_err(|error| CaseChecksError::Read {
        output: output.to_string(),
        field: field.to_string(),
        error,
    })
}

/// Checks `policy` against the output's dtype; an error names the output and the field.
fn validate(
    policy: &CheckPolicy,
    dtype: conform_reference::ops::ElemType,
    output: &str,
    field: &str,
) -> Result<(), CaseChecksError> {
    policy
        .validate_for(dtype)
        .map_err(|error| CaseChecksError::Invalid {
            output: output.to_string(),
            field: field.to_string(),
            error,
        })
}

/// The check policy of every output of the case described by `desc`, as
/// (`policies`, `policies_without_recipe`): the case's own, and those for a target that runs
/// its own recipe (`checks_without_recipe` where given, else the same). Each is checked
/// against the output's dtype.
#[allow(clippy::type_complexity)]
pub fn resolve_checks(
    case: &Case,
    desc: &OpDescription,
) -> Result<(BTreeMap<String, CheckPolicy>, BTreeMap<String, CheckPolicy>), CaseChecksError> {
    let mut own = BTreeMap::new();
    let mut without = BTreeMap::new();
    for spec in &desc.outputs {
        let name = &spec.name;
        let table = case
            .check_for(name)
            .ok_or_else(|| CaseChecksError::NoPolicy(name.clone()))?;
        let field_name = field(case.checks.contains_key(name), name);
        let policy = read(table, name, &field_name)?;
        validate(&policy, spec.dtype, name, &field_name)?;
        let other = match case.checks_without_recipe.get(name) {
            Some(t) => {
                let field_name = format!("checks_without_recipe.{name}");
                let p = read(t, name, &field_name)?;
                validate(&p, spec.dtype, name, &field_name)?;
                p
            }
            None => policy.clone(),
        };
        own.insert(name.clone(), policy);
        without.insert(name.clone(), other);
    }
    for name in &case.own_checks {
        if !desc.outputs.iter().any(|o| &o.name == name) {
            return Err(CaseChecksError::NoSuchOutput {
                name: name.clone(),
                op: case.op.clone(),
            });
        }
    }
    Ok((own, without))
}

/// The case's budgets (`budget = { <hardware> = { max_us, min_roofline_fraction } }`).
pub fn resolve_budgets(table: Option<&toml::Table>) -> Result<Budgets, BudgetsError> {
    let Some(table) = table else {
        return Ok(Budgets::default());
    };
    let b: Budgets = table
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| BudgetsError::Parse(e.message().to_string()))?;
    validate_budgets(&b).map_err(BudgetsError::Invalid)?;
    Ok(b)
}
