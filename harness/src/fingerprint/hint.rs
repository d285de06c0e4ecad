//! What `conform validate` says about an op one of whose bit-exact checks failed: the recipe
//! the kernel's bits match, except which knobs, read off the op's fingerprint. A failure then
//! says whether conform's model or the kernel is the likelier culprit: a kernel that matches
//! a recipe except one knob disagrees with the model on that knob (a rounding, an order, a
//! variant); a kernel that matches every discriminated knob and still fails differs in a way
//! the model has no knob for.

use conform_metadata::fingerprint::{CaseOutcome, Fingerprint, KnobVerdict, RecheckOutcome};
use conform_metadata::results::{RunResults, Status};
use std::collections::BTreeSet;
use std::fmt;

/// A knob on which the kernel's bits do not match the claimed value.
#[derive(Clone, Debug, PartialEq)]
pub enum Deviation {
    /// The bits match another value of the knob.
    Matches { knob: String, value: String },
    /// The bits match no value of the knob; `closest` agrees on the most witness elements.
    MatchesNone { knob: String, closest: String },
}

/// What the fingerprint says about one op.
#[derive(Clone, Debug, PartialEq)]
pub enum OpHint {
    /// The kernel matches the recipes except on `deviations` (never empty). `reproduced`: the
    /// combination of the values found reproduces every element on fresh inputs (`None`: the
    /// re-check did not run).
    MatchesExcept {
        op: String,
        recipes: Vec<String>,
        deviations: Vec<Deviation>,
        reproduced: Option<bool>,
    },
    /// Every knob these shapes discriminate matches its claim: the difference lies outside the
    /// model's knobs.
    MatchesEveryKnob {
        op: String,
        recipes: Vec<String>,
        knobs: usize,
    },
    /// No case of the op could be fingerprinted; the first reason.
    NotFingerprinted { op: String, reason: String },
}

fn quoted(items: &[String]) -> String {
    items
        .iter()
        .map(|r| format!("`{r}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Deviation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Deviation::Matches { knob, value } => {
                write!(f, "knob `{knob}` (its bits match `{value}`)")
            }
            Deviation::MatchesNone { knob, closest } => {
                write!(
                    f,
                    "knob `{knob}` (its bits match no value; closest `{closest}`)"
                )
            }
        }
    }
}

impl fmt::Display for OpHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpHint::MatchesExcept {
                op,
                recipes,
                deviations,
                reproduced,
            } => {
                let except = deviations
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ");
                write!(
                    f,
                    "fingerprint of `{op}`: the kernel matches recipe {} except {except}",
                    quoted(recipes)
                )?;
                match reproduced {
                    Some(true) => write!(
                        f,
                        "; with those values the model reproduces every element on fresh inputs"
                    ),
                    Some(false) => write!(
                        f,
                        "; with those values some elements still differ on fresh inputs"
                    ),
                    None => Ok(()),
                }
            }
            OpHint::MatchesEveryKnob { op, recipes, knobs } => write!(
                f,
                "fingerprint of `{op}`: the kernel matches recipe {} on all {knobs} knob(s) \
                 these shapes discriminate: the failure lies outside the model's knobs",
                quoted(recipes)
            ),
            OpHint::NotFingerprinted { op, reason } => {
                write!(f, "fingerprint of `{op}`: not fingerprinted ({reason})")
            }
        }
    }
}

/// The ops with a failed case one of whose failed checks is bit-exact (`bitwise`): the ops
/// whose kernel a fingerprint can place against the model.
pub fn ops_failing_bit_exact(results: &RunResults) -> BTreeSet<String> {
    results
        .cases
        .iter()
        .filter(|c| c.status == Status::Failed)
        .filter(|c| {
            c.metrics
                .values()
                .any(|m| !m.passed && m.policy.starts_with("bitwise"))
        })
        .map(|c| c.op.clone())
        .collect()
}

/// One hint per op of `ops`, from a fingerprint over (at least) their cases.
pub fn hints(fp: &Fingerprint, ops: &BTreeSet<String>) -> Vec<OpHint> {
    ops.iter().map(|op| hint(fp, op)).collect()
}

