//! Loading every suite of a directory, checking cases against the reference's ops, and
//! selecting cases for a run.

use super::case::Case;
use super::checks::resolve_checks;
use super::error::SuiteError;
use super::load::{locate_key, parse_suite_within};
use super::schema::Tier;
use conform_reference::ops::{self, ORACLE};
use regex::Regex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The suite files of `dir` (top-level `*.toml`, sorted by name).
pub fn suite_files(dir: &Path) -> Result<Vec<PathBuf>, SuiteError> {
    let rd = std::fs::read_dir(dir).map_err(|source| SuiteError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        // Anything named *.toml but a directory is a suite: a link to a device or a FIFO is
        // read (and refused by the reader, naming it), never skipped without a word.
        .filter(|p| !p.is_dir() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    Ok(files)
}

/// Loads and validates every suite under `dir`. Any error stops everything: nothing runs on a
/// broken suite tree.
pub fn load_all(dir: &Path) -> Result<Vec<Case>, SuiteError> {
    let mut all = Vec::new();
    let mut owner: BTreeMap<String, PathBuf> = BTreeMap::new();
    for path in suite_files(dir)? {
        let text = crate::input_file::read_text(&path, crate::input_file::Limit::SUITE).map_err(
            |source| SuiteError::Io {
                path: path.clone(),
                source,
            },
        )?;
        let mut cases = parse_suite_within(&path, &text, all.len() as u64)?;
        for c in &mut cases {
            validate_case(c, &text)?;
            if let Some(first) = owner.insert(c.id.clone(), path.clone()) {
                return Err(SuiteError::DuplicateId {
                    id: c.id.clone(),
                    first,
                    second: path.clone(),
                });
            }
        }
        all.extend(cases);
    }
    Ok(all)
}

/// Checks a case against its op family: the op exists, the recipe is known, and the op accepts
/// the parameters (shapes possible, names known). Unknown parameter names are located in the
/// file text when possible. Then reads every output's check policy into the case
/// ([`Case::policies`]): a missing, unknown or malformed check, or one that cannot judge the
/// output's dtype, is an error naming the file, the case, the output and the field.
pub fn validate_case(case: &mut Case, text: &str) -> Result<(), SuiteError> {
    let fail = |message: String| SuiteError::Case {
        path: case.source.clone(),
        id: case.id.clone(),
        message,
    };
    let family = ops::find(&case.op).map_err(|e| fail(e.to_string()))?;
    if case.recipe != ORACLE && !family.recipes().contains(&case.recipe.as_str()) {
        return Err(fail(format!(
            "unknown recipe `{}` for op `{}` (known: {})",
            case.recipe,
            case.op,
            family.recipes().join(", ")
        )));
    }
    let desc = match family.describe(&case.params) {
        Ok(d) => d,
        Err(e) => return Err(param_error(case, text, e.to_string())),
    };
    family
        .check_regimes(&case.params, &case.regimes)
        .map_err(|e| fail(e.to_string()))?;
    let (own, without) = resolve_checks(case, &desc).map_err(|e| fail(e.to_string()))?;
    case.policies = own;
    case.policies_without_recipe = without;
    Ok(())
}

/// An op's refusal of a case's parameters, located in the file text when it names an
/// unknown parameter.
fn param_error(case: &Case, text: &str, message: String) -> SuiteError {
    if let Some(key) = unknown_field(&message)
        && let Some((line, column)) = locate_key(text, &key)
    {
        return SuiteError::Parse {
            path: case.source.clone(),
            line,
            column,
            message: format!("case `{}`: unknown parameter `{key}`: {message}", case.id),
        };
    }
    SuiteError::Case {
        path: case.source.clone(),
        id: case.id.clone(),
        message,
    }
}

/// The field name in a serde "unknown field `x`" message.
fn unknown_field(message: &str) -> Option<String> {
    let rest = message.split("unknown field `").nth(1)?;
    Some(rest.split('`').next()?.to_string())
}

/// What a run selects.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Suite names (empty: all).
    pub suites: Vec<String>,
    /// A regular expression matched against case ids.
    pub filter: Option<Regex>,
    /// Only this tier (None: quick).
    pub tier: Option<Tier>,
    /// Include every tier.
    pub all_tiers: bool,
}

impl Selection {
    /// Whether `case` is selected.
    pub fn matches(&self, case: &Case) -> bool {
        (self.suites.is_empty() || self.suites.iter().any(|s| s == &case.suite))
            && self.filter.as_ref().is_none_or(|r| r.is_match(&case.id))
            && (self.all_tiers || case.tier == self.tier.unwrap_or(Tier::Quick))
    }

    /// Checks that every named suite exists among `cases`.
    pub fn unknown_suites(&self, cases: &[Case]) -> Vec<String> {
        self.suites
            .iter()
            .filter(|s| !cases.iter().any(|c| &c.suite == *s))
            .cloned()
            .collect()
    }
}
