//! The in-process reference target: any recipe of any op family of `conform_reference`.
//!
//! Timing is wall time of the `run` call. Timed runs rotate among several copies of the
//! inputs (distinct allocations), so consecutive iterations do not read the same memory.

use crate::target::{
    Availability, Capabilities, ExecRequest, Execution, OpCapability, Target, TargetError,
};
use conform_reference::ops::{self, OpFamily, TensorMap, ORACLE};
use conform_reference::parallel::Threads;
use std::collections::BTreeMap;
use std::time::Instant;

/// How many input copies timed runs rotate among, at most.
pub const ROTATION_BUFFERS: usize = 3;
/// Input copies are only made while their total stays under this many bytes.
pub const ROTATION_BYTES_LIMIT: usize = 1 << 30;

/// The environment variable that slows the in-process reference's timed runs, for trying a
/// perf gate on a known slowdown: a fraction (`0.10` = each timed run takes 10% longer). After
/// the kernel has run and its output is kept, the timed region is extended by busy-waiting;
/// the outputs, and so every verdict, are untouched. `conform perf serve-reference` honours it
/// too; the nightly gate's kept build sets it empty (it stands for another build).
pub const SLOWDOWN_ENV: &str = "CONFORM_REFERENCE_SLOWDOWN";

/// The reference as a target.
pub struct ReferenceTarget {
    families: Vec<&'static dyn OpFamily>,
    threads: Threads,
    /// The extra fraction of each timed run (from [`SLOWDOWN_ENV`]), or why its value is bad.
    slowdown: Result<f64, SlowdownError>,
}

/// Why the value of [`SLOWDOWN_ENV`] cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SlowdownError {
    /// The variable is set but not valid Unicode.
    #[error("{SLOWDOWN_ENV}: {0}")]
    NotUnicode(std::env::VarError),
    /// The value is not a finite fraction in [0, 10].
    #[error("{SLOWDOWN_ENV}=`{0}` is not a fraction between 0 and 10 (0.10 = 10% slower)")]
    NotAFraction(String),
}

/// The value of [`SLOWDOWN_ENV`]: unset or empty is 0; else a finite fraction in [0, 10].
pub fn slowdown_from_env() -> Result<f64, SlowdownError> {
    match std::env::var(SLOWDOWN_ENV) {
        Err(std::env::VarError::NotPresent) => Ok(0.0),
        Err(e) => Err(SlowdownError::NotUnicode(e)),
        Ok(v) if v.trim().is_empty() => Ok(0.0),
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && (0.0..=10.0).contains(&x) => Ok(x),
            _ => Err(SlowdownError::NotAFraction(v)),
        },
    }
}

impl ReferenceTarget {
    /// Every family of [`ops::registry`], run with `threads`.
    /// Timed runs are slowed as [`SLOWDOWN_ENV`] says (unset: not at all).
    pub fn new(threads: Threads) -> ReferenceTarget {
        let mut t = ReferenceTarget::with_families(ops::registry(), threads);
        t.slowdown = slowdown_from_env();
        t
    }

    /// The same target with timed runs slowed by `fraction` (0: none), whatever the
    /// environment says.
    pub fn with_slowdown(mut self, fraction: f64) -> ReferenceTarget {
        self.slowdown = Ok(fraction);
        self
    }

    /// A reference target over the given families (tests use their own).
    pub fn with_families(
        families: Vec<&'static dyn OpFamily>,
        threads: Threads,
    ) -> ReferenceTarget {
        ReferenceTarget {
            families,
            threads,
            slowdown: Ok(0.0),
        }
    }

    fn family(&self, op: &str) -> Result<&'static dyn OpFamily, TargetError> {
        self.families
            .iter()
            .copied()
            .find(|f| f.name() == op)
            .ok_or_else(|| TargetError::Unsupported(format!("the reference has no op `{op}`")))
    }
}

fn input_bytes(inputs: &TensorMap) -> usize {
    inputs.values().map(|t| t.data.len()).sum()
}

/// The built-in reference target's name: the one target every suite can run, whose outputs
/// are the golden data (never a worker directory's name).
pub const REFERENCE_TARGET: &str = "reference";

/// The versions an in-process reference target reports: the conform-reference crate's.
pub(crate) fn reference_versions() -> BTreeMap<String, String> {
    let mut versions = BTreeMap::new();
    versions.insert(
        "conform-reference".to_string(),
        env!("CARGO_PKG_VERSION").to_string(),
    );
    versions
}

