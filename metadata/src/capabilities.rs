//! What a target declares it can do (the `capabilities` of a worker's handshake, the
//! reference's own list) and the steps of the rule that decides whether a case is within it
//! (`conform-targets` composes them, adding the dtype step on typed values).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// The case parameter that [`OpCapability::dtypes`] restricts.
pub const DTYPE_PARAM: &str = "dtype";
/// The case parameters that [`OpCapability::layouts`] restricts: `input_layout` (attention)
/// and `layout` (KV cache).
pub const LAYOUT_PARAMS: [&str; 2] = ["input_layout", "layout"];

/// A limit on one parameter of an op.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParamLimit {
    /// Smallest accepted value (numbers; every element of an array parameter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Largest accepted value (numbers; every element of an array parameter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Accepted values (any JSON value); empty means any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub one_of: Vec<serde_json::Value>,
}

/// What a target can do for one op.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpCapability {
    /// Accepted values of the `dtype` parameter; empty means any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dtypes: Vec<String>,
    /// Accepted values of the `input_layout` (attention) or `layout` (KV cache) parameter;
    /// empty means any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layouts: Vec<String>,
    /// The recipes (operation orders) this target implements, declared honestly; the reference
    /// lists all of its recipes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipes: Vec<String>,
    /// Parameter name -> limit. A limited parameter that a case leaves out is not checked.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, ParamLimit>,
    /// Free-form notes (e.g. "PA runs by gathering KV through the block table first").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub notes: String,
    /// Set when the worker implements the op but found at its handshake that it cannot run
    /// here (a library without the needed dtype or kernel, a device model without it): every
    /// case of the op is `skipped` with this reason, never an `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// Everything a target can do: op name -> capability.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    #[serde(default)]
    pub ops: BTreeMap<String, OpCapability>,
}

/// Why a case is skipped on a target.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct SkipReason(pub String);

fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn check_limit(name: &str, limit: &ParamLimit, v: &serde_json::Value) -> Result<(), SkipReason> {
    if !limit.one_of.is_empty() && !limit.one_of.contains(v) {
        let allowed: Vec<String> = limit.one_of.iter().map(value_text).collect();
        return Err(SkipReason(format!(
            "parameter `{name}` = {} is not supported (supported: {})",
            value_text(v),
            allowed.join(", ")
        )));
    }
    let numbers: Vec<f64> = match v {
        serde_json::Value::Number(n) => n.as_f64().into_iter().collect(),
        serde_json::Value::Array(items) => items.iter().filter_map(|x| x.as_f64()).collect(),
        _ => Vec::new(),
    };
    for x in numbers {
        if let Some(min) = limit.min
            && x < min
        {
            return Err(SkipReason(format!(
                "parameter `{name}` = {x} is below this target's minimum {min}"
            )));
        }
        if let Some(max) = limit.max
            && x > max
        {
            return Err(SkipReason(format!(
                "parameter `{name}` = {x} is above this target's maximum {max}"
            )));
        }
    }
    Ok(())
}

impl Capabilities {
    /// The capability for `op`, if this target implements it and can run it here; the error
    /// says why not (the case is then `skipped` with that reason). The first step of the rule
    /// that decides whether a case is within the capabilities; `conform-targets` composes the
    /// steps, with the dtype step between this and [`OpCapability::supports_layouts_and_limits`]
    /// (it compares typed dtypes, which this crate does not know).
    pub fn op(&self, op: &str) -> Result<&OpCapability, SkipReason> {
        let cap = self.ops.get(op).ok_or_else(|| {
            SkipReason(format!(
                "op `{op}` is not implemented by this target (it implements: {})",
                if self.ops.is_empty() {
                    "nothing".to_string()
                } else {
                    self.ops.keys().cloned().collect::<Vec<_>>().join(", ")
                }
            ))
        })?;
        if let Some(why) = &cap.unavailable {
            return Err(SkipReason(format!(
                "op `{op}` cannot run on this target here: {why}"
            )));
        }
        Ok(cap)
    }
}

impl OpCapability {
    /// Why a case of `op` whose `dtype` parameter is `dtype` is outside [`Self::dtypes`]; the
    /// declared names are listed as the target declared them. (Whether it is outside is decided
    /// on typed dtypes by `conform-targets`: `bf16`, `BF16` and `bfloat16` are one dtype.)
    pub fn unsupported_dtype(&self, op: &str, dtype: &serde_json::Value) -> SkipReason {
        SkipReason(format!(
            "dtype {} is not supported for `{op}` (supported: {})",
            value_text(dtype),
            self.dtypes.join(", ")
        ))
    }

    /// Why a case of `op` cannot be judged against [`Self::dtypes`]: its op has no `dtype`
    /// parameter (`quant_matmul` names its output type `out`), so the declared dtypes would
    /// constrain nothing. Every such case is skipped with this reason rather than run as if
    /// the declaration were not there.
    pub fn dtypes_without_dtype_param(&self, op: &str) -> SkipReason {
        SkipReason(format!(
            "`dtypes` ({}) is declared for `{op}`, whose cases have no `dtype` parameter: it \
             would constrain nothing; constrain the parameter that names the type instead \
             (for `quant_matmul`, the output type: `limits.out.one_of`; targets/PROTOCOL.md)",
            self.dtypes.join(", ")
        ))
    }

    /// Whether a case of `op` with `params` is within [`Self::layouts`] and [`Self::limits`];
    /// the error says why not.
    pub fn supports_layouts_and_limits(
        &self,
        op: &str,
        params: &serde_json::Value,
    ) -> Result<(), SkipReason> {
        if !self.layouts.is_empty() {
            for key in LAYOUT_PARAMS {
                if let Some(l) = params.get(key) {
                    let l = value_text(l);
                    if !self.layouts.contains(&l) {
                        return Err(SkipReason(format!(
                            "{key} {l} is not supported for `{op}` (supported: {})",
                            self.layouts.join(", ")
                        )));
                    }
                }
            }
        }
        for (name, limit) in &self.limits {
            if let Some(v) = params.get(name) {
                check_limit(name, limit, v)?;
            }
        }
        Ok(())
    }
}

/// A timing request: warm-up runs, then timed iterations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimingRequest {
    pub warmup: u32,
    pub iterations: u32,
}
