//! Which keys a query row may attend to: the structured `sparse_mode` masks, the explicit
//! boolean mask (1 = masked) and the per-batch valid lengths, as one predicate.
//!
//! Alignments (docs/numerics.md, "Conventions"): sparse_mode 2 is top-left
//! (j <= i), sparse_mode 3 bottom-right (j <= i + Lk - Lq), and the band of sparse_mode 4 is
//! taken relative to the bottom-right diagonal: i + (Lk - Lq) - pre_tokens <= j <= i + (Lk -
//! Lq) + next_tokens. Keys at or beyond `actual_seq_lengths_kv` never count.

use super::params::{Geometry, SparseMode};

/// The mask of one batch entry.
#[derive(Clone, Copy, Debug)]
pub struct BatchMask<'a> {
    sparse: SparseMode,
    /// Valid query rows and keys of this batch entry.
    pub lq: usize,
    pub lk: usize,
    /// Explicit mask of this batch: `data[base + i * stride + j]`, nonzero = masked.
    explicit: Option<(&'a [u8], usize, usize)>,
}

impl<'a> BatchMask<'a> {
    /// The mask of batch entry `b`; `explicit` is the whole `[B, q_seq, kv_seq]` mask buffer
    /// (already size-checked by [`Geometry::check_inputs`]).
    pub fn new(g: &Geometry, b: usize, explicit: Option<&'a [u8]>) -> BatchMask<'a> {
        BatchMask {
            sparse: g.sparse,
            lq: g.lq[b],
            lk: g.lk[b],
            explicit: explicit.map(|m| (m, g.mask_offset(b, 0, 0), g.kv_seq)),
        }
    }

    /// A mask from its parts (for tests and the paged path).
    pub fn structured(sparse: SparseMode, lq: usize, lk: usize) -> BatchMask<'static> {
        BatchMask {
            sparse,
            lq,
            lk,
            explicit: None,
        }
    }

    /// The half-open key interval `[lo, hi)` the structured mask and `lk` allow for row `i`.
    #[inline]
    pub fn interval(&self, i: usize) -> (usize, usize) {
        let lk = self.lk as i64;
        let i = i as i64;
        let shift = lk - self.lq as i64;
        let (lo, hi) = match self.sparse {
            SparseMode::None => (0, lk),
            SparseMode::TopLeftCausal => (0, i + 1),
            SparseMode::BottomRightCausal => (0, i + shift + 1),
            SparseMode::Band {
                pre_tokens,
                next_tokens,
            } => (
                (i + shift).saturating_sub(pre_tokens),
                (i + shift).saturating_add(next_tokens).saturating_add(1),
            ),
        };
        let lo = lo.clamp(0, lk) as usize;
        let hi = hi.clamp(0, lk) as usize;
        (lo, hi.max(lo))
    }

    /// Whether row `i` may attend to key `j`.
    #[inline]
    pub fn allowed(&self, i: usize, j: usize) -> bool {
        let (lo, hi) = self.interval(i);
        if j < lo || j >= hi {
            return false;
        }
        match self.explicit {
            Some((m, base, stride)) => m[base + i * stride + j] == 0,
            None => true,
        }
    }

    /// Whether the explicit mask is present.
    pub fn has_explicit(&self) -> bool {
        self.explicit.is_some()
    }

    /// Whether row `i` may attend to at least one key.
    pub fn row_has_key(&self, i: usize) -> bool {
        self.block_has_key(i..i + 1, 0..self.lk)
    }

    /// Whether any row of `rows` may attend to any key of `keys`.
    pub fn block_has_key(
        &self,
        rows: std::ops::Range<usize>,
        keys: std::ops::Range<usize>,
    ) -> bool {
        rows.into_iter().any(|i| {
            let (lo, hi) = self.interval(i);
            let (a, z) = (lo.max(keys.start), hi.min(keys.end));
            if a >= z {
                return false;
            }
            match self.explicit {
                Some((m, base, stride)) => {
                    m[base + i * stride + a..base + i * stride + z].contains(&0)
                }
                None => true,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causal_alignments_match_the_conventions() {
        let tl = BatchMask::structured(SparseMode::TopLeftCausal, 2, 5);
        let br = BatchMask::structured(SparseMode::BottomRightCausal, 2, 5);
        assert_eq!(tl.interval(0), (0, 1));
        assert_eq!(br.interval(0), (0, 4));
        assert_eq!(br.interval(1), (0, 5));
        let band = BatchMask::structured(
            SparseMode::Band {
                pre_tokens: 1,
                next_tokens: 0,
            },
            3,
            3,
        );
        assert_eq!(band.interval(2), (1, 3));
        assert_eq!(band.interval(0), (0, 1));
        // Lq > Lk bottom-right: the first rows see nothing.
        let br2 = BatchMask::structured(SparseMode::BottomRightCausal, 4, 2);
        assert!(!br2.row_has_key(0) && !br2.row_has_key(1) && br2.row_has_key(2));
    }
}
