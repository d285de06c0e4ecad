//! The check policies: one [`Judge`] per policy, one file each, and the registry that maps a
//! suite's `policy = "..."` tag to its judge.
//!
//! A judge owns everything about its policy: its parameters (deserialised from the check's
//! TOML table, unknown keys refused), their ranges and the dtypes it can judge, whether it is
//! exact, the per-element rule the comparison kernel applies, the verdict it draws from the
//! pass's figures, and its label and description. `evaluate` knows no policy by name.
//!
//! Adding a policy: a new file here with a struct that derives `Deserialize` (with
//! `deny_unknown_fields`) and implements [`Policy`] and [`Judge`] (docs/verdicts.md, "Adding a
//! check policy"). Nothing else lists it: the build script (`harness/build.rs`) turns every
//! file of this folder into a line of the `registry!` invocation, in file-name order.

use super::metrics::{sat, ElementRule, PassStats};
use super::policy::{CannDtype, Needs, PolicyError};
use conform_reference::ops::ElemType;
use serde::de::DeserializeOwned;
use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

/// How one check policy judges an output. Object-safe: a [`CheckPolicy`] holds one.
pub(crate) trait Judge: Named + DynEq + Debug + Send + Sync {
    /// Checks the parameters' ranges (when a suite is loaded, and again before judging).
    fn validate(&self) -> Result<(), PolicyError> {
        Ok(())
    }
    /// Checks that the policy can judge an output of `dtype`.
    fn supports(&self, _dtype: ElemType) -> Result<(), PolicyError> {
        Ok(())
    }
    /// Exact: the policy judges the bits (or ULPs) of the case's own recipe, so a target that
    /// runs another recipe cannot be judged by it, and NaN is compared by class rather than
    /// failing as a numeric policy's NaN does.
    fn exact(&self) -> bool {
        false
    }
    /// Which tensors besides `actual` and `expected` the policy needs.
    fn needs(&self) -> Needs {
        Needs {
            oracle: false,
            baseline: false,
        }
    }
    /// Whether errors are measured against the oracle when the comparison has one.
    fn against_oracle(&self) -> bool {
        false
    }
    /// The small-value split (|g| below .0 is small; a small value errs above .1), for both
    /// the baseline pass and the main pass.
    fn small_value(&self, _dtype: ElemType) -> Option<(f64, f64)> {
        None
    }
    /// Whether the verdict also judges the subnormal stratum (module `subnormal`): evaluate
    /// then fills [`PassStats::subnormal`] of the pass and of the baseline pass.
    fn judges_subnormal_stratum(&self) -> bool {
        false
    }
    /// A short label for reports, e.g. `ulp(max=2)`, `cann_single(bf16)`.
    fn label(&self, dtype: ElemType) -> String;
    /// One sentence for `conform explain`: when an output passes.
    fn describe(&self) -> String;
    /// The per-element failure rule of the main pass (`base`: the baseline pass, when
    /// [`Judge::needs`] asks for a baseline).
    fn rule(&self, dtype: ElemType, base: Option<&PassStats>) -> ElementRule;
    /// The policy's own rule over the pass's figures: adds a reason for each failed rule and
    /// the policy's figures to `extra`.
    fn verdict(&self, dtype: ElemType, st: &PassStats, base: Option<&PassStats>, out: &mut Verdict);
}

/// A judge as the registry knows it: the tag it is written with in TOML.
pub(crate) trait Policy: Judge + DeserializeOwned + 'static {
    const NAME: &'static str;
}

/// The policy's tag (from [`Policy::NAME`]).
pub(crate) trait Named {
    fn name(&self) -> &'static str;
}

impl<P: Policy> Named for P {
    fn name(&self) -> &'static str {
        P::NAME
    }
}

/// Equality across judges of possibly different types (for [`CheckPolicy`]'s `PartialEq`).
pub(crate) trait DynEq {
    fn as_any(&self) -> &dyn Any;
    fn dyn_eq(&self, other: &dyn Any) -> bool;
}

