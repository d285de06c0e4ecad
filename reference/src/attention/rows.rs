//! Views of query/key/value rows and the per-(batch, head) work unit every algorithm reads.

use super::mask::BatchMask;

/// `len` rows of `dim` contiguous f32 values: row r is `data[base + r * stride..][..dim]`.
/// Constructors check that every row lies inside `data`, so [`Rows::row`] never reads out of
/// bounds.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a> {
    data: &'a [f32],
    base: usize,
    stride: usize,
    len: usize,
    dim: usize,
}

impl<'a> Rows<'a> {
    /// Rows inside `data`, or None when the last row would not fit.
    pub fn new(
        data: &'a [f32],
        base: usize,
        stride: usize,
        len: usize,
        dim: usize,
    ) -> Option<Rows<'a>> {
        if len > 0 {
            let last = (len - 1)
                .checked_mul(stride)?
                .checked_add(base)?
                .checked_add(dim)?;
            if last > data.len() {
                return None;
            }
        }
        Some(Rows {
            data,
            base,
            stride,
            len,
            dim,
        })
    }

    /// Densely packed rows (`stride == dim`).
    pub fn dense(data: &'a [f32], dim: usize) -> Rows<'a> {
        let len = data.len().checked_div(dim).unwrap_or(0);
        Rows {
            data,
            base: 0,
            stride: dim,
            len,
            dim,
        }
    }

    /// Row `r` (`r < len`).
    #[inline(always)]
    pub fn row(&self, r: usize) -> &'a [f32] {
        debug_assert!(r < self.len);
        let o = self.base + r * self.stride;
        &self.data[o..o + self.dim]
    }

    /// The backing slice, the offset of row 0 and the row stride (every row lies inside the
    /// slice: the constructors check it).
    pub fn raw(&self) -> (&'a [f32], usize, usize) {
        (self.data, self.base, self.stride)
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Values per row.
    pub fn dim(&self) -> usize {
        self.dim
    }
}

/// One (batch entry, query head): its query rows, the key/value rows of its KV head, its mask
/// and the f32 scale.
#[derive(Clone, Copy, Debug)]
pub struct HeadTask<'a> {
    /// The valid query rows (`mask.lq` of them).
    pub q: Rows<'a>,
    /// The valid keys and values (`mask.lk` of them).
    pub k: Rows<'a>,
    pub v: Rows<'a>,
    pub mask: BatchMask<'a>,
    pub scale: f32,
}

/// The unnormalised state of a set of rows after some KV tiles, or their final result.
#[derive(Clone, Debug, PartialEq)]
pub struct RowsResult {
    /// Normalised output rows (`rows * dim`), f32, before the output rounding.
    pub out: Vec<f32>,
    /// Natural-log LSE per row in the scaled domain (policy value for empty rows).
    pub lse: Vec<f32>,
    /// Row max in the scaled domain (`-inf` for rows without keys).
    pub max: Vec<f32>,
    /// Row sum of exp(s - max).
    pub sum: Vec<f32>,
    /// Whether the row saw at least one allowed key.
    pub has_key: Vec<bool>,
}
