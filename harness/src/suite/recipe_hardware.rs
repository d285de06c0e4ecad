//! `recipe_hardware = "<profile id>"` of a suite or case: the hardware profile whose SoC the
//! case's recipe models. Its `[soc]` counts are put into the case's parameters under the
//! names the reference reads them by ([`crate::perf::soc::RECIPE_PARAMS`]); the profile is the
//! one place they are written, so a suite never repeats them.

use crate::perf::{built_in_profiles, soc};

/// Why `recipe_hardware` cannot give a case its SoC's parameters.
#[derive(Debug, thiserror::Error)]
pub enum RecipeHardwareError {
    #[error(
        "`recipe_hardware`: no hardware profile `{id}` (ci/hardware/{id}.toml; known: {})",
        built_in_profiles::built_in_ids().join(", ")
    )]
    Unknown { id: String },
    #[error("`recipe_hardware`: {0}")]
    Profile(crate::perf::PerfError),
    #[error("`recipe_hardware`: ci/hardware/{0}.toml has no [soc] table (the SoC's core counts)")]
    NoSoc(String),
    #[error("params must be a table")]
    ParamsNotATable,
    #[error(
        "params: `{name}` is the SoC's, given by `recipe_hardware = \"{id}\"` \
         (ci/hardware/{id}.toml): set one or the other"
    )]
    SetTwice { name: String, id: String },
}

/// Sets the recipe parameters of profile `id` in `params` (a JSON object); returns their names.
/// A profile that is not built in, has no `[soc]`, or a case that sets one of the parameters
/// itself is refused with the reason.
pub fn apply(id: &str, params: &mut serde_json::Value) -> Result<Vec<String>, RecipeHardwareError> {
    let profile = built_in_profiles::built_in(id)
        .ok_or_else(|| RecipeHardwareError::Unknown { id: id.to_string() })?
        .map_err(RecipeHardwareError::Profile)?;
    let facts = profile
        .soc
        .as_ref()
        .ok_or_else(|| RecipeHardwareError::NoSoc(id.to_string()))?;
    let object = params
        .as_object_mut()
        .ok_or(RecipeHardwareError::ParamsNotATable)?;
    let mut names = Vec::new();
    for (name, value) in soc::recipe_params(facts) {
        if object.contains_key(name) {
            return Err(RecipeHardwareError::SetTwice {
                name: name.to_string(),
                id: id.to_string(),
            });
        }
        object.insert(name.to_string(), value);
        names.push(name.to_string());
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profiles_counts_become_parameters() {
        let mut p = serde_json::json!({"batch": 2});
        assert_eq!(
            apply("atlas-800i-a2", &mut p).unwrap(),
            vec!["vector_cores"]
        );
        assert_eq!(p, serde_json::json!({"batch": 2, "vector_cores": 40}));
        let mut p = serde_json::json!({"vector_cores": 8});
        let e = apply("atlas-800i-a2", &mut p).unwrap_err().to_string();
        assert!(e.contains("set one or the other"), "{e}");
        let e = apply("nvidia-h100-sxm", &mut serde_json::json!({}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no [soc] table"), "{e}");
        let e = apply("atlas-900", &mut serde_json::json!({}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no hardware profile `atlas-900`"), "{e}");
    }
}
