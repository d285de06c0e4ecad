//! The ids the block manager and its prefix index share: below both, so neither file imports
//! the other's types back.

/// A physical block id (an index into the cache's block axis).
pub type BlockId = u32;
/// A sequence id chosen by the caller.
pub type SeqId = u64;
/// A token id.
pub type TokenId = u32;
