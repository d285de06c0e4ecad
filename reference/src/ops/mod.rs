//! Op families as data: what a case of each op takes and produces, what it costs, how its
//! inputs are generated, and how the reference computes it.
//!
//! This is the single place where an op's knowledge lives; the harness (suites, generators,
//! golden files, roofline) and the in-process reference target both go through
//! [`OpFamily`]. Parameters arrive as JSON values with the same names as the suites (and, where
//! one exists, as torch_npu's API).
//!
//! Recipe names: every family accepts `"oracle"`, which returns its outputs as F64 tensors,
//! exact (or f64-accurate) and NOT rounded to the output dtype; the harness rounds once where a
//! rounded expectation is needed. Other recipe names are the family's emulation presets.

mod attention_faults;
pub mod attention_regimes;
pub mod attention_ties;
pub mod attention_variants;
pub mod dynamic_quant;
pub mod dynamic_quant_variants;
pub mod fa_prefill;
pub mod fault;
pub mod fp4;
pub mod fp4_extremes;
pub mod fp4_ties;
pub mod generate;
pub mod mc2_matmul_allreduce;
pub mod mc2_ties;
pub mod mc2_witness;
pub mod mla_decode;
pub mod moe_dispatch_combine;
pub mod nvfp4_witness;
pub mod pa_decode;
pub mod pa_decode_int8;
pub mod paged_kv;
pub mod path;
mod preset_family;
pub mod preset_variants;
pub mod quant_matmul;
pub mod quant_matmul_variants;
pub mod range_regimes;
pub mod regime;
pub mod tensor;

pub use crate::recipe_edit::RecipeEdit;
pub use generate::{special_values, GenContext, SpecialValues, ValueDist};
pub use path::ParamPath;
pub use regime::Regime;
pub use tensor::{ElemType, Tensor, TensorError, TensorMap};

use crate::formats::DType;
use crate::knob::Knob;
use crate::parallel::Threads;
use crate::variant::{Dispatch, KernelVariant, Platform};
use thiserror::Error;

/// The recipe name that selects a family's exact oracle.
pub const ORACLE: &str = "oracle";

/// One tensor an op takes or produces.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TensorSpec {
    pub name: String,
    pub dtype: ElemType,
    pub shape: Vec<usize>,
    /// Logical axis names (e.g. `["b", "s", "n", "d"]`), used to report element positions.
    pub axes: Vec<String>,
}

impl TensorSpec {
    pub fn new(name: &str, dtype: ElemType, shape: Vec<usize>, axes: &[&str]) -> TensorSpec {
        TensorSpec {
            name: name.to_string(),
            dtype,
            shape,
            axes: axes.iter().map(|a| a.to_string()).collect(),
        }
    }
}

impl TensorSpec {
    /// The tensor's size in bytes.
    pub fn bytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size_bytes()
    }
}

/// Every input read once and every output written once: the minimum traffic of a case
/// ([`OpCost::bytes`]).
pub fn io_bytes(inputs: &[TensorSpec], outputs: &[TensorSpec]) -> f64 {
    inputs.iter().chain(outputs).map(|s| s.bytes() as f64).sum()
}

/// Work and minimum traffic of one case, for roofline figures.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OpCost {
    /// Floating-point operations (a multiply-add counts as 2).
    pub flops: f64,
    /// Minimum bytes moved: every input read once, every output written once.
    pub bytes: f64,
    /// The element type whose compute peak bounds the flops (the operands of the matmul or
    /// attention products; the output type of a dequantisation): the hardware profile's peak
    /// for it is the roofline's compute ceiling.
    pub compute: ElemType,
}

/// What one case of an op looks like.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OpDescription {
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<TensorSpec>,
    pub cost: OpCost,
}

/// Errors of the op layer; each names the offending parameter, tensor or recipe.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum OpError {
    #[error("unknown op `{0}`")]
    UnknownOp(String),
    #[error("op `{op}`: unknown recipe `{recipe}` (known: {known})")]
    UnknownRecipe {
        op: String,
        recipe: String,
        known: String,
    },
    #[error("op `{op}`: parameter `{param}`: {message}")]
    InvalidParam {
        op: String,
        param: String,
        message: String,
    },
    #[error("op `{op}`: input `{input}`: {message}")]
    InvalidInput {
        op: String,
        input: String,
        message: String,
    },
    #[error("op `{op}`: missing input `{input}`")]
    MissingInput { op: String, input: String },
    #[error("op `{op}`: {message}")]
    Failed { op: String, message: String },
    /// A declared numeric regime ([`regime`]) that this case cannot hold.
    #[error("op `{op}`: regime `{regime}`: {message}")]
    Regime {
        op: String,
        regime: String,
        message: String,
    },
}