fn hint(fp: &Fingerprint, op: &str) -> OpHint {
    let notes: Vec<_> = fp.cases.iter().filter(|c| c.op == op).collect();
    let fingerprinted: BTreeSet<&str> = notes
        .iter()
        .filter(|c| matches!(c.outcome, CaseOutcome::Fingerprinted { .. }))
        .map(|c| c.case.as_str())
        .collect();
    if fingerprinted.is_empty() {
        let reason = notes
            .iter()
            .find_map(|c| match &c.outcome {
                CaseOutcome::Skipped { reason } => Some(reason.clone()),
                CaseOutcome::Fingerprinted { .. } => None,
            })
            .unwrap_or_else(|| "no quick case of the op was selected".to_string());
        return OpHint::NotFingerprinted {
            op: op.to_string(),
            reason,
        };
    }
    let recipes: Vec<String> = notes
        .iter()
        .filter(|c| fingerprinted.contains(c.case.as_str()))
        .map(|c| c.recipe.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let knobs: Vec<_> = fp
        .knobs
        .iter()
        .filter(|k| k.cases.iter().any(|c| fingerprinted.contains(c.as_str())))
        .collect();
    let deviations: Vec<Deviation> = knobs
        .iter()
        .filter_map(|k| match &k.verdict {
            KnobVerdict::Matches {
                value,
                claimed: false,
                ..
            } => Some(Deviation::Matches {
                knob: k.knob.clone(),
                value: value.clone(),
            }),
            KnobVerdict::MatchesNone { closest, .. } => Some(Deviation::MatchesNone {
                knob: k.knob.clone(),
                closest: closest.clone(),
            }),
            _ => None,
        })
        .collect();
    if deviations.is_empty() {
        return OpHint::MatchesEveryKnob {
            op: op.to_string(),
            recipes,
            knobs: knobs
                .iter()
                .filter(|k| !matches!(k.verdict, KnobVerdict::NotDiscriminated))
                .count(),
        };
    }
    let reproduced = match &fp.recheck.outcome {
        RecheckOutcome::Reproduced { .. } => Some(true),
        RecheckOutcome::Differs { .. } => Some(false),
        RecheckOutcome::NotRun { .. } => None,
    };
    OpHint::MatchesExcept {
        op: op.to_string(),
        recipes,
        deviations,
        reproduced,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conform_metadata::fingerprint::{
        CaseNote, Fingerprint, KnobFingerprint, Recheck, FORMAT, NAN_RULE,
    };

    fn note(case: &str, op: &str, fingerprinted: bool) -> CaseNote {
        CaseNote {
            case: case.to_string(),
            op: op.to_string(),
            recipe: "ascend_a2".to_string(),
            target_declares_recipe: true,
            outcome: if fingerprinted {
                CaseOutcome::Fingerprinted {
                    preset: "a2".to_string(),
                    alternatives: 2,
                }
            } else {
                CaseOutcome::Skipped {
                    reason: "the target does not support it".to_string(),
                }
            },
        }
    }

    fn knob(id: &str, case: &str, verdict: KnobVerdict) -> KnobFingerprint {
        KnobFingerprint {
            knob: id.to_string(),
            claimed: "a".to_string(),
            ledger_status: None,
            verdict,
            witness_elements: 3,
            cases: vec![case.to_string()],
            candidates: Vec::new(),
            witnesses: Vec::new(),
        }
    }

    fn fp(
        cases: Vec<CaseNote>,
        knobs: Vec<KnobFingerprint>,
        outcome: RecheckOutcome,
    ) -> Fingerprint {
        Fingerprint {
            format: FORMAT.to_string(),
            target: "t".to_string(),
            selection: "--op x".to_string(),
            seed: 1,
            nan_rule: NAN_RULE.to_string(),
            cases,
            knobs,
            unmapped_faults: Vec::new(),
            recheck: Recheck {
                seed: 2,
                combination: Vec::new(),
                outcome,
            },
        }
    }

    fn matches(value: &str, claimed: bool) -> KnobVerdict {
        KnobVerdict::Matches {
            value: value.to_string(),
            claimed,
            indistinguishable_from: Vec::new(),
            given: None,
        }
    }

    #[test]
    fn a_knob_off_its_claim_is_named_with_the_value_its_bits_match() {
        let f = fp(
            vec![note("q/1", "qmm", true), note("f/1", "fa", true)],
            vec![
                knob("qmm.a2.order", "q/1", matches("b", false)),
                knob("qmm.a2.round", "q/1", matches("a", true)),
                knob("fa.p.round", "f/1", matches("x", false)),
            ],
            RecheckOutcome::Reproduced {
                cases: 2,
                elements: 10,
            },
        );
        let h = hints(&f, &BTreeSet::from(["qmm".to_string()]));
        assert_eq!(
            h,
            vec![OpHint::MatchesExcept {
                op: "qmm".to_string(),
                recipes: vec!["ascend_a2".to_string()],
                deviations: vec![Deviation::Matches {
                    knob: "qmm.a2.order".to_string(),
                    value: "b".to_string()
                }],
                reproduced: Some(true),
            }]
        );
        let text = h[0].to_string();
        assert!(
            text.contains(
                "matches recipe `ascend_a2` except knob `qmm.a2.order` (its bits match `b`)"
            ),
            "{text}"
        );
        assert!(!text.contains("fa.p.round"), "{text}");
    }

    #[test]
    fn every_claimed_knob_matching_says_the_failure_is_outside_the_model() {
        let f = fp(
            vec![note("q/1", "qmm", true)],
            vec![
                knob("qmm.a2.order", "q/1", matches("a", true)),
                knob("qmm.a2.round", "q/1", KnobVerdict::NotDiscriminated),
            ],
            RecheckOutcome::Reproduced {
                cases: 1,
                elements: 4,
            },
        );
        let h = hint(&f, "qmm");
        assert_eq!(
            h,
            OpHint::MatchesEveryKnob {
                op: "qmm".to_string(),
                recipes: vec!["ascend_a2".to_string()],
                knobs: 1
            }
        );
        assert!(h.to_string().contains("outside the model's knobs"));
    }

    #[test]
    fn a_knob_matching_no_value_and_an_unfingerprinted_op_are_said() {
        let f = fp(
            vec![note("q/1", "qmm", true), note("d/1", "dq", false)],
            vec![knob(
                "qmm.a2.order",
                "q/1",
                KnobVerdict::MatchesNone {
                    closest: "b".to_string(),
                    agreeing: 1,
                    of: 3,
                    max_ulp: Some(2),
                },
            )],
            RecheckOutcome::Differs {
                case: "q/1".to_string(),
                output: "y".to_string(),
                differing: 1,
                of: 4,
                element: 0,
                target: "0x1".to_string(),
                expected: "0x2".to_string(),
            },
        );
        let h = hints(&f, &BTreeSet::from(["qmm".to_string(), "dq".to_string()]));
        assert_eq!(
            h[0],
            OpHint::NotFingerprinted {
                op: "dq".to_string(),
                reason: "the target does not support it".to_string()
            }
        );
        let text = h[1].to_string();
        assert!(text.contains("match no value; closest `b`"), "{text}");
        assert!(text.contains("still differ on fresh inputs"), "{text}");
    }
}
