//! The types of the fault catalogue, below the op families: a family declares its faults
//! ([`super::OpFamily::faults`]) with these, and the catalogue above (`crate::faults`) collects
//! and runs them. The helpers the faults of several families share live here too.

pub(crate) mod tensors;

use crate::formats::{Rounding, RoundingMode};
use crate::ops::{OpError, TensorMap};
use crate::recipe_edit::RecipeEdit;

/// Which tier must kill a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Requirement {
    /// The quick tier must kill it on every seed set (`conform adequacy` exits 1 otherwise).
    Quick,
    /// Only the full tier is expected to kill it (large shapes).
    Full,
    /// Reported, never gated: the fault is invisible to the checks by design (for example a
    /// difference far below every tolerance of a tolerance-checked output).
    Advisory,
}

impl Requirement {
    pub fn name(self) -> &'static str {
        match self {
            Requirement::Quick => "quick",
            Requirement::Full => "full",
            Requirement::Advisory => "advisory",
        }
    }
}

/// A change of the case's parameters; `false` when it changes nothing for these parameters.
pub type ParamsEdit = fn(&mut serde_json::Value) -> bool;
/// A change of the inputs (with the case's parameters); `Ok(false)` when nothing changed.
pub type InputsEdit = fn(&serde_json::Value, &mut TensorMap) -> Result<bool, OpError>;
/// A change of the outputs (with the case's parameters and the unedited inputs).
pub type OutputsEdit = fn(&serde_json::Value, &TensorMap, &mut TensorMap) -> Result<bool, OpError>;

/// A behaviour of a whole target rather than of one computation: the runner's anti-cheat and
/// poison checks are what must catch these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetBehaviour {
    /// Returns the outputs of the previous call whose output shapes were the same.
    StaleOutputByShape,
    /// Computes the first input set of a case and returns those outputs for every later set.
    FirstInputSetOnly,
    /// Leaves the last row (innermost axis run) of every output unwritten.
    LastRowUnwritten,
    /// Nondeterministic last-ULP jitter (atomics, a scheduling-dependent reduction order):
    /// every call of a case after its first flips the lowest bit of one element of its largest
    /// floating-point output, a different element per call.
    LastUlpJitter,
}

/// What a fault changes. At most one of the computation edits is usually set; a params edit
/// may come with an outputs edit that maps the outputs back (a head permutation).
#[derive(Clone, Copy, Debug, Default)]
pub struct Edit {
    pub params: Option<ParamsEdit>,
    pub inputs: Option<InputsEdit>,
    pub recipe: Option<RecipeEdit>,
    pub outputs: Option<OutputsEdit>,
    pub target: Option<TargetBehaviour>,
}

impl Edit {
    /// No edit (the base for struct-update syntax).
    pub const EMPTY: Edit = Edit {
        params: None,
        inputs: None,
        recipe: None,
        outputs: None,
        target: None,
    };
    pub const fn params(f: ParamsEdit) -> Edit {
        Edit {
            params: Some(f),
            inputs: None,
            recipe: None,
            outputs: None,
            target: None,
        }
    }
    pub const fn inputs(f: InputsEdit) -> Edit {
        Edit {
            params: None,
            inputs: Some(f),
            recipe: None,
            outputs: None,
            target: None,
        }
    }
    pub const fn recipe(r: RecipeEdit) -> Edit {
        Edit {
            params: None,
            inputs: None,
            recipe: Some(r),
            outputs: None,
            target: None,
        }
    }
    pub const fn outputs(f: OutputsEdit) -> Edit {
        Edit {
            params: None,
            inputs: None,
            recipe: None,
            outputs: Some(f),
            target: None,
        }
    }
    pub const fn target(b: TargetBehaviour) -> Edit {
        Edit {
            params: None,
            inputs: None,
            recipe: None,
            outputs: None,
            target: Some(b),
        }
    }
}

/// One named fault.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    /// Stable name (`attn-o-not-rescaled`), used on the command line and in suites.
    pub name: &'static str,
    /// The group it belongs to, for reports: `fp4`, `w4a16`, `attention`, `paged_attention`,
    /// `paged_kv`, `mc2`, `dynamic_quant`, `pa_decode_int8`, `quant_matmul`, `moe`, `mla_decode`, `range`,
    /// `any`.
    pub family: &'static str,
    /// The ops it applies to; empty means every op.
    pub ops: &'static [&'static str],
    pub requirement: Requirement,
    /// What a kernel with this bug does, in one sentence.
    pub description: &'static str,
    pub edit: Edit,
}

impl Fault {
    /// Whether the fault is defined for op `op`.
    pub fn applies_to(&self, op: &str) -> bool {
        self.ops.is_empty() || self.ops.contains(&op)
    }
}

/// Swaps the tie rule of a round-to-nearest rounding (ties-to-even and ties-away); `false`
/// for any other mode.
pub(crate) fn swap_rounding_ties(r: &mut Rounding) -> bool {
    r.mode = match r.mode {
        RoundingMode::NearestTiesToEven => RoundingMode::NearestTiesAway,
        RoundingMode::NearestTiesAway => RoundingMode::NearestTiesToEven,
        _ => return false,
    };
    true
}
