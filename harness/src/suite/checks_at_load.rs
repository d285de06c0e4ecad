//! Tests: a case's checks and budgets become typed values when its suite is loaded
//! ([`super::load::parse_suite`] then [`super::select::validate_case`]), and a bad one names
//! the file, the case, the output and the field. Apart from `checks.rs`, which the loaders use.

use crate::suite::load::parse_suite;
use crate::suite::select::validate_case;
use crate::suite::SuiteError;
use std::path::Path;

const HEAD: &str = "[suite]\nname = \"paged_kv\"\nop = \"paged_kv\"\n[defaults]\nrecipe = \"reference\"\ncheck = { policy = \"bitwise\" }\n[[case]]\nname = \"x\"\nparams = { dtype = \"bf16\", layout = \"BnBsH\", num_blocks = 2, block_size = 16, num_key_value_heads = 1, head_dim = 16, num_tokens = 3 }\n";

fn load(extra: &str) -> Result<crate::suite::Case, SuiteError> {
    let text = format!("{HEAD}{extra}");
    let path = Path::new("suites/paged_kv.toml");
    let mut cases = parse_suite(path, &text)?;
    let mut c = cases.remove(0);
    validate_case(&mut c, &text)?;
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
        .unwrap_err()
        .to_string();
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
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`checks_without_recipe.value_cache_out`") && e.contains("`nope`"),
        "{e}"
    );
    let e = load("checks = { nothing = { policy = \"bitwise\" } }\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`checks.nothing` names no output"), "{e}");
    let e = load("budget = { atlas-800i-a2 = { max_us = -1.0 } }\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("paged_kv/x") && e.contains("budget"), "{e}");
}