/// What an in-process reference offers of family `f`: its recipes and the oracle, with `notes`.
pub(crate) fn family_capability(f: &dyn OpFamily, notes: String) -> (String, OpCapability) {
    let mut recipes: Vec<String> = f.recipes().iter().map(|r| r.to_string()).collect();
    recipes.push(ORACLE.to_string());
    (
        f.name().to_string(),
        OpCapability {
            recipes,
            notes,
            ..Default::default()
        },
    )
}

impl Target for ReferenceTarget {
    fn name(&self) -> &str {
        REFERENCE_TARGET
    }

    fn availability(&mut self) -> Availability {
        Availability::Available {
            description: format!(
                "in-process CPU reference, {} thread(s), {} op families",
                self.threads.0,
                self.families.len()
            ),
            versions: reference_versions(),
        }
    }

    fn capabilities(&mut self) -> Capabilities {
        let ops = self
            .families
            .iter()
            .map(|f| family_capability(*f, String::new()))
            .collect();
        Capabilities { ops }
    }

    /// Fresh threads for the next computation (the reference's pools are per process).
    fn renew(&mut self) {
        conform_reference::parallel::renew_pools();
    }

    fn execute(&mut self, request: &ExecRequest) -> Result<Execution, TargetError> {
        let family = self.family(&request.op)?;
        let recipe = request.recipe.as_deref().unwrap_or(ORACLE);
        if recipe != ORACLE && !family.recipes().contains(&recipe) {
            return Err(TargetError::Unsupported(format!(
                "op `{}` has no recipe `{recipe}` (known: {}, {ORACLE})",
                request.op,
                family.recipes().join(", ")
            )));
        }
        let run = |inputs: &TensorMap| {
            family
                .run(&request.params, recipe, inputs, self.threads)
                .map_err(|e| TargetError::Worker {
                    message: e.to_string(),
                    stderr_tail: String::new(),
                })
        };
        let outputs = run(&request.inputs)?;
        let mut timings_us = Vec::new();
        let mut cpu = Vec::new();
        let mut notes = Vec::new();
        if let Some(timing) = request.timing {
            let slowdown = self.slowdown.clone().map_err(|e| TargetError::Worker {
                message: e.to_string(),
                stderr_tail: String::new(),
            })?;
            let bytes = input_bytes(&request.inputs);
            let copies = ROTATION_BYTES_LIMIT
                .checked_div(bytes)
                .map_or(1, |n| n.clamp(1, ROTATION_BUFFERS));
            let mut buffers: Vec<TensorMap> = Vec::with_capacity(copies);
            buffers.push(request.inputs.clone());
            while buffers.len() < copies {
                buffers.push(request.inputs.clone());
            }
            notes.push(format!(
                "wall time of the in-process run, {} thread(s), rotating {copies} input buffer(s)",
                self.threads.0
            ));
            for i in 0..timing.warmup as usize {
                run(&buffers[i % copies])?;
            }
            if slowdown > 0.0 {
                notes.push(format!(
                    "slowed by {:.1}% ({SLOWDOWN_ENV}): busy-waiting after each run",
                    100.0 * slowdown
                ));
            }
            let mut cpu_us = Vec::with_capacity(timing.iterations as usize);
            for i in 0..timing.iterations as usize {
                let inputs = &buffers[i % copies];
                let cpu0 = crate::cpu_time::process_cpu_us();
                let start = Instant::now();
                let out = run(inputs)?;
                if slowdown > 0.0 {
                    let target = start.elapsed().mul_f64(1.0 + slowdown);
                    while start.elapsed() < target {
                        std::hint::spin_loop();
                    }
                }
                timings_us.push(start.elapsed().as_secs_f64() * 1e6);
                if let (Some(a), Some(b)) = (cpu0, crate::cpu_time::process_cpu_us()) {
                    cpu_us.push((b - a).max(0.0));
                }
                drop(out);
            }
            if cpu_us.len() == timings_us.len() {
                cpu = cpu_us;
            }
        }
        Ok(Execution {
            outputs,
            timings_us,
            cpu_us: cpu,
            setup_us: None,
            notes,
            stderr_tail: String::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::TimingRequest;
    use conform_metadata::Status;
    use conform_reference::ops::{
        ElemType, GenContext, OpCost, OpDescription, OpError, Tensor, TensorSpec,
    };
    use serde_json::json;

    /// y = 2 * x, f32; recipe "plus_one" adds 1 after.
    struct Double;

    impl OpFamily for Double {
        fn name(&self) -> &'static str {
            "double"
        }
        fn recipes(&self) -> Vec<&'static str> {
            vec!["plus_one"]
        }
        fn describe(&self, params: &serde_json::Value) -> Result<OpDescription, OpError> {
            let n = params["n"].as_u64().ok_or(OpError::InvalidParam {
                op: "double".into(),
                param: "n".into(),
                message: "missing".into(),
            })? as usize;
            Ok(OpDescription {
                inputs: vec![TensorSpec::new("x", ElemType::F32, vec![n], &["i"])],
                outputs: vec![TensorSpec::new("y", ElemType::F32, vec![n], &["i"])],
                cost: OpCost {
                    flops: n as f64,
                    bytes: 8.0 * n as f64,
                    compute: ElemType::F32,
                },
            })
        }
        fn generate(
            &self,
            params: &serde_json::Value,
            ctx: &mut GenContext,
        ) -> Result<TensorMap, OpError> {
            let d = self.describe(params)?;
            let n = d.inputs[0].shape[0];
            let v: Vec<f32> = (0..n).map(|_| (ctx.next_u64() % 100) as f32).collect();
            let mut m = TensorMap::new();
            m.insert("x".into(), Tensor::from_f32(vec![n], &v));
            Ok(m)
        }
        fn run(
            &self,
            _params: &serde_json::Value,
            recipe: &str,
            inputs: &TensorMap,
            _threads: Threads,
        ) -> Result<TensorMap, OpError> {
            let x = inputs.get("x").ok_or(OpError::MissingInput {
                op: "double".into(),
                input: "x".into(),
            })?;
            let add = if recipe == "plus_one" { 1.0 } else { 0.0 };
            let y: Vec<f32> = x
                .to_f32_vec()
                .unwrap()
                .iter()
                .map(|v| v * 2.0 + add)
                .collect();
            let mut m = TensorMap::new();
            m.insert("y".into(), Tensor::from_f32(x.shape.clone(), &y));
            Ok(m)
        }
    }

    static DOUBLE: Double = Double;

    fn request(recipe: Option<&str>, timing: Option<TimingRequest>) -> ExecRequest {
        let mut inputs = TensorMap::new();
        inputs.insert("x".into(), Tensor::from_f32(vec![3], &[1.0, 2.0, 3.0]));
        ExecRequest {
            case_id: "double/n3".into(),
            input_set: 0,
            op: "double".into(),
            params: json!({"n": 3}),
            recipe: recipe.map(String::from),
            inputs,
            expected_outputs: vec![TensorSpec::new("y", ElemType::F32, vec![3], &["i"])],
            timing,
            poison: Default::default(),
        }
    }

    #[test]
    fn runs_oracle_and_recipes() {
        let mut t = ReferenceTarget::with_families(vec![&DOUBLE], Threads::ONE);
        assert!(t.availability().is_available());
        let caps = t.capabilities();
        assert_eq!(caps.ops["double"].recipes, vec!["plus_one", "oracle"]);
        let e = t.execute(&request(None, None)).unwrap();
        assert_eq!(e.outputs["y"].to_f32_vec().unwrap(), vec![2.0, 4.0, 6.0]);
        assert!(e.timings_us.is_empty());
        let e = t.execute(&request(Some("plus_one"), None)).unwrap();
        assert_eq!(e.outputs["y"].to_f32_vec().unwrap(), vec![3.0, 5.0, 7.0]);
    }

    #[test]
    fn unknown_op_or_recipe_is_unsupported() {
        let mut t = ReferenceTarget::with_families(vec![&DOUBLE], Threads::ONE);
        let e = t.execute(&request(Some("nope"), None)).unwrap_err();
        assert_eq!(e.status(), Status::Skipped);
        assert!(e.to_string().contains("nope"));
        let mut r = request(None, None);
        r.op = "triple".into();
        assert!(matches!(t.execute(&r), Err(TargetError::Unsupported(_))));
        assert!(t.supports("triple", &json!({})).is_err());
        assert!(t.supports("double", &json!({"n": 3})).is_ok());
    }

    #[test]
    fn timing_gives_one_figure_per_iteration() {
        let mut t = ReferenceTarget::with_families(vec![&DOUBLE], Threads::ONE);
        let e = t
            .execute(&request(
                None,
                Some(TimingRequest {
                    warmup: 2,
                    iterations: 5,
                }),
            ))
            .unwrap();
        assert_eq!(e.timings_us.len(), 5);
        assert!(e.timings_us.iter().all(|&t| t >= 0.0 && t.is_finite()));
        assert!(e.notes[0].contains("3 input buffer"), "{:?}", e.notes);
    }

    #[test]
    fn op_errors_are_reported_not_panics() {
        let mut t = ReferenceTarget::with_families(vec![&DOUBLE], Threads::ONE);
        let mut r = request(None, None);
        r.inputs.clear();
        let e = t.execute(&r).unwrap_err();
        assert_eq!(e.status(), Status::Error);
        assert!(e.to_string().contains("`x`"), "{e}");
    }
}
