//! A fingerprint against an earlier one (`conform fingerprint --since FILE`): the knobs whose
//! matched value changed. The nightly job keeps every night's fingerprint beside the perf
//! history and compares tonight's with the last one, so a kernel that starts rounding another
//! way (a new CANN release, a driver update) is reported as that change of arithmetic, knob by
//! knob, and not only as failing cases.

use super::text::verdict_words;
use conform_metadata::fingerprint::{Fingerprint, KnobFingerprint, KnobVerdict, FORMAT};
use std::fmt;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// An earlier fingerprint that cannot be read.
#[derive(Debug, Error)]
pub enum EarlierFingerprintError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a conform fingerprint: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("{}: format `{found}`, this conform reads `{FORMAT}`", path.display())]
    Format { path: PathBuf, found: String },
}

/// Reads a fingerprint written by `conform fingerprint --json` (within the results files'
/// size limit).
pub fn read(path: &Path) -> Result<Fingerprint, EarlierFingerprintError> {
    let text = crate::input_file::read_text(path, crate::input_file::Limit::RESULTS).map_err(
        |source| EarlierFingerprintError::Read {
            path: path.to_path_buf(),
            source,
        },
    )?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| EarlierFingerprintError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    match value.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(EarlierFingerprintError::Format {
                path: path.to_path_buf(),
                found: other.to_string(),
            })
        }
        None => {
            return Err(EarlierFingerprintError::Parse {
                path: path.to_path_buf(),
                message: "no `format` field".to_string(),
            })
        }
    }
    serde_json::from_value(value).map_err(|e| EarlierFingerprintError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// A knob whose bits matched one value in the earlier fingerprint and another now. Knobs that
/// either fingerprint could not discriminate, or that only one of them has, are not changes:
/// the shapes (or the selection) differ, not the arithmetic.
#[derive(Clone, Debug, PartialEq)]
pub struct KnobChange {
    pub knob: String,
    /// The earlier verdict, in words.
    pub before: String,
    /// Tonight's verdict, in words.
    pub after: String,
}

impl fmt::Display for KnobChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "  {}: was {}, now {}",
            self.knob, self.before, self.after
        )
    }
}

/// What the comparison found.
#[derive(Clone, Debug, PartialEq)]
pub enum Comparison {
    /// No knob discriminated by both changed its matched value.
    Unchanged { since: PathBuf, compared: usize },
    Changed {
        since: PathBuf,
        changes: Vec<KnobChange>,
    },
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Comparison::Unchanged { since, compared } => write!(
                f,
                "fingerprint unchanged since {} ({compared} knob(s) discriminated by both)",
                since.display()
            ),
            Comparison::Changed { since, changes } => {
                write!(
                    f,
                    "fingerprint changed since {}: {} knob(s) now match another value (the \
                     target's arithmetic changed, e.g. a new CANN release; the cases' own \
                     verdicts say whether it is still within their checks)",
                    since.display(),
                    changes.len()
                )?;
                for c in changes {
                    write!(f, "\n{c}")?;
                }
                Ok(())
            }
        }
    }
}

/// The value a discriminated knob's bits matched (`None`: not discriminated).
fn matched(k: &KnobFingerprint) -> Option<Option<&str>> {
    match &k.verdict {
        KnobVerdict::Matches { value, .. } => Some(Some(value.as_str())),
        KnobVerdict::MatchesNone { .. } => Some(None),
        KnobVerdict::NotDiscriminated => None,
    }
}

