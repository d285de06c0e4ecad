//! Reading a suite file: parse, apply defaults, expand grids into cases with stable ids.

use super::case::Case;
use super::error::{line_col, SuiteError};
use super::schema::{Entry, SuiteFile, Tier};
use std::collections::BTreeMap;
use std::path::Path;

/// The most combinations one `[[grid]]` may expand to (its axes' sizes multiplied, before
/// `only` / `exclude`): checked before anything is expanded, so a few lines of TOML cannot
/// ask for 10^8 cases (each costs some KiB and a shape check).
pub const MAX_GRID_COMBINATIONS: u64 = 10_000;
/// The most cases the suites of a project may hold together (every command loads them all).
pub const MAX_CASES: u64 = 20_000;

/// Parses `text` (the contents of `path`) into its cases, in file order: `[[case]]` entries
/// first, then each `[[grid]]`'s combinations in axis declaration order.
pub fn parse_suite(path: &Path, text: &str) -> Result<Vec<Case>, SuiteError> {
    parse_suite_within(path, text, 0)
}

/// [`parse_suite`] for a file read after `loaded` cases of other files: the file's cases
/// (counted before any grid is expanded) must keep the total within [`MAX_CASES`].
pub fn parse_suite_within(path: &Path, text: &str, loaded: u64) -> Result<Vec<Case>, SuiteError> {
    let file: SuiteFile =
        toml::from_str(text).map_err(|e| SuiteError::at_span(path, text, e.span(), e.message()))?;
    let planned = planned_cases(path, &file)?;
    if loaded.saturating_add(planned) > MAX_CASES {
        return Err(SuiteError::TooManyCases {
            path: path.to_path_buf(),
            planned,
            loaded,
            limit: MAX_CASES,
        });
    }
    let invalid = |location: &str, message: String| SuiteError::Invalid {
        path: path.to_path_buf(),
        location: location.to_string(),
        message,
    };
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if file.suite.name != stem {
        return Err(invalid(
            "[suite] name",
            format!(
                "suite name `{}` must equal the file name `{stem}`",
                file.suite.name
            ),
        ));
    }
    let d = &file.defaults;
    if d.name.is_some() || d.axes.is_some() || d.only.is_some() || d.exclude.is_some() {
        return Err(invalid(
            "[defaults]",
            "name, axes, only and exclude belong to [[case]] / [[grid]]".into(),
        ));
    }
    let mut cases = Vec::new();
    for (i, entry) in file.cases.iter().enumerate() {
        let location = format!("[[case]] #{}", i + 1);
        if entry.axes.is_some() || entry.only.is_some() || entry.exclude.is_some() {
            return Err(invalid(
                &location,
                "axes, only and exclude belong to [[grid]]".into(),
            ));
        }
        let name = entry
            .name
            .clone()
            .ok_or_else(|| invalid(&location, "missing `name`".into()))?;
        check_name(&name).map_err(|m| invalid(&location, m.to_string()))?;
        let params = merge(d.params.as_ref(), entry.params.as_ref());
        cases.push(resolve(path, &file, entry, &name, params)?);
    }
    for (i, entry) in file.grids.iter().enumerate() {
        cases.extend(grid_cases(path, &file, i, entry)?);
    }
    let mut seen: BTreeMap<&str, ()> = BTreeMap::new();
    for c in &cases {
        if seen.insert(c.id.as_str(), ()).is_some() {
            return Err(SuiteError::DuplicateId {
                id: c.id.clone(),
                first: path.to_path_buf(),
                second: path.to_path_buf(),
            });
        }
    }
    Ok(cases)
}

