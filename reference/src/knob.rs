//! A knob of conform's model of a CANN kernel: a recipe field (or a fixed claim) with the
//! stable dotted id of its row in the fidelity ledger (`docs/ascend.md`), and the way the ledger
//! names a rounding. The recipes below [`crate::fidelity`] name their knobs with these types;
//! the ledger side ([`crate::fidelity`]) collects them.

use crate::formats::{Rounding, RoundingMode};

/// One knob: its ledger id and the value the preset gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knob {
    pub id: String,
    pub value: String,
}

impl Knob {
    pub fn new(id: impl Into<String>, value: impl Into<String>) -> Knob {
        Knob {
            id: id.into(),
            value: value.into(),
        }
    }

    /// A claim fixed in the code rather than a recipe field: it has no value of its own, and
    /// its text is its ledger row's (docs/ascend.md), so no second copy can go stale.
    pub fn claim(id: impl Into<String>) -> Knob {
        Knob::new(id, "")
    }

    /// Whether this is a claim ([`Knob::claim`]) rather than a recipe field with a value.
    pub fn is_claim(&self) -> bool {
        self.value.is_empty()
    }
}

/// A rounding as the ledger names it.
pub fn rounding_name(r: &Rounding) -> String {
    let mode = match r.mode {
        RoundingMode::NearestTiesToEven => "RNE (CAST_RINT)",
        RoundingMode::NearestTiesAway => "RNA (CAST_ROUND)",
        RoundingMode::TowardZero => "toward zero (CAST_TRUNC)",
        RoundingMode::TowardPositive => "toward +inf (CAST_CEIL)",
        RoundingMode::TowardNegative => "toward -inf (CAST_FLOOR)",
        RoundingMode::ToOdd => "to odd",
    };
    if *r == Rounding::ieee(r.mode) {
        mode.to_string()
    } else {
        format!(
            "{mode}, {:?} / {:?} / {:?}",
            r.subnormals, r.nan, r.overflow
        )
    }
}
