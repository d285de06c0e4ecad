//! The golden file format: the tensor layout of a golden file (`in.<name>`, `out.<name>`),
//! its metadata, and the definition digest that says which case definition it was blessed
//! for. The tensors themselves come from [`crate::case_data`].

use crate::suite::Case;
use conform_reference::ops::TensorMap;
use conform_targets::tensor_file::Metadata;

/// The format version of golden files' metadata.
pub const GOLDEN_FILE_FORMAT: &str = "1";

/// Inputs as `in.<name>` and outputs as `out.<name>`, the layout of a golden file.
pub fn golden_tensors(inputs: &TensorMap, outputs: &TensorMap) -> TensorMap {
    let mut all = TensorMap::new();
    for (k, v) in inputs {
        all.insert(format!("in.{k}"), v.clone());
    }
    for (k, v) in outputs {
        all.insert(format!("out.{k}"), v.clone());
    }
    all
}

/// Splits a golden file's tensors back into inputs and outputs.
pub fn split_golden(all: &TensorMap) -> (TensorMap, TensorMap) {
    let mut inputs = TensorMap::new();
    let mut outputs = TensorMap::new();
    for (k, v) in all {
        if let Some(n) = k.strip_prefix("in.") {
            inputs.insert(n.to_string(), v.clone());
        } else if let Some(n) = k.strip_prefix("out.") {
            outputs.insert(n.to_string(), v.clone());
        }
    }
    (inputs, outputs)
}

/// The canonical description of a case definition: what, if changed, invalidates its golden.
/// The parameters a hardware profile gave (`recipe_hardware`) are left out: the profile is an
/// input of its own, whose change `conform golden verify` reports as drift.
pub fn definition_json(case: &Case) -> String {
    let mut params = case.params.clone();
    if let Some(object) = params.as_object_mut() {
        for name in &case.hardware_params {
            object.remove(name);
        }
    }
    let mut d = serde_json::json!({
        "id": case.id,
        "op": case.op,
        "params": params,
        "recipe": case.recipe,
        "generator": case.inputs,
        "seed": case.seed,
    });
    // Declared regimes change the inputs; a case without any keeps its earlier digest.
    if !case.regimes.is_empty() {
        d["regimes"] = serde_json::json!(case.regimes);
    }
    d.to_string()
}

/// BLAKE3 of [`definition_json`].
pub fn definition_digest(case: &Case) -> String {
    blake3::hash(definition_json(case).as_bytes())
        .to_hex()
        .to_string()
}

/// The metadata stored in a golden file.
pub fn golden_metadata(case: &Case) -> Metadata {
    let mut m = Metadata::new();
    m.insert("conform_golden_format".into(), GOLDEN_FILE_FORMAT.into());
    m.insert("case_id".into(), case.id.clone());
    m.insert("op".into(), case.op.clone());
    m.insert("params".into(), case.params.to_string());
    m.insert("recipe".into(), case.recipe.clone());
    m.insert(
        "generator".into(),
        serde_json::to_string(&case.inputs).unwrap_or_default(),
    );
    m.insert("seed".into(), case.seed.to_string());
    m.insert("definition".into(), definition_digest(case));
    m.insert("reference_version".into(), env!("CARGO_PKG_VERSION").into());
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counts_a_hardware_profile_gives_stay_out_of_the_definition() {
        let suite = |defaults: &str| {
            format!(
                "[suite]\nname = \"demo\"\nop = \"demo_op\"\n[defaults]\nrecipe = \"r1\"\n{defaults}\n\
                 [[case]]\nname = \"c\"\nparams = {{ batch = 1 }}\n"
            )
        };
        let path = std::path::Path::new("suites/demo.toml");
        let parse = |text: &str| {
            crate::suite::load::parse_suite(path, text)
                .unwrap()
                .remove(0)
        };
        let with = parse(&suite("recipe_hardware = \"atlas-800i-a2\""));
        let without = parse(&suite(""));
        assert_eq!(with.params["vector_cores"], 40);
        // The profile is an input of its own (its change shows as drift): the case's digest is
        // the one it had before it named a profile, and other params still count.
        assert_eq!(definition_digest(&with), definition_digest(&without));
        let other = parse(&suite("params = { head_dim = 64 }"));
        assert_ne!(definition_digest(&other), definition_digest(&without));
    }
}