/// How many cases the file's `[[case]]` entries and `[[grid]]`s make (grids counted as the
/// product of their axes' sizes, before `only` / `exclude`), without expanding any; a grid
/// over [`MAX_GRID_COMBINATIONS`] is an error giving its axes' sizes and their product.
fn planned_cases(path: &Path, file: &SuiteFile) -> Result<u64, SuiteError> {
    let mut total = file.cases.len() as u64;
    for (i, entry) in file.grids.iter().enumerate() {
        let sizes: Vec<(&str, u64)> = entry
            .axes
            .iter()
            .flatten()
            .map(|(axis, v)| (axis.as_str(), v.as_array().map_or(1, |a| a.len() as u64)))
            .collect();
        let product = sizes.iter().fold(1u64, |p, (_, n)| p.saturating_mul(*n));
        if product > MAX_GRID_COMBINATIONS {
            let shown: Vec<String> = sizes.iter().map(|(a, n)| format!("{n} ({a})")).collect();
            return Err(SuiteError::Invalid {
                path: path.to_path_buf(),
                location: format!("[[grid]] #{}", i + 1),
                message: format!(
                    "its axes make {} = {product} combinations, more than the \
                     {MAX_GRID_COMBINATIONS} a grid may expand to (nothing was expanded): split \
                     it into smaller grids or give its axes fewer values",
                    shown.join(" x ")
                ),
            });
        }
        total = total.saturating_add(product);
    }
    Ok(total)
}

/// A case name with characters or segments an id may not hold.
#[derive(Debug, thiserror::Error)]
#[error("case name `{0}` may only hold letters, digits and - _ . / (no empty or dot segments)")]
struct BadCaseName(String);

/// Why a `[[grid]]` axis value or id template cannot make a case.
#[derive(Debug, thiserror::Error)]
enum GridError {
    #[error("a table value of axis `{0}` needs a `label`")]
    NoLabel(String),
    #[error("axis `{0}`: values must be scalars or tables")]
    NotScalar(String),
    #[error("unclosed `{{` in id template `{0}`")]
    Unclosed(String),
    #[error("id template `{template}` names `{key}`, which is neither an axis nor a param")]
    UnknownPlaceholder { template: String, key: String },
}

fn check_name(name: &str) -> Result<(), BadCaseName> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !name
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..");
    if ok {
        Ok(())
    } else {
        Err(BadCaseName(name.to_string()))
    }
}

fn merge(base: Option<&toml::Table>, over: Option<&toml::Table>) -> toml::Table {
    let mut t = base.cloned().unwrap_or_default();
    for (k, v) in over.into_iter().flatten() {
        t.insert(k.clone(), v.clone());
    }
    t
}

