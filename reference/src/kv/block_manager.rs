//! The block manager: which physical blocks of a paged KV cache each sequence owns.
//!
//! It holds no K/V data. It hands out slots (`block * block_size + offset`) for the tokens a
//! caller appends, and block copies the caller applies before writing them
//! ([`copy_blocks()`](super::copy_blocks()), then [`scatter()`](super::scatter())).
//! Semantics (docs/kv-cache.md has the long form):
//!
//! - **Blocks and reference counts.** Every block is either free (reference count 0, in the free
//!   queue) or owned by `refcount` sequences (each lists it once in its block table).
//! - **Allocate** creates a sequence from a prompt. With prefix caching, the prompt's leading
//!   full blocks that the [`PrefixIndex`] already holds are reused (their K/V need not be
//!   computed); the hit stops before the block holding the last prompt token, so at least one
//!   token is always computed (vLLM v1 does the same to produce logits).
//! - **Append** adds tokens; a new block is taken from the free queue whenever the last block is
//!   full.
//! - **Fork** creates a sequence sharing every block of its parent (beam search, parallel
//!   sampling); reference counts go up by one.
//! - **Copy-on-write.** Appending to a sequence whose last block is partially filled and shared
//!   first moves the sequence to a fresh copy of that block and returns the copy instruction
//!   (`src -> dst`). Full blocks are never written again, so they stay shared.
//! - **Free** drops a sequence; the blocks whose count reaches 0 return to the free queue (and
//!   are returned to the caller): exactly the blocks no other sequence shares.
//! - **Prefix caching and eviction.** Whenever a block becomes full it is entered in the prefix
//!   index. A freed block keeps its cached content until it is reused: the free queue is
//!   least-recently-freed first, and a sequence's blocks enter it last block first, so the tail
//!   of a prefix is evicted before its head. A prefix hit on a free cached block takes it back
//!   out of the queue. Taking a block from the queue for new data evicts it from the index.
//!
//! Every failing operation returns a typed error and leaves the manager unchanged.

use super::block_table::BlockTable;
use super::prefix_index::{PrefixId, PrefixIndex, ROOT};
use std::collections::BTreeMap;
use thiserror::Error;

pub use super::ids::{BlockId, SeqId, TokenId};

/// Whether full blocks are cached for reuse by identical prefixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefixCaching {
    Enabled,
    Disabled,
}

/// Copy block `src` to block `dst` (every slot, head and element) before writing new tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockCopy {
    pub src: BlockId,
    pub dst: BlockId,
}

/// What [`BlockManager::allocate`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// Leading prompt tokens whose K/V are already in reused blocks (a multiple of
    /// `block_size`, below the prompt length).
    pub num_cached_tokens: usize,
    /// Slots of prompt tokens `num_cached_tokens..`: write their K/V there.
    pub slots: Vec<i64>,
}

/// What [`BlockManager::append`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendOutcome {
    /// Block copies to apply first (at most one: the copy-on-write of a shared last block).
    pub copies: Vec<BlockCopy>,
    /// Slots of the appended tokens, in order.
    pub slots: Vec<i64>,
}

/// Block manager errors.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BlockError {
    #[error("block manager: {name} must be positive")]
    ZeroDimension { name: &'static str },
    #[error(
        "block manager: num_blocks {num_blocks} with block_size {block_size} exceeds int32 \
         block ids or int64 slots"
    )]
    TooLarge {
        num_blocks: usize,
        block_size: usize,
    },
    #[error("block manager: sequence {seq} needs {needed} free blocks, only {free} are free")]
    OutOfBlocks {
        seq: SeqId,
        needed: usize,
        free: usize,
    },
    #[error("block manager: unknown sequence {0}")]
    UnknownSequence(SeqId),
    #[error("block manager: sequence {0} already exists")]
    SequenceExists(SeqId),
    #[error("block manager: position {pos} is past the {len} tokens of sequence {seq}")]
    PositionOutOfRange { seq: SeqId, pos: usize, len: usize },
    #[error(
        "block manager: sequence {seq} has {blocks} blocks, more than the block table's \
         max_blocks {max_blocks}"
    )]
    BlockTableTooNarrow {
        seq: SeqId,
        blocks: usize,
        max_blocks: usize,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Sequence {
    tokens: Vec<TokenId>,
    blocks: Vec<BlockId>,
    /// The cached prefix of each full block (prefix caching only).
    prefixes: Vec<PrefixId>,
}

/// Allocation state of a paged KV cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockManager {
    block_size: usize,
    refcount: Vec<u32>,
    /// The free queue: free-stamp -> block; the smallest stamp is reused first.
    free_queue: BTreeMap<u64, BlockId>,
    /// `Some(stamp)` iff the block is in the free queue.
    free_stamp: Vec<Option<u64>>,
    next_stamp: u64,
    seqs: BTreeMap<SeqId, Sequence>,
    index: Option<PrefixIndex>,
}

