//! `recipe_hardware = "<profile id>"` of a suite or case: the hardware profile whose SoC the
//! case's recipe models. Its `[soc]` counts are put into the case's parameters under the
//! names the reference reads them by ([`crate::perf::soc::RECIPE_PARAMS`]); the profile is the
//! one place they are written, so a suite never repeats them.

use crate::perf::soc;

/// Sets the recipe parameters of profile `id` in `params` (a JSON object); returns their names.
/// A profile that is not built in, has no `[soc]`, or a case that sets one of the parameters
/// itself is refused with the reason.
pub fn apply(id: &str, params: &mut serde_json::Value) -> Result<Vec<String>, String> {
    let profile = soc::built_in(id)
        .ok_or_else(|| {
            format!(
                "`recipe_hardware`: no hardware profile `{id}` (ci/hardware/{id}.toml; known: {})",
                soc::built_in_ids().join(", ")
            )
        })?
        .map_err(|e| format!("`recipe_hardware`: {e}"))?;
    let facts = profile.soc.as_ref().ok_or_else(|| {
        format!(
            "`recipe_hardware`: ci/hardware/{id}.toml has no [soc] table (the SoC's core counts)"
        )
    })?;
    let object = params
        .as_object_mut()
        .ok_or_else(|| "params must be a table".to_string())?;
    let mut names = Vec::new();
    for (name, value) in soc::recipe_params(facts) {
        if object.contains_key(name) {
            return Err(format!(
                "params: `{name}` is the SoC's, given by `recipe_hardware = \"{id}\"` \
                 (ci/hardware/{id}.toml): set one or the other"
            ));
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
        let e = apply("atlas-800i-a2", &mut p).unwrap_err();
        assert!(e.contains("set one or the other"), "{e}");
        let e = apply("nvidia-h100-sxm", &mut serde_json::json!({})).unwrap_err();
        assert!(e.contains("has no [soc] table"), "{e}");
        let e = apply("atlas-900", &mut serde_json::json!({})).unwrap_err();
        assert!(e.contains("no hardware profile `atlas-900`"), "{e}");
    }
}
