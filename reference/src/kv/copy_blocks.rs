//! Block copies: the data half of copy-on-write.
//!
//! When the block manager gives a sequence a private copy of a shared block it returns a
//! [`BlockCopy`]; applying it here (vLLM's `copy_blocks`) makes the cache match the new block
//! tables. In every layout the block is the outermost axis, so a block is one contiguous run of
//! `block_size * kv_heads * head_dim` elements and a copy is layout-independent.

use super::block_manager::BlockCopy;
use super::error::KvError;
use super::layout::{CacheGeometry, KvCacheLayout};

/// Applies `copies` in order: block `dst` becomes a bitwise copy of block `src`.
///
/// Errors: the cache does not fit `layout`/`g`; a copy names a block `>= num_blocks` or copies a
/// block onto itself ([`KvError::BadBlockCopy`], naming the copy's index). Nothing is written on
/// error.
pub fn copy_blocks<T: Copy>(
    layout: KvCacheLayout,
    g: &CacheGeometry,
    cache: &mut [T],
    copies: &[BlockCopy],
) -> Result<(), KvError> {
    layout.validate_buffer(g, cache.len())?;
    for (index, c) in copies.iter().enumerate() {
        let reason = if c.src as usize >= g.num_blocks {
            Some("src is not below num_blocks")
        } else if c.dst as usize >= g.num_blocks {
            Some("dst is not below num_blocks")
        } else if c.src == c.dst {
            Some("src equals dst")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(KvError::BadBlockCopy {
                index,
                src: c.src,
                dst: c.dst,
                reason,
            });
        }
    }
    let n = g.block_len();
    for c in copies {
        let (src, dst) = (c.src as usize * n, c.dst as usize * n);
        cache.copy_within(src..src + n, dst);
    }
    Ok(())
}
