//! Gather: assemble one sequence's contiguous K (or V) `[seq_len, kv_heads, head_dim]` from a
//! paged cache through its block table.
//!
//! Addressing as PagedAttention does it: token `t` lives in block `block_table[t / block_size]`
//! at offset `t % block_size`. Only the first `ceil(seq_len / block_size)` entries of the block
//! table are read and validated; later entries are padding and never looked at, and slots past
//! `seq_len` in the last block are never read.

use super::error::KvError;
use super::layout::{CacheGeometry, KvCacheLayout};

/// The contiguous `[seq_len, kv_heads, head_dim]` rows of one sequence.
///
/// Errors: the cache does not fit `layout`/`g` ([`KvError::Layout`]); `seq_len` exceeds
/// `block_table.len() * block_size` ([`KvError::SeqLenBeyondCapacity`]); a block table entry that
/// must be read is negative or `>= num_blocks` ([`KvError::BlockTableEntryOutOfRange`], naming its
/// index).
pub fn gather<T: Copy + Default>(
    layout: KvCacheLayout,
    g: &CacheGeometry,
    cache: &[T],
    block_table: &[i32],
    seq_len: usize,
) -> Result<Vec<T>, KvError> {
    check_block_table(layout, g, cache.len(), block_table, seq_len)?;
    let mut out = vec![T::default(); seq_len * g.row_len()];
    copy_rows(layout, g, cache, block_table, seq_len, &mut out);
    Ok(out)
}

/// [`gather`] into a caller's buffer of exactly `seq_len * kv_heads * head_dim` elements
/// ([`KvError::WrongLength`] naming `out` otherwise). Nothing is written on error.
pub fn gather_into<T: Copy>(
    layout: KvCacheLayout,
    g: &CacheGeometry,
    cache: &[T],
    block_table: &[i32],
    seq_len: usize,
    out: &mut [T],
) -> Result<(), KvError> {
    check_block_table(layout, g, cache.len(), block_table, seq_len)?;
    let expected = seq_len * g.row_len();
    if out.len() != expected {
        return Err(KvError::WrongLength {
            name: "out",
            expected,
            actual: out.len(),
        });
    }
    copy_rows(layout, g, cache, block_table, seq_len, out);
    Ok(())
}

/// [`gather`] for a batch: `block_tables` is the `[B, max_blocks]` int32 table (row-major) and
/// `seq_lens` its `B` lengths (`actual_seq_lengths_kv`). Errors of one sequence come wrapped in
/// [`KvError::InSequence`]; a table whose length is not `B * max_blocks` is
/// [`KvError::WrongLength`] naming `block_tables`.
pub fn gather_batch<T: Copy + Default>(
    layout: KvCacheLayout,
    g: &CacheGeometry,
    cache: &[T],
    block_tables: &[i32],
    max_blocks: usize,
    seq_lens: &[i64],
) -> Result<Vec<Vec<T>>, KvError> {
    let expected = seq_lens.len().saturating_mul(max_blocks);
    if block_tables.len() != expected {
        return Err(KvError::WrongLength {
            name: "block_tables",
            expected,
            actual: block_tables.len(),
        });
    }
    seq_lens
        .iter()
        .enumerate()
        .map(|(b, &len)| {
            let row = &block_tables[b * max_blocks..(b + 1) * max_blocks];
            let in_seq = |e: KvError| KvError::InSequence {
                seq: b,
                source: Box::new(e),
            };
            let len = usize::try_from(len).map_err(|_| {
                in_seq(KvError::SeqLenBeyondCapacity {
                    seq_len: len,
                    table_len: max_blocks,
                    block_size: g.block_size,
                })
            })?;
            gather(layout, g, cache, row, len).map_err(in_seq)
        })
        .collect()
}

/// Validates the cache, the capacity of the table and every block table entry `seq_len` needs.
pub fn check_block_table(
    layout: KvCacheLayout,
    g: &CacheGeometry,
    cache_len: usize,
    block_table: &[i32],
    seq_len: usize,
) -> Result<(), KvError> {
    layout.validate_buffer(g, cache_len)?;
    let capacity = block_table.len().saturating_mul(g.block_size);
    if seq_len > capacity {
        return Err(KvError::SeqLenBeyondCapacity {
            seq_len: i64::try_from(seq_len).unwrap_or(i64::MAX),
            table_len: block_table.len(),
            block_size: g.block_size,
        });
    }
    let used = seq_len.div_ceil(g.block_size);
    for (index, &entry) in block_table[..used].iter().enumerate() {
        if entry < 0 || entry as usize >= g.num_blocks {
            return Err(KvError::BlockTableEntryOutOfRange {
                index,
                entry: entry as i64,
                num_blocks: g.num_blocks,
            });
        }
    }
    Ok(())
}

/// Copies the rows once everything is validated.
fn copy_rows<T: Copy>(
    layout: KvCacheLayout,
    g: &CacheGeometry,
    cache: &[T],
    block_table: &[i32],
    seq_len: usize,
    out: &mut [T],
) {
    let row_len = g.row_len();
    let contiguous = layout.rows_contiguous();
    for t in 0..seq_len {
        let block = block_table[t / g.block_size] as usize;
        let offset = t % g.block_size;
        let row = &mut out[t * row_len..(t + 1) * row_len];
        for head in 0..g.kv_heads {
            let dst = &mut row[head * g.head_dim..(head + 1) * g.head_dim];
            if contiguous {
                let start = layout.offset(g, block, offset, head, 0);
                dst.copy_from_slice(&cache[start..start + g.head_dim]);
            } else {
                for (d, v) in dst.iter_mut().enumerate() {
                    *v = cache[layout.offset(g, block, offset, head, d)];
                }
            }
        }
    }
}