impl OpError {
    /// A parameter of `op` that it cannot take.
    pub fn invalid_param(op: &str, param: &str, message: impl Into<String>) -> OpError {
        OpError::InvalidParam {
            op: op.into(),
            param: param.into(),
            message: message.into(),
        }
    }

    /// Regime `r` is not one `op` declares ([`OpFamily::regimes`]).
    pub fn regime_not_for(op: &str, r: Regime) -> OpError {
        OpError::Regime {
            op: op.into(),
            regime: r.name().into(),
            message: format!("does not apply to this op (only to {})", r.ops().join(", ")),
        }
    }

    /// `op` could not compute (or generate) what was asked.
    pub fn failed(op: &str, message: impl std::fmt::Display) -> OpError {
        OpError::Failed {
            op: op.into(),
            message: message.to_string(),
        }
    }
}

/// The `dtype` of the families whose `dtype` parameter has a default (the FP4 ops, the
/// quantising ops): bf16, the type of the models these kernels serve.
pub(crate) const DEFAULT_DTYPE: &str = "bf16";

/// The `dtype` parameter of an op whose activation `x` is bf16 or f16, the two input types of
/// the quantising APIs (npu_dynamic_quant, the MoE dispatch).
pub(crate) fn x_dtype_16(op: &str, dtype: &str) -> Result<ElemType, OpError> {
    match dtype {
        "bf16" => Ok(ElemType::Bf16),
        "f16" => Ok(ElemType::F16),
        other => Err(OpError::invalid_param(
            op,
            "dtype",
            format!("`{other}`: x is bf16 or f16 (the API's two input types)"),
        )),
    }
}

/// Refuses special inputs with NaN or infinity for an op whose API defines no result for
/// them (a case that asks is wrong, not a kernel).
pub(crate) fn refuse_non_finite(op: &str, dist: &ValueDist) -> Result<(), OpError> {
    match dist {
        ValueDist::Special {
            non_finite: true, ..
        } => Err(OpError::failed(
            op,
            "special inputs with non_finite = true: the API defines no result for NaN or Inf inputs, so no case asks for them",
        )),
        _ => Ok(()),
    }
}