fn label_of(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An axis value: a scalar sets the param named like the axis; a table is merged into params,
/// its `label` naming it.
fn axis_value(axis: &str, v: &toml::Value) -> Result<(String, toml::Table), GridError> {
    match v {
        toml::Value::Table(t) => {
            let mut patch = t.clone();
            let label = patch
                .remove("label")
                .ok_or_else(|| GridError::NoLabel(axis.to_string()))?;
            Ok((label_of(&label), patch))
        }
        toml::Value::Array(_) => Err(GridError::NotScalar(axis.to_string())),
        scalar => {
            let mut patch = toml::Table::new();
            patch.insert(axis.to_string(), scalar.clone());
            Ok((label_of(scalar), patch))
        }
    }
}

/// Fills `{placeholder}`s from axis labels, then from params.
fn render(
    template: &str,
    labels: &BTreeMap<&str, &str>,
    params: &toml::Table,
) -> Result<String, GridError> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| GridError::Unclosed(template.to_string()))?
            + open;
        let key = &rest[open + 1..close];
        if let Some(l) = labels.get(key) {
            out.push_str(l);
        } else if let Some(v) = params.get(key) {
            out.push_str(&label_of(v));
        } else {
            return Err(GridError::UnknownPlaceholder {
                template: template.to_string(),
                key: key.to_string(),
            });
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The cases of the `i`-th `[[grid]]`: every combination of its axes' values that its
/// `only` / `exclude` constraints keep, in axis declaration order.
fn grid_cases(
    path: &Path,
    file: &SuiteFile,
    i: usize,
    entry: &Entry,
) -> Result<Vec<Case>, SuiteError> {
    let invalid = |location: &str, message: String| SuiteError::Invalid {
        path: path.to_path_buf(),
        location: location.to_string(),
        message,
    };
    let d = &file.defaults;
    let mut cases = Vec::new();
    let location = format!("[[grid]] #{}", i + 1);
    let template = entry
        .name
        .clone()
        .ok_or_else(|| invalid(&location, "missing `name` (the id template)".into()))?;
    let axes = entry
        .axes
        .as_ref()
        .ok_or_else(|| invalid(&location, "a grid needs `axes`".into()))?;
    let mut combos: Vec<Vec<(String, String, toml::Table)>> = vec![Vec::new()];
    for (axis, values) in axes {
        let values = values
            .as_array()
            .ok_or_else(|| invalid(&location, format!("axis `{axis}` must be an array")))?;
        if values.is_empty() {
            return Err(invalid(&location, format!("axis `{axis}` has no values")));
        }
        let mut next = Vec::new();
        for combo in &combos {
            for v in values {
                let (label, patch) =
                    axis_value(axis, v).map_err(|m| invalid(&location, m.to_string()))?;
                let mut c = combo.clone();
                c.push((axis.clone(), label, patch));
                next.push(c);
            }
        }
        combos = next;
    }
    for constraint in entry
        .only
        .iter()
        .flatten()
        .chain(entry.exclude.iter().flatten())
    {
        for key in constraint.keys() {
            if !axes.contains_key(key) {
                return Err(invalid(
                    &location,
                    format!("only/exclude names `{key}`, which is not an axis"),
                ));
            }
        }
    }
    for combo in combos {
        let labels: BTreeMap<&str, &str> = combo
            .iter()
            .map(|(a, l, _)| (a.as_str(), l.as_str()))
            .collect();
        let matches = |c: &toml::Table| {
            c.iter()
                .all(|(k, v)| labels.get(k.as_str()) == Some(&label_of(v).as_str()))
        };
        if let Some(only) = &entry.only
            && !only.iter().any(matches)
        {
            continue;
        }
        if entry.exclude.iter().flatten().any(matches) {
            continue;
        }
        let mut params = merge(d.params.as_ref(), entry.params.as_ref());
        for (_, _, patch) in &combo {
            for (k, v) in patch {
                params.insert(k.clone(), v.clone());
            }
        }
        let name =
            render(&template, &labels, &params).map_err(|m| invalid(&location, m.to_string()))?;
        check_name(&name).map_err(|m| invalid(&location, m.to_string()))?;
        cases.push(resolve(path, file, entry, &name, params)?);
    }
    Ok(cases)
}

fn resolve(
    path: &Path,
    file: &SuiteFile,
    entry: &Entry,
    name: &str,
    params: toml::Table,
) -> Result<Case, SuiteError> {
    let d = &file.defaults;
    let id = format!("{}/{}", file.suite.name, name);
    if let Some(message) = super::values::non_finite_param(&params) {
        return Err(SuiteError::Case {
            path: path.to_path_buf(),
            id,
            message,
        });
    }
    let mut params_json = serde_json::to_value(&params).map_err(|e| SuiteError::Case {
        path: path.to_path_buf(),
        id: id.clone(),
        message: format!("params: {e}"),
    })?;
    let recipe_hardware = entry
        .recipe_hardware
        .clone()
        .or_else(|| d.recipe_hardware.clone());
    let hardware_params = match &recipe_hardware {
        Some(profile) => {
            super::recipe_hardware::apply(profile, &mut params_json).map_err(|message| {
                SuiteError::Case {
                    path: path.to_path_buf(),
                    id: id.clone(),
                    message: message.to_string(),
                }
            })?
        }
        None => Vec::new(),
    };
    let recipe = entry
        .recipe
        .clone()
        .or_else(|| d.recipe.clone())
        .ok_or_else(|| SuiteError::Case {
            path: path.to_path_buf(),
            id: id.clone(),
            message: "no `recipe` (set it in [defaults] or the case)".into(),
        })?;
    let mut checks = d.checks.clone().unwrap_or_default();
    checks.extend(entry.checks.clone().unwrap_or_default());
    let mut checks_without_recipe = d.checks_without_recipe.clone().unwrap_or_default();
    checks_without_recipe.extend(entry.checks_without_recipe.clone().unwrap_or_default());
    let perf = entry
        .perf
        .clone()
        .or_else(|| d.perf.clone())
        .unwrap_or_default();
    if perf.iterations == 0 {
        return Err(SuiteError::Case {
            path: path.to_path_buf(),
            id: id.clone(),
            message: "`perf.iterations = 0`: a timed case needs at least 1 iteration".into(),
        });
    }
    let discriminates = entry
        .discriminates
        .clone()
        .or_else(|| d.discriminates.clone())
        .unwrap_or_default();
    for name in &discriminates {
        if conform_reference::faults::find(name).is_none() {
            return Err(SuiteError::Case {
                path: path.to_path_buf(),
                id: id.clone(),
                message: format!(
                    "`discriminates`: no fault `{name}` in the catalogue (see `conform adequacy --list-faults`)"
                ),
            });
        }
    }
    let mut regimes = Vec::new();
    for name in entry
        .regimes
        .clone()
        .or_else(|| d.regimes.clone())
        .unwrap_or_default()
    {
        let Some(r) = conform_reference::ops::Regime::parse(&name) else {
            return Err(SuiteError::Case {
                path: path.to_path_buf(),
                id: id.clone(),
                message: format!(
                    "`regimes`: no regime `{name}` (known: {})",
                    conform_reference::ops::Regime::ALL
                        .iter()
                        .map(|r| r.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        if r.by_runner() {
            return Err(SuiteError::Case {
                path: path.to_path_buf(),
                id: id.clone(),
                message: format!(
                    "`regimes`: `{name}` is not declared: the runner holds it for every case"
                ),
            });
        }
        if !regimes.contains(&r) {
            regimes.push(r);
        }
    }
    let inputs = entry
        .inputs
        .clone()
        .or_else(|| d.inputs.clone())
        .unwrap_or_default();
    super::values::check_inputs(&inputs).map_err(|message| SuiteError::Case {
        path: path.to_path_buf(),
        id: id.clone(),
        message: message.to_string(),
    })?;
    let budget = entry.budget.clone().or_else(|| d.budget.clone());
    Ok(Case {
        discriminates,
        regimes,
        suite: file.suite.name.clone(),
        op: entry
            .op
            .clone()
            .or_else(|| d.op.clone())
            .unwrap_or_else(|| file.suite.op.clone()),
        params: params_json,
        recipe,
        recipe_hardware,
        hardware_params,
        tier: entry.tier.or(d.tier).unwrap_or(Tier::Quick),
        inputs,
        check: entry.check.clone().or_else(|| d.check.clone()),
        own_checks: entry
            .checks
            .as_ref()
            .map(|c| c.keys().cloned().collect())
            .unwrap_or_default(),
        checks,
        checks_without_recipe,
        perf,
        budgets: super::checks::resolve_budgets(budget.as_ref()).map_err(|message| {
            SuiteError::Case {
                path: path.to_path_buf(),
                id: id.clone(),
                message: message.to_string(),
            }
        })?,
        budget,
        // Filled by `validate_case`, which knows the op's outputs.
        policies: BTreeMap::new(),
        policies_without_recipe: BTreeMap::new(),
        seed: entry.seed.or(d.seed).unwrap_or(0),
        description: entry
            .description
            .clone()
            .or_else(|| d.description.clone())
            .unwrap_or_default(),
        source: path.to_path_buf(),
        id,
    })
}

/// Finds where `key = ` is written in `text` (for errors a schema check reports without a
/// span, e.g. an op's unknown parameter). Returns 1-based line and column.
pub fn locate_key(text: &str, key: &str) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(pos) = text[from..].find(key) {
        let start = from + pos;
        let end = start + key.len();
        let before_ok =
            start == 0 || matches!(bytes[start - 1], b' ' | b'\t' | b'\n' | b'{' | b',');
        let after = text[end..].trim_start_matches([' ', '\t']);
        if before_ok && after.starts_with('=') {
            return Some(line_col(text, start));
        }
        from = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Case>, SuiteError> {
        parse_suite(Path::new("suites/demo.toml"), text)
    }

    const GRID: &str = r#"
[suite]
name = "demo"
op = "demo_op"

[defaults]
recipe = "r1"
params = { layout = "BSND", head_dim = 128 }

[[case]]
name = "single"
params = { batch = 1 }
tier = "full"

[[grid]]
name = "{dtype}/b{batch}-d{head_dim}/{mask}"
axes.dtype = ["bf16", "f16"]
axes.batch = [1, 2]
axes.mask = [ { label = "none", sparse_mode = 0 }, { label = "causal_br", sparse_mode = 3 } ]
exclude = [ { dtype = "f16", mask = "causal_br" } ]
only = [ { batch = "2" }, { dtype = "bf16" } ]
"#;

    #[test]
    fn a_recipe_hardware_profile_gives_the_cases_its_soc_counts() {
        let text = r#"
[suite]
name = "demo"
op = "demo_op"

[defaults]
recipe = "r1"
recipe_hardware = "atlas-800i-a2"

[[case]]
name = "a2"
params = { batch = 1 }

[[case]]
name = "b2"
recipe_hardware = "ascend-910b2"
params = { batch = 1 }
"#;
        let cases = parse(text).unwrap();
        assert_eq!(cases[0].params["vector_cores"], 40);
        assert_eq!(cases[1].params["vector_cores"], 48);
        assert_eq!(cases[1].recipe_hardware.as_deref(), Some("ascend-910b2"));
        assert_eq!(cases[0].hardware_params, vec!["vector_cores"]);
        let clash = text.replace("params = { batch = 1 }", "params = { vector_cores = 8 }");
        let e = parse(&clash).unwrap_err().to_string();
        assert!(e.contains("set one or the other"), "{e}");
        let unknown = text.replace("\"ascend-910b2\"", "\"atlas-900\"");
        let e = parse(&unknown).unwrap_err().to_string();
        assert!(e.contains("no hardware profile `atlas-900`"), "{e}");
    }

    #[test]
    fn grids_expand_in_declaration_order_with_readable_ids() {
        let cases = parse(GRID).unwrap();
        let ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "demo/single",
                "demo/bf16/b1-d128/none",
                "demo/bf16/b1-d128/causal_br",
                "demo/bf16/b2-d128/none",
                "demo/bf16/b2-d128/causal_br",
                "demo/f16/b2-d128/none",
            ]
        );
        let c = &cases[4];
        assert_eq!(c.params["sparse_mode"], 3);
        assert_eq!(c.params["layout"], "BSND");
        assert_eq!(c.params["batch"], 2);
        assert_eq!(c.tier, Tier::Quick);
        assert_eq!(cases[0].tier, Tier::Full);
        assert_eq!(c.recipe, "r1");
    }

    #[test]
    fn a_typo_in_a_key_names_line_and_column() {
        let text =
            "[suite]\nname = \"demo\"\nop = \"x\"\n\n[[case]]\nname = \"a\"\nrecipee = \"r\"\n";
        let e = parse(text).unwrap_err().to_string();
        assert!(e.starts_with("suites/demo.toml:7:1:"), "{e}");
        assert!(e.contains("recipee"), "{e}");
    }

    #[test]
    fn the_runners_repeated_call_is_never_declared() {
        let text = "[suite]\nname = \"demo\"\nop = \"x\"\n\n[[case]]\nname = \"a\"\nrecipe = \"r\"\nregimes = [\"repeated_call\"]\n";
        let e = parse(text).unwrap_err().to_string();
        assert!(
            e.contains("demo/a")
                && e.contains(
                    "`repeated_call` is not declared: the runner holds it for every case"
                ),
            "{e}"
        );
    }

    #[test]
    fn malformed_toml_is_a_parse_error_with_position() {
        let e = parse("[suite\nname=1").unwrap_err();
        assert!(matches!(e, SuiteError::Parse { line: 1, .. }), "{e}");
    }

    #[test]
    fn structural_mistakes_are_named() {
        let base = "[suite]\nname = \"demo\"\nop = \"x\"\n[defaults]\nrecipe = \"r\"\n";
        let e = parse(&format!(
            "{base}[[grid]]\nname = \"{{nope}}\"\naxes.a = [1]\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("names `nope`"), "{e}");
        let e = parse(&format!(
            "{base}[[case]]\nname = \"a\"\n[[case]]\nname = \"a\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("duplicate case id `demo/a`"), "{e}");
        let e = parse(&format!("{base}[[case]]\nname = \"../x\"\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("dot segments"), "{e}");
        let e = parse("[suite]\nname = \"other\"\nop = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("must equal the file name"), "{e}");
        let e = parse(&format!(
            "{base}[[grid]]\nname = \"g\"\naxes.a = [1]\nonly = [{{ b = 1 }}]\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("not an axis"), "{e}");
    }

    #[test]
    fn locate_key_finds_inline_table_keys() {
        let text = "[[case]]\nparams = { batch = 1, num_head = 8 }\n";
        assert_eq!(locate_key(text, "num_head"), Some((2, 23)));
        assert_eq!(locate_key(text, "missing"), None);
    }
}