impl<T: PartialEq + 'static> DynEq for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn dyn_eq(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<T>() == Some(self)
    }
}

/// What a judge's [`Judge::verdict`] adds: failed rules and the policy's own figures.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    pub reasons: Vec<String>,
    pub extra: Vec<(String, f64)>,
}

impl Verdict {
    pub fn fail(&mut self, reason: String) {
        self.reasons.push(reason);
    }
    pub fn put(&mut self, key: &str, value: f64) {
        self.extra.push((key.to_string(), value));
    }
}

/// `n / b` for reports: 0 when n = 0; f64::MAX when only b = 0.
pub(crate) fn ratio(n: f64, b: f64) -> f64 {
    if n == 0.0 {
        0.0
    } else if b == 0.0 {
        f64::MAX
    } else {
        sat(n / b)
    }
}

/// `Err(InvalidParam)` for `param` of policy `P` unless `ok`.
pub(crate) fn require<P: Policy>(
    ok: bool,
    param: &'static str,
    value: f64,
    message: &'static str,
) -> Result<(), PolicyError> {
    if ok {
        Ok(())
    } else {
        Err(PolicyError::InvalidParam {
            policy: P::NAME,
            param,
            value,
            message,
        })
    }
}

/// One registered policy: its tag and how its parameters are read.
pub(crate) struct Entry {
    pub name: &'static str,
    pub parse: fn(toml::Table) -> Result<Arc<dyn Judge>, toml::de::Error>,
}

fn parse_as<P: Policy>(params: toml::Table) -> Result<Arc<dyn Judge>, toml::de::Error> {
    params
        .try_into::<P>()
        .map(|p| Arc::new(p) as Arc<dyn Judge>)
}

const fn entry<P: Policy>() -> Entry {
    Entry {
        name: P::NAME,
        parse: parse_as::<P>,
    }
}

/// Declares each policy's module, re-exports its judge and builds [`REGISTRY`] (a judge becomes
/// a `CheckPolicy` through `CheckPolicy::from`, in `super::check_policy`).
macro_rules! registry {
    ($(#[path = $path:literal] $module:ident :: $judge:ident),+ $(,)?) => {
        $(
            #[path = $path]
            mod $module;
            pub use $module::$judge;
        )+
        /// Every check policy, in the order `conform` lists them (their files' names).
        pub(crate) static REGISTRY: &[Entry] = &[$(entry::<$judge>()),+];
    };
}

// `registry! { #[path = ".../allclose.rs"] allclose::Allclose, ... }`: one line per file of
// this folder, written by harness/build.rs.
include!(concat!(env!("OUT_DIR"), "/policy_registry.rs"));

/// The registered policy named `name`.
pub(crate) fn find(name: &str) -> Option<&'static Entry> {
    REGISTRY.iter().find(|e| e.name == name)
}

/// `Err(UnsupportedDtype)` for policy `P` unless `dtype` is a float type.
pub(crate) fn float_only<P: Policy>(dtype: ElemType) -> Result<(), PolicyError> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(PolicyError::UnsupportedDtype {
            policy: P::NAME,
            dtype: dtype.name(),
        })
    }
}

/// The CANN dtype of `dtype`, or `Err(UnsupportedDtype)` for policy `P`.
pub(crate) fn cann_dtype<P: Policy>(dtype: ElemType) -> Result<CannDtype, PolicyError> {
    CannDtype::of(dtype).ok_or(PolicyError::UnsupportedDtype {
        policy: P::NAME,
        dtype: dtype.name(),
    })
}

/// The dtype as a CANN label names it (`bf16`), else the element type's own name.
pub(crate) fn dtype_label(dtype: ElemType) -> &'static str {
    CannDtype::of(dtype)
        .map(CannDtype::name)
        .unwrap_or_else(|| dtype.name())
}
