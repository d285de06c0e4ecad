//! Exact conversions between cache layouts.
//!
//! Every layout is a bijection from (block, slot, head, d) onto the buffer (see
//! [`KvCacheLayout::offset`]), so a conversion is a permutation of elements: no value is
//! touched, and converting back gives the original buffer bit for bit.

use super::error::KvError;
use super::layout::{CacheGeometry, KvCacheLayout};

/// `src` (in layout `from`) rewritten in layout `to`.
///
/// Errors: either layout does not fit `g` (e.g. vLLM's key packing `x` does not divide
/// `head_dim`), or `src` has the wrong length ([`KvError::Layout`]).
pub fn convert<T: Copy>(
    from: KvCacheLayout,
    to: KvCacheLayout,
    g: &CacheGeometry,
    src: &[T],
) -> Result<Vec<T>, KvError> {
    from.validate_buffer(g, src.len())?;
    to.validate(g)?;
    let mut dst = src.to_vec();
    if from != to {
        permute(from, to, g, src, &mut dst);
    }
    Ok(dst)
}

/// [`convert`] into a caller's buffer, which must have the cache's length too. Nothing is
/// written on error.
pub fn convert_into<T: Copy>(
    from: KvCacheLayout,
    to: KvCacheLayout,
    g: &CacheGeometry,
    src: &[T],
    dst: &mut [T],
) -> Result<(), KvError> {
    from.validate_buffer(g, src.len())?;
    to.validate_buffer(g, dst.len())?;
    if from == to {
        dst.copy_from_slice(src);
    } else {
        permute(from, to, g, src, dst);
    }
    Ok(())
}

/// Moves every element; runs of `head_dim` contiguous in both layouts are copied as slices.
fn permute<T: Copy>(
    from: KvCacheLayout,
    to: KvCacheLayout,
    g: &CacheGeometry,
    src: &[T],
    dst: &mut [T],
) {
    let rows = from.rows_contiguous() && to.rows_contiguous();
    for block in 0..g.num_blocks {
        for head in 0..g.kv_heads {
            for slot in 0..g.block_size {
                if rows {
                    let s = from.offset(g, block, slot, head, 0);
                    let d = to.offset(g, block, slot, head, 0);
                    dst[d..d + g.head_dim].copy_from_slice(&src[s..s + g.head_dim]);
                } else {
                    for d in 0..g.head_dim {
                        dst[to.offset(g, block, slot, head, d)] =
                            src[from.offset(g, block, slot, head, d)];
                    }
                }
            }
        }
    }
}