/// An op family: one suite file's worth of cases.
pub trait OpFamily: Sync {
    /// The op name used in suites (`fa_prefill`, `mxfp4_dequant`, ...).
    fn name(&self) -> &'static str;
    /// The emulation recipes this family knows (besides [`ORACLE`]).
    fn recipes(&self) -> Vec<&'static str>;
    /// Validates `params` and describes the case's tensors and cost.
    fn describe(&self, params: &serde_json::Value) -> Result<OpDescription, OpError>;
    /// Generates the case's inputs (values from `ctx.dist`, structured inputs such as block
    /// tables from the op's own rules).
    fn generate(
        &self,
        params: &serde_json::Value,
        ctx: &mut GenContext,
    ) -> Result<TensorMap, OpError>;
    /// The value a case's `dtype` parameter takes when the case leaves it out, for a family
    /// whose `dtype` has a default (`None`: the family has no `dtype` parameter, or requires
    /// it). A target's declared `dtypes` are checked against it for such a case.
    fn default_dtype(&self) -> Option<&'static str> {
        None
    }
    /// The numeric regimes ([`regime`]) this family's generator can guarantee: the family's
    /// own declaration, from which [`Regime::ops`], [`Regime::applies_to`] and [`regimes_for`]
    /// are derived (a regime the runner guarantees, [`Regime::by_runner`], applies to every
    /// family without being listed).
    fn regimes(&self) -> &'static [Regime] {
        &[]
    }
    /// Checks that a case with `params` can hold every regime of `regimes` (from the shape
    /// alone), naming the first it cannot hold.
    fn check_regimes(&self, params: &serde_json::Value, regimes: &[Regime]) -> Result<(), OpError> {
        let _ = params;
        match regimes.first() {
            None => Ok(()),
            Some(&r) => Err(OpError::regime_not_for(self.name(), r)),
        }
    }
    /// [`OpFamily::generate`], then makes every regime of `regimes` true whatever the stream
    /// (the stream moves where and with which values, never whether). Without regimes, the
    /// same inputs as [`OpFamily::generate`].
    fn generate_with_regimes(
        &self,
        params: &serde_json::Value,
        regimes: &[Regime],
        ctx: &mut GenContext,
    ) -> Result<TensorMap, OpError> {
        self.check_regimes(params, regimes)?;
        self.generate(params, ctx)
    }
    /// The family's parameter paths ([`path`]), each with whether a case with `params`
    /// reaches it: the same names, in the same order, for every valid `params`.
    fn paths(&self, params: &serde_json::Value) -> Result<Vec<ParamPath>, OpError> {
        let _ = params;
        Ok(Vec::new())
    }
    /// Runs the reference with `recipe` (or [`ORACLE`]).
    fn run(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError>;
    /// The knob id prefix of the family's presets (`fa`, `dq`, ...): the first part of the
    /// ids of its rows in the fidelity ledger ([`crate::fidelity`]); the op name unless the
    /// family shares a prefix or has a shorter one.
    fn knob_family(&self) -> &'static str {
        self.name()
    }
    /// The kernel variants the family's recipes that model a CANN kernel run on
    /// ([`crate::variant`]); empty when none does.
    fn kernel_variants(&self) -> &'static [&'static KernelVariant] {
        &[]
    }
    /// The kernel variant a case with `params`, judged against `recipe`, lands on: on
    /// `platform`, or on the platform the recipe describes when `None`. `None` when the recipe
    /// models no CANN kernel or the parameters are invalid. Unless the family models its host
    /// dispatch, the variant whose preset the recipe names.
    fn dispatch(
        &self,
        recipe: &str,
        params: &serde_json::Value,
        platform: Option<&Platform>,
    ) -> Option<Dispatch> {
        let _ = (params, platform);
        Dispatch::named(self.kernel_variants(), recipe)
    }
    /// The knobs of the family's preset `preset` (a fixed preset, not a dispatching recipe)
    /// with element type `dtype`, changed by `edit` first when it is an edit of a recipe the
    /// preset holds; `None` when the preset models no CANN kernel. The claims fixed in the
    /// family's code come after its recipe fields.
    fn preset_knobs(
        &self,
        preset: &str,
        dtype: DType,
        edit: Option<&RecipeEdit>,
    ) -> Option<Vec<Knob>> {
        let _ = (preset, dtype, edit);
        None
    }
    /// Every knob id the family defines (its presets' fields and its claims; its variants'
    /// rows are [`OpFamily::kernel_variants`]'). Families that share presets (the attention
    /// ops, the three FP4 ops) declare the same ids; the ledger takes each once.
    fn knob_ids(&self) -> Vec<String> {
        Vec::new()
    }
    /// The faults of the catalogue ([`fault`]) that model this family's bugs: its own, and
    /// those of a group it shares (the attention faults of every attention family). The
    /// catalogue (`crate::faults::catalogue`) is these, registry order, each once.
    fn faults(&self) -> Vec<&'static fault::Fault> {
        Vec::new()
    }
    /// Runs the reference with `recipe` changed by `edit` (an edit of the fault catalogue).
    /// `Ok(None)` when the edit does not apply: the family has no recipe of that kind, the
    /// recipe is [`ORACLE`], or the edit leaves the recipe as it was.
    fn run_with_recipe_edit(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        edit: &crate::ops::RecipeEdit,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<Option<TensorMap>, OpError> {
        let _ = (params, recipe, edit, inputs, threads);
        Ok(None)
    }
}

/// Every op family of the reference.
pub fn registry() -> Vec<&'static dyn OpFamily> {
    vec![
        &fp4::MXFP4_DEQUANT,
        &fp4::NVFP4_DEQUANT,
        &fp4::W4A16_MATMUL,
        &fa_prefill::FaPrefill,
        &pa_decode::PaDecode,
        &paged_kv::PagedKv,
        &mc2_matmul_allreduce::Mc2MatmulAllReduce,
        &dynamic_quant::DynamicQuant,
        &pa_decode_int8::PaDecodeInt8,
        &quant_matmul::QuantMatmul,
        &moe_dispatch_combine::MoeDispatchCombine,
        &mla_decode::MlaDecode,
    ]
}

