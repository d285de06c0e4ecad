//! A case's checks and budgets as typed values: each output's check policy (the judge with
//! its validated parameters) and the per-hardware budgets, read once when the suite is loaded
//! so that every command (and the cargo-test trials) reports a bad one at load, by name.

use super::case::Case;
use crate::perf::{validate_budgets, Budgets};
use crate::verdict::CheckPolicy;
use conform_reference::ops::OpDescription;
use std::collections::BTreeMap;

/// Where output `output`'s check is written: `checks.<output>`, or the case's `check`.
fn field(own: bool, output: &str) -> String {
    if own {
        format!("checks.{output}")
    } else {
        "check".to_string()
    }
}

/// Reads one table; an error names the output and the field it came from.
fn read(table: &toml::Table, output: &str, field: &str) -> Result<CheckPolicy, String> {
    CheckPolicy::from_table(table)
        .map_err(|e| format!("check of output `{output}` (`{field}`): {e}"))
}

/// The check policy of every output of the case described by `desc`, as
/// (`policies`, `policies_without_recipe`): the case's own, and those for a target that runs
/// its own recipe (`checks_without_recipe` where given, else the same). Each is checked
/// against the output's dtype.
#[allow(clippy::type_complexity)]
pub fn resolve_checks(
    case: &Case,
    desc: &OpDescription,
) -> Result<(BTreeMap<String, CheckPolicy>, BTreeMap<String, CheckPolicy>), String> {
    let mut own = BTreeMap::new();
    let mut without = BTreeMap::new();
    for spec in &desc.outputs {
        let name = &spec.name;
        let table = case.check_for(name).ok_or_else(|| {
            format!("output `{name}` has no check policy (set `check` or `checks.{name}`)")
        })?;
        let field_name = field(case.checks.contains_key(name), name);
        let policy = read(table, name, &field_name)?;
        policy
            .validate_for(spec.dtype)
            .map_err(|e| format!("check of output `{name}` (`{field_name}`): {e}"))?;
        let other = match case.checks_without_recipe.get(name) {
            Some(t) => {
                let field_name = format!("checks_without_recipe.{name}");
                let p = read(t, name, &field_name)?;
                p.validate_for(spec.dtype)
                    .map_err(|e| format!("check of output `{name}` (`{field_name}`): {e}"))?;
                p
            }
            None => policy.clone(),
        };
        own.insert(name.clone(), policy);
        without.insert(name.clone(), other);
    }
    for name in &case.own_checks {
        if !desc.outputs.iter().any(|o| &o.name == name) {
            return Err(format!(
                "`checks.{name}` names no output of op `{}`",
                case.op
            ));
        }
    }
    Ok((own, without))
}

/// The case's budgets (`budget = { <hardware> = { max_us, min_roofline_fraction } }`).
pub fn resolve_budgets(table: Option<&toml::Table>) -> Result<Budgets, String> {
    let Some(table) = table else {
        return Ok(Budgets::default());
    };
    let b: Budgets = table
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| format!("budget: {}", e.message()))?;
    validate_budgets(&b).map_err(|e| format!("budget: {e}"))?;
    Ok(b)
}

#[cfg(test)]
mod tests {
    use crate::suite::load::parse_suite;
    use crate::suite::select::validate_case;
    use std::path::Path;

    const HEAD: &str = "[suite]\nname = \"paged_kv\"\nop = \"paged_kv\"\n[defaults]\nrecipe = \"reference\"\ncheck = { policy = \"bitwise\" }\n[[case]]\nname = \"x\"\nparams = { dtype = \"bf16\", layout = \"BnBsH\", num_blocks = 2, block_size = 16, num_key_value_heads = 1, head_dim = 16, num_tokens = 3 }\n";

    fn load(extra: &str) -> Result<crate::suite::Case, String> {
        let text = format!("{HEAD}{extra}");
        let path = Path::new("suites/paged_kv.toml");
        let mut cases = parse_suite(path, &text).map_err(|e| e.to_string())?;
        let mut c = cases.remove(0);
        validate_case(&mut c, &text).map_err(|e| e.to_string())?;
        Ok(c)
    }

    #[test]
    fn checks_and_budgets_become_typed_values_at_load() {
        let c = load("checks_without_recipe = { value_cache_out = { policy = \"cann_mixed\" } }\nbudget = { atlas-800i-a2 = { max_us = 10.0 } }\n").unwrap();
        assert_eq!(c.policies.len(), 2);
        assert!(c.policies.values().all(|p| p.name() == "bitwise"));
        assert_eq!(c.policies_without_recipe["key_cache_out"].name(), "bitwise");
        assert_eq!(
            c.policies_without_recipe["value_cache_out"].name(),
            "cann_mixed"
        );
        assert_eq!(c.budgets["atlas-800i-a2"].max_us, Some(10.0));
    }

    #[test]
    fn a_bad_check_names_the_file_case_output_and_field() {
        let e = load("checks = { key_cache_out = { policy = \"allclose\", atol = -1.0 } }\n")
            .unwrap_err();
        for part in [
            "suites/paged_kv.toml",
            "paged_kv/x",
            "key_cache_out",
            "`checks.key_cache_out`",
            "`atol`",
        ] {
            assert!(e.contains(part), "{part}: {e}");
        }
        let e = load("checks_without_recipe = { value_cache_out = { policy = \"nope\" } }\n")
            .unwrap_err();
        assert!(
            e.contains("`checks_without_recipe.value_cache_out`") && e.contains("`nope`"),
            "{e}"
        );
        let e = load("checks = { nothing = { policy = \"bitwise\" } }\n").unwrap_err();
        assert!(e.contains("`checks.nothing` names no output"), "{e}");
        let e = load("budget = { atlas-800i-a2 = { max_us = -1.0 } }\n").unwrap_err();
        assert!(e.contains("paged_kv/x") && e.contains("budget"), "{e}");
    }
}