impl BlockManager {
    /// A manager of `num_blocks` free blocks of `block_size` slots; the free queue starts in
    /// block order (block 0 is used first).
    pub fn new(
        num_blocks: usize,
        block_size: usize,
        caching: PrefixCaching,
    ) -> Result<BlockManager, BlockError> {
        if num_blocks == 0 {
            return Err(BlockError::ZeroDimension { name: "num_blocks" });
        }
        if block_size == 0 {
            return Err(BlockError::ZeroDimension { name: "block_size" });
        }
        let slots_fit = (num_blocks as u128) * (block_size as u128) <= i64::MAX as u128;
        if num_blocks > i32::MAX as usize || !slots_fit {
            return Err(BlockError::TooLarge {
                num_blocks,
                block_size,
            });
        }
        Ok(BlockManager {
            block_size,
            refcount: vec![0; num_blocks],
            free_queue: (0..num_blocks).map(|b| (b as u64, b as BlockId)).collect(),
            free_stamp: (0..num_blocks).map(|b| Some(b as u64)).collect(),
            next_stamp: num_blocks as u64,
            seqs: BTreeMap::new(),
            index: match caching {
                PrefixCaching::Enabled => Some(PrefixIndex::new(num_blocks)),
                PrefixCaching::Disabled => None,
            },
        })
    }

    /// Slots per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Number of physical blocks.
    pub fn num_blocks(&self) -> usize {
        self.refcount.len()
    }

    /// Number of free blocks (cached or not).
    pub fn num_free_blocks(&self) -> usize {
        self.free_queue.len()
    }

    /// The free blocks in the order they will be reused.
    pub fn free_blocks(&self) -> Vec<BlockId> {
        self.free_queue.values().copied().collect()
    }

    /// Whether `block` is in the free queue.
    pub fn is_free(&self, block: BlockId) -> bool {
        matches!(self.free_stamp.get(block as usize), Some(Some(_)))
    }

    /// How many sequences own `block` (`None` past the last block).
    pub fn refcount(&self, block: BlockId) -> Option<u32> {
        self.refcount.get(block as usize).copied()
    }

    /// The prefix index (`None` when prefix caching is disabled).
    pub fn prefix_index(&self) -> Option<&PrefixIndex> {
        self.index.as_ref()
    }

