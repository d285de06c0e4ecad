//! The re-check: the knob values found (the non-claimed ones, all together) applied to the
//! claimed recipe, run against the target on fresh inputs. A combination that still disagrees
//! is reported with its first differing element, never hidden.

use super::bits;
use super::candidates::CaseAlternatives;
use super::evidence::{differences, inputs, run_reference, run_target};
use crate::suite::Case;
use conform_metadata::fingerprint::{Recheck, RecheckOutcome};
use conform_reference::parallel::Threads;
use conform_targets::Target;

/// Re-checks `found` (`(knob, value)` pairs) on `cases` (each with its alternatives) with
/// inputs of `seed`.
pub fn recheck(
    target: &mut dyn Target,
    cases: &[(&Case, &CaseAlternatives)],
    found: &[(String, String)],
    seed: u64,
    threads: Threads,
) -> Recheck {
    let combination = found.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    let outcome = run(target, cases, found, seed, threads);
    Recheck {
        seed,
        combination,
        outcome,
    }
}

fn run(
    target: &mut dyn Target,
    cases: &[(&Case, &CaseAlternatives)],
    found: &[(String, String)],
    seed: u64,
    threads: Threads,
) -> RecheckOutcome {
    let not_run = |reason: String| RecheckOutcome::NotRun { reason };
    let mut elements = 0;
    for (case, alts) in cases {
        let edits: Vec<_> = alts
            .alternatives
            .iter()
            .filter(|a| found.iter().any(|(k, v)| *k == a.knob && *v == a.value))
            .collect();
        if edits.len() > 1 {
            return not_run(format!(
                "case {} needs {} knob values changed at once ({}); the reference runs one recipe edit at a time",
                case.id,
                edits.len(),
                edits.iter().map(|a| a.knob.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        let ins = match inputs(case, seed) {
            Ok(i) => i,
            Err(e) => return not_run(format!("case {}: {e}", case.id)),
        };
        let expected = match run_reference(case, edits.first().map(|a| &a.edit), &ins, threads) {
            Ok(Some(o)) => o,
            Ok(None) => {
                return not_run(format!(
                    "case {}: the edit for {} does not apply to these inputs",
                    case.id,
                    edits.first().map_or("", |a| a.knob.as_str())
                ))
            }
            Err(e) => return not_run(format!("case {}: {e}", case.id)),
        };
        let got = match run_target(target, case, seed, &ins) {
            Ok(o) => o,
            Err(e) => return not_run(format!("case {}: {e}", case.id)),
        };
        if let Err(e) = super::evidence::comparable(&got, &expected) {
            return not_run(format!("case {}: {e}", case.id));
        }
        let (n, first, total) = differences(&got, &expected);
        elements += total;
        if let Some((output, e)) = first {
            let dt = expected[&output].dtype;
            return RecheckOutcome::Differs {
                case: case.id.clone(),
                differing: n,
                of: total,
                element: e as u64,
                target: bits::hex(dt, bits::element(&got[&output], e)),
                expected: bits::hex(dt, bits::element(&expected[&output], e)),
                output,
            };
        }
    }
    RecheckOutcome::Reproduced {
        cases: cases.len(),
        elements,
    }
}
