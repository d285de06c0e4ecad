//! Typed errors of the cache data operations (scatter, gather, block copies, conversions).
//!
//! Every variant names the offending argument and value; none of these operations panics or
//! reads out of bounds on bad input, and none writes anything before all of its input is
//! validated.

use super::layout::KvLayoutError;
use thiserror::Error;

/// Bad input to a cache data operation.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum KvError {
    /// The layout does not fit the geometry, or a cache buffer has the wrong length.
    #[error(transparent)]
    Layout(#[from] KvLayoutError),
    /// A row buffer (`key`/`value` rows, the gather output, ...) has the wrong length.
    #[error("kv cache: `{name}` holds {actual} elements, expected {expected}")]
    WrongLength {
        name: &'static str,
        expected: usize,
        actual: usize,
    },
    /// A slot mapping entry addresses a slot past the cache's `num_blocks * block_size`.
    #[error(
        "kv cache: slot_mapping[{token}] = {slot} is out of range (the cache has {num_slots} slots)"
    )]
    SlotOutOfRange {
        token: usize,
        slot: i64,
        num_slots: usize,
    },
    /// Two tokens of one slot mapping write the same slot (the result would depend on the
    /// kernel's write order).
    #[error("kv cache: slot_mapping[{first}] and slot_mapping[{second}] both write slot {slot}")]
    DuplicateSlot {
        slot: i64,
        first: usize,
        second: usize,
    },
    /// A block table entry that must be read is negative or not below `num_blocks`.
    #[error(
        "kv cache: block_table[{index}] = {entry} is out of range (the cache has {num_blocks} blocks)"
    )]
    BlockTableEntryOutOfRange {
        index: usize,
        entry: i64,
        num_blocks: usize,
    },
    /// A sequence length that the block table cannot hold.
    #[error(
        "kv cache: seq_len {seq_len} exceeds the block table's capacity \
         ({table_len} blocks x block_size {block_size})"
    )]
    SeqLenBeyondCapacity {
        seq_len: i64,
        table_len: usize,
        block_size: usize,
    },
    /// A block copy names a block past the cache, or copies a block onto itself.
    #[error("kv cache: block copy {index} ({src} -> {dst}) is invalid: {reason}")]
    BadBlockCopy {
        index: usize,
        src: u32,
        dst: u32,
        reason: &'static str,
    },
    /// An error of one sequence of a batch.
    #[error("kv cache: sequence {seq}: {source}")]
    InSequence {
        seq: usize,
        #[source]
        source: Box<KvError>,
    },
}
