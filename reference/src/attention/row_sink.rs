//! Writing finished rows into the output tensors from parallel tasks.
//!
//! Every (batch, query row, head) has its own `dim`-long range of the output and its own LSE
//! element ([`Geometry::out_offset`], [`Geometry::lse_index`] are one-to-one), and every row
//! belongs to exactly one task. So the tasks write their rows straight into the shared
//! buffers, with no per-task result buffer and no serial write-back; each write is bounds
//! checked.

use super::params::Geometry;
use super::rows::RowsResult;
use std::marker::PhantomData;

/// The output and LSE buffers, shared by the tasks of one call.
pub(crate) struct RowSink<'a> {
    out: *mut f32,
    out_len: usize,
    lse: *mut f32,
    lse_len: usize,
    _borrow: PhantomData<&'a mut [f32]>,
}

// SAFETY: the sink only writes through `write`, whose contract makes concurrent writes
// disjoint; the buffers outlive it (the borrow is held by `_borrow`).
unsafe impl Send for RowSink<'_> {}
unsafe impl Sync for RowSink<'_> {}

impl<'a> RowSink<'a> {
    pub(crate) fn new(out: &'a mut [f32], lse: &'a mut [f32]) -> RowSink<'a> {
        RowSink {
            out: out.as_mut_ptr(),
            out_len: out.len(),
            lse: lse.as_mut_ptr(),
            lse_len: lse.len(),
            _borrow: PhantomData,
        }
    }

    /// Writes rows `r0..r0 + res.lse.len()` of (batch `b`, head `h`): outputs (already rounded)
    /// and LSE.
    ///
    /// # Safety
    /// No other call may write a row of the same (b, h) and query positions concurrently
    /// (each task owns its rows).
    pub(crate) unsafe fn write(
        &self,
        g: &Geometry,
        b: usize,
        h: usize,
        r0: usize,
        res: &RowsResult,
    ) {
        let dim = g.head_dim;
        assert!(res.out.len() >= res.lse.len() * dim);
        for (r, i) in (r0..r0 + res.lse.len()).enumerate() {
            let o = g.out_offset(b, i, h);
            let l = g.lse_index(b, i, h);
            assert!(o + dim <= self.out_len && l < self.lse_len);
            // SAFETY: in bounds (checked just above); the range is this row's alone, and no
            // concurrent call writes it (the caller's contract).
            unsafe {
                std::ptr::copy_nonoverlapping(res.out.as_ptr().add(r * dim), self.out.add(o), dim);
                *self.lse.add(l) = res.lse[r];
            }
        }
    }
}
