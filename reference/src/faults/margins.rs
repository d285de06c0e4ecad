//! The margin floor of each fault: how many output elements a kill must judge wrong before the
//! adequacy gate counts it. A kill by one or two elements rests on one tie or one outlier the
//! seed happened to hold, and the next seed may not; the floor makes the gate fail such a
//! kill instead of passing it by luck. A fault whose footprint is small by nature (it changes
//! one row's LSE, a few rounding ties of a format that has few) has a lower floor here, with
//! the reason.

use super::Fault;

/// The floor of every fault not listed in [`SMALLER_FLOORS`].
pub const DEFAULT_MARGIN_FLOOR: u64 = 8;

/// Faults whose every kill is by nature narrower than [`DEFAULT_MARGIN_FLOOR`]: (name, floor,
/// why).
pub const SMALLER_FLOORS: &[(&str, u64, &str)] = &[
    (
        "any-nan-in-largest-output",
        1,
        "it writes NaN into exactly one element by definition, and no check lets a NaN pass, so a kill by one element is certain on every seed, not luck",
    ),
    (
        "any-nondeterministic-last-ulp",
        1,
        "it moves one element by one ulp in one of two calls with the same inputs, by definition; the determinism check compares the two calls' bits, so a kill by that one element is certain on every seed, not luck",
    ),
    (
        "attn-lse-wrong-on-empty-rows",
        1,
        "it changes only the LSE of fully masked rows (one element per such row and head); the masked_rows_lse regime guarantees such a row on every seed, so the kill does not rest on a tie",
    ),
];

impl Fault {
    /// The fewest wrong output elements a kill of this fault must show to count for the gate.
    pub fn margin_floor(&self) -> u64 {
        SMALLER_FLOORS
            .iter()
            .find(|(n, _, _)| *n == self.name)
            .map_or(DEFAULT_MARGIN_FLOOR, |(_, f, _)| *f)
    }

    /// Why this fault's floor is below the default (None: it is not).
    pub fn margin_floor_reason(&self) -> Option<&'static str> {
        SMALLER_FLOORS
            .iter()
            .find(|(n, _, _)| *n == self.name)
            .map(|(_, _, why)| *why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_smaller_floor_names_a_fault_once_with_a_reason() {
        for (i, (name, floor, why)) in SMALLER_FLOORS.iter().enumerate() {
            let f = super::super::find(name).unwrap_or_else(|| panic!("no fault `{name}`"));
            assert!(*floor < DEFAULT_MARGIN_FLOOR, "{name}");
            assert_eq!(f.margin_floor(), *floor);
            assert!(why.len() > 40, "{name}: say why");
            assert!(SMALLER_FLOORS[i + 1..].iter().all(|(n, _, _)| n != name));
        }
        let other = super::super::find("attn-p-rounding-swapped").unwrap();
        assert_eq!(other.margin_floor(), DEFAULT_MARGIN_FLOOR);
        assert_eq!(other.margin_floor_reason(), None);
    }
}
