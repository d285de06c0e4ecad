//! The reference with one fault of the catalogue injected ([`conform_reference::faults`]): a
//! target that is wrong in one known way, run through the same runner, verdicts and
//! anti-cheat as any kernel. `conform adequacy` uses one per fault to measure which faults the
//! suites catch.
//!
//! It declares every reference recipe, so it is judged by the cases' own checks. A case on
//! which its fault changes nothing is skipped ("not applicable"), not passed.

use crate::reference_target::{family_capability, reference_versions};
use crate::target::{Availability, Capabilities, ExecRequest, Execution, Target, TargetError};
use conform_reference::faults::{self, Fault, FaultRun, TargetBehaviour};
use conform_reference::ops::{self, TensorMap, ORACLE};
use conform_reference::parallel::Threads;
use std::collections::BTreeMap;

/// The name prefix of fault targets (`fault:<fault name>`).
pub const PREFIX: &str = "fault:";

/// The reference with `fault` injected.
pub struct FaultTarget {
    fault: &'static Fault,
    name: String,
    threads: Threads,
    /// Outputs of earlier calls, by output shapes ([`TargetBehaviour::StaleOutputByShape`]).
    by_shape: BTreeMap<Vec<(String, Vec<usize>)>, TensorMap>,
    /// The first input set's outputs, by case ([`TargetBehaviour::FirstInputSetOnly`]).
    first_set: BTreeMap<String, TensorMap>,
    /// Calls so far, by case ([`TargetBehaviour::LastUlpJitter`]).
    calls: BTreeMap<String, u64>,
}

impl FaultTarget {
    pub fn new(fault: &'static Fault, threads: Threads) -> FaultTarget {
        FaultTarget {
            fault,
            name: format!("{PREFIX}{}", fault.name),
            threads,
            by_shape: BTreeMap::new(),
            first_set: BTreeMap::new(),
            calls: BTreeMap::new(),
        }
    }

    pub fn fault(&self) -> &'static Fault {
        self.fault
    }

    fn behave(&mut self, request: &ExecRequest, outputs: TensorMap) -> TensorMap {
        match self.fault.edit.target {
            None => outputs,
            Some(TargetBehaviour::StaleOutputByShape) => {
                let key = outputs
                    .iter()
                    .map(|(k, t)| (k.clone(), t.shape.clone()))
                    .collect();
                self.by_shape.entry(key).or_insert(outputs).clone()
            }
            Some(TargetBehaviour::FirstInputSetOnly) => {
                if request.input_set == 0 {
                    self.first_set
                        .insert(request.case_id.clone(), outputs.clone());
                    outputs
                } else {
                    self.first_set
                        .get(&request.case_id)
                        .cloned()
                        .unwrap_or(outputs)
                }
            }
            Some(TargetBehaviour::LastUlpJitter) => {
                let n = self.calls.entry(request.case_id.clone()).or_insert(0);
                let call = *n;
                *n += 1;
                let mut outputs = outputs;
                if call > 0 {
                    jitter_last_bit(&mut outputs, call);
                }
                outputs
            }
            Some(TargetBehaviour::LastRowUnwritten) => {
                let mut outputs = outputs;
                for t in outputs.values_mut() {
                    let row = t.shape.last().copied().unwrap_or(1).min(t.numel());
                    let w = t.dtype.size_bytes();
                    let pattern = request.poison.bytes(t.dtype);
                    let len = t.data.len();
                    for chunk in t.data[len - row * w..].chunks_exact_mut(w) {
                        chunk.copy_from_slice(&pattern);
                    }
                }
                outputs
            }
        }
    }
}

impl Target for FaultTarget {
    fn name(&self) -> &str {
        &self.name
    }

    fn availability(&mut self) -> Availability {
        Availability::Available {
            description: format!("the reference with fault `{}`", self.fault.name),
            versions: reference_versions(),
        }
    }

    fn capabilities(&mut self) -> Capabilities {
        let ops = ops::registry()
            .into_iter()
            .filter(|f| self.fault.applies_to(f.name()))
            .map(|f| family_capability(f, self.fault.description.to_string()))
            .collect();
        Capabilities { ops }
    }

    /// Fresh threads for the next computation (the reference's pools are per process).
    fn renew(&mut self) {
        conform_reference::parallel::renew_pools();
    }

    fn execute(&mut self, request: &ExecRequest) -> Result<Execution, TargetError> {
        let family = ops::find(&request.op).map_err(|e| TargetError::Unsupported(e.to_string()))?;
        let recipe = request.recipe.as_deref().unwrap_or(ORACLE);
        let run = faults::run(
            self.fault,
            family,
            &request.params,
            recipe,
            &request.inputs,
            self.threads,
        )
        .map_err(|e| TargetError::Worker {
            message: e.to_string(),
            stderr_tail: String::new(),
        })?;
        let outputs = match run {
            FaultRun::Outputs(o) => o,
            FaultRun::NotApplicable(why) => {
                return Err(TargetError::Unsupported(format!(
                    "fault `{}` does not apply: {why}",
                    self.fault.name
                )))
            }
        };
        Ok(Execution {
            outputs: self.behave(request, outputs),
            timings_us: Vec::new(),
            cpu_us: Vec::new(),
            setup_us: None,
            notes: Vec::new(),
            stderr_tail: String::new(),
        })
    }
}

/// Flips the lowest bit of one element of the largest floating-point output: element
/// `call * 7919 mod numel` (a prime stride: another element on every call).
fn jitter_last_bit(outputs: &mut TensorMap, call: u64) {
    let Some(t) = outputs
        .values_mut()
        .filter(|t| t.dtype.is_float() && t.numel() > 0)
        .max_by_key(|t| t.numel())
    else {
        return;
    };
    let w = t.dtype.size_bytes().max(1);
    let n = (t.data.len() / w) as u64;
    if n == 0 {
        return;
    }
    let i = (call.wrapping_mul(7919) % n) as usize;
    // Little-endian storage: the element's lowest byte holds its lowest mantissa bit.
    t.data[i * w] ^= 1;
}
