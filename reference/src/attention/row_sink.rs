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

// SAFETY: the sink is two pointers into buffers it borrows mutably (held by `_borrow`, so
// they outlive it) and only writes through `write`; moving it to another thread moves that
// exclusive borrow, as for `&mut [f32]`, which is Send.
unsafe impl Send for RowSink<'_> {}
// SAFETY: `&RowSink` gives no reads and only the `unsafe` `write`, whose contract makes
// concurrent writes disjoint (each task owns its rows), so sharing it between the worker
// threads cannot race.
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
            // SAFETY: the source rows r * dim..(r + 1) * dim lie in res.out (r < res.lse.len()
            // and res.out.len() >= res.lse.len() * dim, asserted above); the destination
            // o..o + dim and index l are in bounds of the borrowed buffers (asserted just
            // above), which `_borrow` keeps alive; the output row of (b, i, h) is its own
            // range in the layout, and no concurrent call writes it (the caller's contract).
            unsafe {
                std::ptr::copy_nonoverlapping(res.out.as_ptr().add(r * dim), self.out.add(o), dim);
                *self.lse.add(l) = res.lse[r];
            }
        }
    }
}
