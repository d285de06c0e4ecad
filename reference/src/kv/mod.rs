//! The paged KV cache: layouts, the block manager and its prefix index, and the data moves
//! (scatter = reshape-and-cache, gather, block copies, layout conversions).
//!
//! The data moves are generic over any `Copy` element and never convert a value, so a bf16 or
//! f16 cache held as `u16` bit patterns moves bitwise. docs/kv-cache.md describes the semantics.

pub mod block_manager;
pub mod block_table;
pub mod convert;
pub mod copy_blocks;
pub mod error;
pub mod gather;
pub mod ids;
pub mod layout;
pub mod prefix_index;
pub mod scatter;

pub use block_manager::{
    Allocation, AppendOutcome, BlockCopy, BlockError, BlockId, BlockManager, PrefixCaching, SeqId,
    TokenId,
};
pub use block_table::{BlockTable, PAD_BLOCK};
pub use convert::{convert, convert_into};
pub use copy_blocks::copy_blocks;
pub use error::KvError;
pub use gather::{check_block_table, gather, gather_batch, gather_into};
pub use layout::{CacheGeometry, KvCacheLayout, KvLayoutError};
pub use prefix_index::{PrefixId, PrefixIndex, PrefixIndexError, ROOT};
pub use scatter::scatter;