/// `now` against `before` (read from `since`).
pub fn compare(before: &Fingerprint, now: &Fingerprint, since: &Path) -> Comparison {
    let mut compared = 0;
    let mut changes = Vec::new();
    for k in &now.knobs {
        let Some(old) = before.knobs.iter().find(|o| o.knob == k.knob) else {
            continue;
        };
        let (Some(a), Some(b)) = (matched(old), matched(k)) else {
            continue;
        };
        compared += 1;
        if a != b {
            changes.push(KnobChange {
                knob: k.knob.clone(),
                before: verdict_words(old),
                after: verdict_words(k),
            });
        }
    }
    if changes.is_empty() {
        Comparison::Unchanged {
            since: since.to_path_buf(),
            compared,
        }
    } else {
        Comparison::Changed {
            since: since.to_path_buf(),
            changes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conform_metadata::fingerprint::{Recheck, RecheckOutcome, NAN_RULE};

    fn knob(id: &str, verdict: KnobVerdict) -> KnobFingerprint {
        KnobFingerprint {
            knob: id.to_string(),
            claimed: "a".to_string(),
            ledger_status: None,
            verdict,
            witness_elements: 2,
            cases: vec!["c".to_string()],
            candidates: Vec::new(),
            witnesses: Vec::new(),
        }
    }

    fn matches(v: &str) -> KnobVerdict {
        KnobVerdict::Matches {
            value: v.to_string(),
            claimed: v == "a",
            indistinguishable_from: Vec::new(),
            given: None,
        }
    }

    fn fp(knobs: Vec<KnobFingerprint>) -> Fingerprint {
        Fingerprint {
            format: FORMAT.to_string(),
            target: "t".to_string(),
            selection: "every suite".to_string(),
            seed: 1,
            nan_rule: NAN_RULE.to_string(),
            cases: Vec::new(),
            knobs,
            unmapped_faults: Vec::new(),
            recheck: Recheck {
                seed: 2,
                combination: Vec::new(),
                outcome: RecheckOutcome::NotRun {
                    reason: "test".to_string(),
                },
            },
        }
    }

    #[test]
    fn a_knob_matching_another_value_is_a_change_and_undiscriminated_ones_are_not() {
        let before = fp(vec![
            knob("k.order", matches("a")),
            knob("k.round", matches("a")),
            knob("k.scale", KnobVerdict::NotDiscriminated),
            knob("k.gone", matches("a")),
        ]);
        let now = fp(vec![
            knob("k.order", matches("b")),
            knob("k.round", matches("a")),
            knob("k.scale", matches("b")),
            knob("k.new", matches("b")),
        ]);
        let c = compare(&before, &now, Path::new("night1.json"));
        assert_eq!(
            c,
            Comparison::Changed {
                since: PathBuf::from("night1.json"),
                changes: vec![KnobChange {
                    knob: "k.order".to_string(),
                    before: "matches claim".to_string(),
                    after: "matches b".to_string(),
                }],
            }
        );
        let text = c.to_string();
        assert!(
            text.contains("fingerprint changed since night1.json: 1 knob(s)"),
            "{text}"
        );
        assert!(
            text.contains("k.order: was matches claim, now matches b"),
            "{text}"
        );
        let same = compare(&before, &before, Path::new("n.json"));
        assert_eq!(
            same,
            Comparison::Unchanged {
                since: PathBuf::from("n.json"),
                compared: 3
            }
        );
    }

    #[test]
    fn matching_none_is_a_value_of_its_own() {
        let before = fp(vec![knob("k.order", matches("a"))]);
        let now = fp(vec![knob(
            "k.order",
            KnobVerdict::MatchesNone {
                closest: "a".to_string(),
                agreeing: 1,
                of: 2,
                max_ulp: Some(1),
            },
        )]);
        assert!(matches!(
            compare(&before, &now, Path::new("x")),
            Comparison::Changed { .. }
        ));
    }

    #[test]
    fn an_earlier_file_that_is_no_fingerprint_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.json");
        std::fs::write(&p, br#"{"format": "conform-perf-v1"}"#).unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(
            e.contains("old.json") && e.contains("conform-perf-v1"),
            "{e}"
        );
        std::fs::write(&p, b"{not json").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("not a conform fingerprint"), "{e}");
        let good = fp(vec![knob("k.order", matches("a"))]);
        std::fs::write(&p, serde_json::to_vec(&good).unwrap()).unwrap();
        assert_eq!(read(&p).unwrap(), good);
        let e = read(&dir.path().join("missing.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.json"), "{e}");
    }
}