/// The regimes' reach, derived from the families' own declarations ([`OpFamily::regimes`]).
impl Regime {
    /// The ops whose generators can guarantee this regime (every op for a regime the runner
    /// guarantees), in registry order.
    pub fn ops(self) -> Vec<&'static str> {
        registry()
            .into_iter()
            .filter(|f| self.holds_for(*f))
            .map(|f| f.name())
            .collect()
    }

    /// Whether the regime applies to op `op` (false for an op the registry does not know).
    pub fn applies_to(self, op: &str) -> bool {
        find(op).is_ok_and(|f| self.holds_for(f))
    }

    fn holds_for(self, family: &dyn OpFamily) -> bool {
        self.by_runner() || family.regimes().contains(&self)
    }
}

/// The regimes that apply to op `op`, in [`Regime::ALL`]'s order (what the regime map of
/// `conform adequacy` lists).
pub fn regimes_for(op: &str) -> Vec<Regime> {
    Regime::ALL
        .into_iter()
        .filter(|r| r.applies_to(op))
        .collect()
}

/// The family named `name`.
pub fn find(name: &str) -> Result<&'static dyn OpFamily, OpError> {
    registry()
        .into_iter()
        .find(|f| f.name() == name)
        .ok_or_else(|| OpError::UnknownOp(name.to_string()))
}

/// Deserialises a family's typed parameters, mapping serde's message to [`OpError`].
pub fn parse_params<T: serde::de::DeserializeOwned>(
    op: &str,
    params: &serde_json::Value,
) -> Result<T, OpError> {
    serde_json::from_value(params.clone()).map_err(|e| OpError::InvalidParam {
        op: op.to_string(),
        param: "params".to_string(),
        message: e.to_string(),
    })
}

/// Fetches a named input, checking its dtype and shape against the description.
pub fn input<'a>(
    op: &str,
    inputs: &'a TensorMap,
    spec: &TensorSpec,
) -> Result<&'a Tensor, OpError> {
    let t = inputs
        .get(&spec.name)
        .ok_or_else(|| OpError::MissingInput {
            op: op.to_string(),
            input: spec.name.clone(),
        })?;
    if t.dtype != spec.dtype || t.shape != spec.shape {
        return Err(OpError::InvalidInput {
            op: op.to_string(),
            input: spec.name.clone(),
            message: format!(
                "expected {} {:?}, got {} {:?}",
                spec.dtype.name(),
                spec.shape,
                t.dtype.name(),
                t.shape
            ),
        });
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_regime_applies_to_the_families_that_declare_it() {
        assert_eq!(regimes_for("fa_prefill").len(), 12);
        assert_eq!(regimes_for("pa_decode").len(), 11);
        assert_eq!(regimes_for("mxfp4_dequant").len(), 4);
        assert_eq!(regimes_for("w4a16_matmul").len(), 5);
        assert_eq!(regimes_for("nvfp4_dequant").len(), 5);
        assert_eq!(regimes_for("mc2_matmul_allreduce").len(), 6);
        assert_eq!(regimes_for("dynamic_quant").len(), 3);
        assert_eq!(regimes_for("pa_decode_int8").len(), 7);
        assert_eq!(
            regimes_for("mla_decode"),
            vec![
                Regime::RoundingTies,
                Regime::SubnormalOutputs,
                Regime::RepeatedCall,
                Regime::MlaRopeLateMax,
                Regime::ModerateLateMax,
                Regime::ModerateEarlyMax
            ]
        );
        assert_eq!(
            regimes_for("quant_matmul"),
            vec![
                Regime::RoundingTies,
                Regime::SubnormalOutputs,
                Regime::RepeatedCall,
                Regime::IntMatmulEdges
            ]
        );
        assert_eq!(regimes_for("moe_dispatch_combine").len(), 5);
        assert_eq!(regimes_for("paged_kv"), vec![Regime::RepeatedCall]);
        assert!(Regime::ALL
            .iter()
            .all(|r| r.by_runner() == (*r == Regime::RepeatedCall)));
        // The runner repeats an input set of every case: every registered op is listed.
        for family in registry() {
            assert!(
                Regime::RepeatedCall.applies_to(family.name()),
                "{} does not get the runner's regime",
                family.name()
            );
        }
        assert!(!Regime::LargeLogits.applies_to("mc2_matmul_allreduce"));
    }
}