    /// The live sequences, in increasing id order.
    pub fn sequences(&self) -> impl Iterator<Item = SeqId> + '_ {
        self.seqs.keys().copied()
    }

    /// The blocks of `seq` in logical order.
    pub fn blocks(&self, seq: SeqId) -> Result<&[BlockId], BlockError> {
        Ok(&self.seq(seq)?.blocks)
    }

    /// The tokens of `seq`.
    pub fn tokens(&self, seq: SeqId) -> Result<&[TokenId], BlockError> {
        Ok(&self.seq(seq)?.tokens)
    }

    /// The number of tokens of `seq`.
    pub fn seq_len(&self, seq: SeqId) -> Result<usize, BlockError> {
        Ok(self.seq(seq)?.tokens.len())
    }

    /// The slot of token `pos` of `seq`.
    pub fn slot(&self, seq: SeqId, pos: usize) -> Result<i64, BlockError> {
        let s = self.seq(seq)?;
        if pos >= s.tokens.len() {
            return Err(BlockError::PositionOutOfRange {
                seq,
                pos,
                len: s.tokens.len(),
            });
        }
        Ok(self.slot_of(s.blocks[pos / self.block_size], pos))
    }

    /// The block tables of `seqs` as PagedAttention's int32 `[B, max_blocks]`; `max_blocks`
    /// defaults to the longest table; unused entries hold `pad` (see
    /// [`super::block_table::PAD_BLOCK`]).
    pub fn block_table(
        &self,
        seqs: &[SeqId],
        max_blocks: Option<usize>,
        pad: i32,
    ) -> Result<BlockTable, BlockError> {
        let rows = seqs
            .iter()
            .map(|&id| Ok((id, &self.seq(id)?.blocks)))
            .collect::<Result<Vec<_>, BlockError>>()?;
        let widest = rows.iter().map(|(_, b)| b.len()).max().unwrap_or(0);
        let max_blocks = max_blocks.unwrap_or(widest);
        let mut entries = Vec::with_capacity(rows.len() * max_blocks);
        for (seq, blocks) in rows {
            if blocks.len() > max_blocks {
                return Err(BlockError::BlockTableTooNarrow {
                    seq,
                    blocks: blocks.len(),
                    max_blocks,
                });
            }
            entries.extend(blocks.iter().map(|&b| b as i32));
            entries.extend(std::iter::repeat_n(pad, max_blocks - blocks.len()));
        }
        Ok(BlockTable {
            batch: seqs.len(),
            max_blocks,
            pad,
            entries,
        })
    }

    /// The lengths of `seqs` (`actual_seq_lengths_kv`).
    pub fn seq_lens(&self, seqs: &[SeqId]) -> Result<Vec<i64>, BlockError> {
        seqs.iter()
            .map(|&id| Ok(self.seq(id)?.tokens.len() as i64))
            .collect()
    }

    /// Creates sequence `seq` holding `prompt`, reusing cached blocks of its prefix.
    pub fn allocate(&mut self, seq: SeqId, prompt: &[TokenId]) -> Result<Allocation, BlockError> {
        if self.seqs.contains_key(&seq) {
            return Err(BlockError::SequenceExists(seq));
        }
        let hits = self.prefix_hits(prompt);
        let free_hits = hits.iter().filter(|&&(b, _)| self.is_free(b)).count();
        let total = prompt.len().div_ceil(self.block_size);
        let needed = total - hits.len() + free_hits;
        if needed > self.free_queue.len() {
            return Err(BlockError::OutOfBlocks {
                seq,
                needed,
                free: self.free_queue.len(),
            });
        }
        let mut s = Sequence {
            tokens: Vec::with_capacity(prompt.len()),
            blocks: Vec::with_capacity(total),
            prefixes: Vec::new(),
        };
        for &(block, prefix) in &hits {
            self.take_from_free_queue(block);
            self.refcount[block as usize] += 1;
            s.blocks.push(block);
            s.prefixes.push(prefix);
        }
        let num_cached_tokens = hits.len() * self.block_size;
        s.tokens.extend_from_slice(&prompt[..num_cached_tokens]);
        let slots = self.push_tokens(&mut s, &prompt[num_cached_tokens..]);
        self.seqs.insert(seq, s);
        Ok(Allocation {
            num_cached_tokens,
            slots,
        })
    }

    /// Appends `tokens` to `seq`; a shared, partially filled last block is copied first.
    pub fn append(&mut self, seq: SeqId, tokens: &[TokenId]) -> Result<AppendOutcome, BlockError> {
        let s = self.seq(seq)?;
        let mut outcome = AppendOutcome {
            copies: Vec::new(),
            slots: Vec::new(),
        };
        if tokens.is_empty() {
            return Ok(outcome);
        }
        let len = s.tokens.len();
        let cow = len % self.block_size != 0
            && s.blocks
                .last()
                .is_some_and(|&b| self.refcount[b as usize] > 1);
        let fresh = (len + tokens.len()).div_ceil(self.block_size) - len.div_ceil(self.block_size);
        let needed = fresh + usize::from(cow);
        if needed > self.free_queue.len() {
            return Err(BlockError::OutOfBlocks {
                seq,
                needed,
                free: self.free_queue.len(),
            });
        }
        let mut s = self
            .seqs
            .remove(&seq)
            .ok_or(BlockError::UnknownSequence(seq))?;
        if cow {
            let last = s.blocks.len() - 1;
            let src = s.blocks[last];
            let dst = self.pop_free();
            self.refcount[src as usize] -= 1;
            self.refcount[dst as usize] = 1;
            s.blocks[last] = dst;
            outcome.copies.push(BlockCopy { src, dst });
        }
        outcome.slots = self.push_tokens(&mut s, tokens);
        self.seqs.insert(seq, s);
        Ok(outcome)
    }

    /// Creates `child` sharing every block (and token) of `parent`.
    pub fn fork(&mut self, parent: SeqId, child: SeqId) -> Result<(), BlockError> {
        if self.seqs.contains_key(&child) {
            return Err(BlockError::SequenceExists(child));
        }
        let s = self.seq(parent)?.clone();
        for &b in &s.blocks {
            self.refcount[b as usize] += 1;
        }
        self.seqs.insert(child, s);
        Ok(())
    }

    /// Drops `seq`; returns the blocks that became free (the ones no other sequence shared), in
    /// the order they entered the free queue (last logical block first).
    pub fn free(&mut self, seq: SeqId) -> Result<Vec<BlockId>, BlockError> {
        let s = self
            .seqs
            .remove(&seq)
            .ok_or(BlockError::UnknownSequence(seq))?;
        let mut released = Vec::new();
        for &b in s.blocks.iter().rev() {
            self.refcount[b as usize] -= 1;
            if self.refcount[b as usize] == 0 {
                let stamp = self.next_stamp;
                self.next_stamp += 1;
                self.free_queue.insert(stamp, b);
                self.free_stamp[b as usize] = Some(stamp);
                released.push(b);
            }
        }
        Ok(released)
    }

    fn seq(&self, seq: SeqId) -> Result<&Sequence, BlockError> {
        self.seqs.get(&seq).ok_or(BlockError::UnknownSequence(seq))
    }

    fn slot_of(&self, block: BlockId, pos: usize) -> i64 {
        (block as usize * self.block_size + pos % self.block_size) as i64
    }

    /// The cached blocks of `prompt`'s leading full blocks, stopping before the block holding
    /// the last token: per prefix, the lowest-id block in use, else the lowest-id free one.
    fn prefix_hits(&self, prompt: &[TokenId]) -> Vec<(BlockId, PrefixId)> {
        let Some(index) = &self.index else {
            return Vec::new();
        };
        let eligible = prompt.len().saturating_sub(1) / self.block_size;
        let mut hits = Vec::new();
        let mut parent = ROOT;
        for chunk in prompt.chunks_exact(self.block_size).take(eligible) {
            let Some(prefix) = index.lookup(parent, chunk) else {
                break;
            };
            let chosen = index
                .blocks(prefix)
                .find(|&b| self.refcount[b as usize] > 0)
                .or_else(|| index.blocks(prefix).next());
            let Some(block) = chosen else {
                break;
            };
            hits.push((block, prefix));
            parent = prefix;
        }
        hits
    }

    /// Appends tokens to `s` (blocks already checked to suffice; no copy-on-write needed),
    /// caching every block that becomes full. Returns the tokens' slots.
    fn push_tokens(&mut self, s: &mut Sequence, tokens: &[TokenId]) -> Vec<i64> {
        let mut slots = Vec::with_capacity(tokens.len());
        for &t in tokens {
            let pos = s.tokens.len();
            if pos.is_multiple_of(self.block_size) {
                let b = self.pop_free();
                self.refcount[b as usize] = 1;
                s.blocks.push(b);
            }
            let block = s.blocks[pos / self.block_size];
            slots.push(self.slot_of(block, pos));
            s.tokens.push(t);
            if (pos + 1).is_multiple_of(self.block_size) {
                self.cache_full_block(s, pos / self.block_size);
            }
        }
        slots
    }

    /// Enters full block `i` of `s` in the prefix index.
    fn cache_full_block(&mut self, s: &mut Sequence, i: usize) {
        let Some(index) = &mut self.index else {
            return;
        };
        // Prefixes are recorded for every full block in order; a gap (impossible by
        // construction) would only disable caching for the rest of this sequence.
        if s.prefixes.len() != i {
            return;
        }
        let parent = if i == 0 { ROOT } else { s.prefixes[i - 1] };
        let tokens = &s.tokens[i * self.block_size..(i + 1) * self.block_size];
        if let Ok(prefix) = index.insert(parent, tokens, s.blocks[i]) {
            s.prefixes.push(prefix);
        }
    }

    /// Takes the least recently freed block for new data, evicting its cached content.
    fn pop_free(&mut self) -> BlockId {
        let (_, b) = self
            .free_queue
            .pop_first()
            .expect("callers check the free queue holds enough blocks");
        self.free_stamp[b as usize] = None;
        if let Some(index) = &mut self.index {
            index.remove_block(b);
        }
        b
    }

    /// Takes a cached block out of the free queue for a prefix hit (a no-op for a block in use).
    fn take_from_free_queue(&mut self, b: BlockId) {
        if let Some(stamp) = self.free_stamp[b as usize].take() {
            self.free_queue.remove(&stamp);
        }
    }
}
