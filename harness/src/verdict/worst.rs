//! The worst elements of a comparison: a fixed-size, deterministically ordered top list.
//!
//! Order (worst first): unwritten elements, then elements that cannot be compared numerically
//! (NaN/Inf on either side), then by absolute error descending; ties by flat index ascending.
//! The order is total, so merging per-chunk lists in any grouping gives the same list.

/// How many worst elements a verdict reports.
pub const WORST_COUNT: usize = 10;

/// Severity class of a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Severity {
    Numeric = 0,
    NonComparable = 1,
    Unwritten = 2,
}

/// One candidate, before its index is formatted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Candidate {
    pub flat: usize,
    pub severity: Severity,
    /// |actual - golden| (0 unless numeric).
    pub abs_err: f64,
    pub actual: f64,
    pub golden: f64,
    /// |actual - golden| / (|golden| + 1e-7) (0 unless numeric).
    pub rel_err: f64,
    pub ulp: Option<u64>,
}

impl Candidate {
    /// Whether `self` ranks before (is worse than) `other`.
    #[inline]
    fn worse_than(&self, other: &Candidate) -> bool {
        if self.severity != other.severity {
            return self.severity > other.severity;
        }
        if self.abs_err != other.abs_err {
            return self.abs_err > other.abs_err;
        }
        self.flat < other.flat
    }
}

/// A top-[`WORST_COUNT`] list, worst first.
#[derive(Clone, Debug, Default)]
pub(crate) struct WorstList {
    items: Vec<Candidate>,
    /// A numeric candidate must have an error strictly above this to enter (elements are
    /// offered in increasing flat index within a chunk, so a tie never enters).
    floor: f64,
}

impl WorstList {
    pub fn new() -> WorstList {
        WorstList {
            items: Vec::with_capacity(WORST_COUNT + 1),
            floor: 0.0,
        }
    }

    /// The error a numeric element must exceed to be offered.
    #[inline(always)]
    pub fn floor(&self) -> f64 {
        self.floor
    }

    /// Offers a candidate; keeps the list sorted and at most [`WORST_COUNT`] long.
    pub fn offer(&mut self, c: Candidate) {
        if self.items.len() == WORST_COUNT && !c.worse_than(&self.items[WORST_COUNT - 1]) {
            return;
        }
        let pos = self
            .items
            .iter()
            .position(|x| c.worse_than(x))
            .unwrap_or(self.items.len());
        self.items.insert(pos, c);
        self.items.truncate(WORST_COUNT);
        if self.items.len() == WORST_COUNT {
            let last = &self.items[WORST_COUNT - 1];
            self.floor = match last.severity {
                Severity::Numeric => last.abs_err,
                _ => f64::INFINITY,
            };
        }
    }

    /// Merges another list (from a later or earlier chunk: the order is total).
    pub fn merge(&mut self, other: &WorstList) {
        for c in &other.items {
            self.offer(*c);
        }
    }

    /// The listed element of lowest flat index that cannot be compared numerically (NaN/Inf
    /// on either side, not the reference's own infinity matched).
    pub fn first_non_comparable(&self) -> Option<&Candidate> {
        self.items
            .iter()
            .filter(|c| c.severity == Severity::NonComparable)
            .min_by_key(|c| c.flat)
    }

    pub fn into_vec(self) -> Vec<Candidate> {
        self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(flat: usize, err: f64) -> Candidate {
        Candidate {
            flat,
            severity: Severity::Numeric,
            abs_err: err,
            actual: err,
            golden: 0.0,
            rel_err: 0.0,
            ulp: None,
        }
    }

    #[test]
    fn keeps_the_ten_largest_errors_worst_first_with_ties_by_index() {
        let mut w = WorstList::new();
        for i in 0..100 {
            w.offer(num(i, (i % 37) as f64));
        }
        let v = w.into_vec();
        assert_eq!(v.len(), WORST_COUNT);
        let got: Vec<(usize, f64)> = v.iter().map(|c| (c.flat, c.abs_err)).collect();
        assert_eq!(
            got,
            vec![
                (36, 36.0),
                (73, 36.0),
                (35, 35.0),
                (72, 35.0),
                (34, 34.0),
                (71, 34.0),
                (33, 33.0),
                (70, 33.0),
                (32, 32.0),
                (69, 32.0)
            ]
        );
    }

    #[test]
    fn unwritten_and_non_comparable_rank_above_any_error() {
        let mut w = WorstList::new();
        w.offer(num(0, 1e30));
        w.offer(Candidate {
            severity: Severity::NonComparable,
            ..num(5, 0.0)
        });
        w.offer(Candidate {
            severity: Severity::Unwritten,
            ..num(9, 0.0)
        });
        let v = w.into_vec();
        assert_eq!(v.iter().map(|c| c.flat).collect::<Vec<_>>(), vec![9, 5, 0]);
    }

    #[test]
    fn merging_chunk_lists_in_any_grouping_gives_the_same_list() {
        let cands: Vec<Candidate> = (0..500)
            .map(|i| num(i, ((i * 7919) % 101) as f64))
            .collect();
        let mut whole = WorstList::new();
        cands.iter().for_each(|c| whole.offer(*c));
        for chunk in [1, 7, 64, 499] {
            let mut merged = WorstList::new();
            for part in cands.chunks(chunk) {
                let mut l = WorstList::new();
                part.iter().for_each(|c| l.offer(*c));
                merged.merge(&l);
            }
            assert_eq!(merged.into_vec(), whole.clone().into_vec(), "chunk {chunk}");
        }
    }
}
