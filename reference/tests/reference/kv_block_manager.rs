//! The block manager: a proptest state machine against a model, plus targeted cases.
//!
//! The state machine drives a real cache: every slot the manager hands out receives the row
//! `[token, position]` through `scatter`, every copy-on-write instruction is applied with
//! `copy_blocks`, and every sequence is read back through its block table with `gather_batch`.
//! So "logical token order preserved" is checked on data, including through prefix hits on
//! blocks that were freed and kept cached.

use conform_reference::kv::{
    copy_blocks, gather_batch, scatter, BlockCopy, BlockError, BlockId, BlockManager,
    CacheGeometry, KvCacheLayout, PrefixCaching, SeqId, PAD_BLOCK, ROOT,
};
use conform_reference::ops::ElemType;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// Prompts share prefixes of this sequence so that prefix hits happen often.
const BASE: [u32; 24] = [
    1, 2, 0, 2, 1, 1, 0, 2, 2, 1, 0, 0, 1, 2, 1, 0, 2, 2, 0, 1, 1, 2, 0, 1,
];

#[derive(Clone, Debug)]
enum Op {
    Allocate { base_len: usize, extra: Vec<u32> },
    Append { pick: usize, tokens: Vec<u32> },
    Fork { pick: usize },
    Free { pick: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..=BASE.len(), prop::collection::vec(0u32..3, 0..5))
            .prop_map(|(base_len, extra)| Op::Allocate { base_len, extra }),
        4 => (any::<usize>(), prop::collection::vec(0u32..3, 0..7))
            .prop_map(|(pick, tokens)| Op::Append { pick, tokens }),
        2 => any::<usize>().prop_map(|pick| Op::Fork { pick }),
        2 => any::<usize>().prop_map(|pick| Op::Free { pick }),
    ]
}

/// The manager, a cache it drives, and the model: each live sequence's tokens.
struct World {
    mgr: BlockManager,
    layout: KvCacheLayout,
    g: CacheGeometry,
    cache: Vec<u32>,
    model: BTreeMap<SeqId, Vec<u32>>,
    next_id: SeqId,
}

const POISON: u32 = u32::MAX;

impl World {
    fn new(num_blocks: usize, block_size: usize, layout: KvCacheLayout, caching: bool) -> World {
        let g = CacheGeometry {
            num_blocks,
            block_size,
            kv_heads: 1,
            head_dim: 2,
        };
        let caching = if caching {
            PrefixCaching::Enabled
        } else {
            PrefixCaching::Disabled
        };
        World {
            mgr: BlockManager::new(num_blocks, block_size, caching).unwrap(),
            layout,
            g,
            cache: vec![POISON; g.len()],
            model: BTreeMap::new(),
            next_id: 1,
        }
    }

    fn pick(&self, pick: usize) -> Option<SeqId> {
        if self.model.is_empty() {
            None
        } else {
            self.model.keys().nth(pick % self.model.len()).copied()
        }
    }

    /// Writes `[token, position]` rows for `tokens` starting at `first_pos` into `slots`.
    fn write(&mut self, tokens: &[u32], first_pos: usize, slots: &[i64]) {
        assert_eq!(tokens.len(), slots.len());
        let rows: Vec<u32> = tokens
            .iter()
            .enumerate()
            .flat_map(|(i, &t)| [t, (first_pos + i) as u32])
            .collect();
        assert_eq!(
            scatter(self.layout, &self.g, &mut self.cache, &rows, slots),
            Ok(tokens.len())
        );
    }

    fn owners(&self) -> Vec<u32> {
        let mut owners = vec![0u32; self.g.num_blocks];
        for seq in self.mgr.sequences() {
            let blocks = self.mgr.blocks(seq).unwrap();
            let distinct: BTreeSet<_> = blocks.iter().collect();
            assert_eq!(
                distinct.len(),
                blocks.len(),
                "seq {seq} lists a block twice"
            );
            for &b in blocks {
                owners[b as usize] += 1;
            }
        }
        owners
    }

    fn step(&mut self, op: &Op) {
        let bs = self.g.block_size;
        match op {
            Op::Allocate { base_len, extra } => {
                let id = self.next_id;
                self.next_id += 1;
                let prompt: Vec<u32> = BASE[..*base_len].iter().chain(extra).copied().collect();
                let before = self.mgr.clone();
                match self.mgr.allocate(id, &prompt) {
                    Ok(a) => {
                        assert_eq!(a.num_cached_tokens % bs, 0);
                        assert!(a.num_cached_tokens < prompt.len().max(1));
                        assert_eq!(a.slots.len(), prompt.len() - a.num_cached_tokens);
                        if self.mgr.prefix_index().is_none() {
                            assert_eq!(a.num_cached_tokens, 0);
                        }
                        self.write(
                            &prompt[a.num_cached_tokens..],
                            a.num_cached_tokens,
                            &a.slots,
                        );
                        self.model.insert(id, prompt);
                    }
                    Err(BlockError::OutOfBlocks { seq, needed, free }) => {
                        assert_eq!(seq, id);
                        assert_eq!(free, before.num_free_blocks());
                        assert!(needed > free && needed <= prompt.len().div_ceil(bs));
                        assert_eq!(self.mgr, before, "a failed allocate changed the manager");
                    }
                    Err(e) => panic!("unexpected {e}"),
                }
            }
            Op::Append { pick, tokens } => {
                let Some(seq) = self.pick(*pick) else {
                    let ghost = 1_000_000 + *pick as SeqId % 7;
                    assert_eq!(
                        self.mgr.append(ghost, tokens),
                        Err(BlockError::UnknownSequence(ghost))
                    );
                    return;
                };
                let before = self.mgr.clone();
                let len = self.model[&seq].len();
                let last = before.blocks(seq).unwrap().last().copied();
                let must_copy = !tokens.is_empty()
                    && !len.is_multiple_of(bs)
                    && last.is_some_and(|b| before.refcount(b).unwrap() > 1);
                match self.mgr.append(seq, tokens) {
                    Ok(out) => {
                        if must_copy {
                            assert_eq!(out.copies.len(), 1);
                            assert_eq!(Some(out.copies[0].src), last);
                            assert!(before.is_free(out.copies[0].dst));
                        } else {
                            assert!(out.copies.is_empty(), "needless copy {:?}", out.copies);
                        }
                        copy_blocks(self.layout, &self.g, &mut self.cache, &out.copies).unwrap();
                        self.write(tokens, len, &out.slots);
                        self.model.get_mut(&seq).unwrap().extend_from_slice(tokens);
                    }
                    Err(BlockError::OutOfBlocks { needed, free, .. }) => {
                        assert_eq!(free, before.num_free_blocks());
                        assert!(needed > free);
                        assert_eq!(self.mgr, before, "a failed append changed the manager");
                    }
                    Err(e) => panic!("unexpected {e}"),
                }
            }
            Op::Fork { pick } => {
                let child = self.next_id;
                self.next_id += 1;
                let Some(parent) = self.pick(*pick) else {
                    assert_eq!(
                        self.mgr.fork(999_999, child),
                        Err(BlockError::UnknownSequence(999_999))
                    );
                    return;
                };
                self.mgr.fork(parent, child).unwrap();
                let tokens = self.model[&parent].clone();
                self.model.insert(child, tokens);
            }
            Op::Free { pick } => {
                let Some(seq) = self.pick(*pick) else {
                    assert_eq!(self.mgr.free(77), Err(BlockError::UnknownSequence(77)));
                    return;
                };
                let unshared: BTreeSet<BlockId> = self
                    .mgr
                    .blocks(seq)
                    .unwrap()
                    .iter()
                    .copied()
                    .filter(|&b| self.mgr.refcount(b) == Some(1))
                    .collect();
                let released = self.mgr.free(seq).unwrap();
                let released_set: BTreeSet<BlockId> = released.iter().copied().collect();
                assert_eq!(released_set.len(), released.len());
                assert_eq!(released_set, unshared, "free returned the wrong blocks");
                self.model.remove(&seq);
            }
        }
    }

    fn check(&self) {
        let n = self.g.num_blocks;
        // Sequences: the manager's are the model's.
        let seqs: Vec<SeqId> = self.mgr.sequences().collect();
        assert_eq!(seqs, self.model.keys().copied().collect::<Vec<_>>());

        // Reference counts equal the number of owners; free <=> count 0.
        let owners = self.owners();
        for b in 0..n as BlockId {
            assert_eq!(self.mgr.refcount(b), Some(owners[b as usize]), "block {b}");
            assert_eq!(self.mgr.is_free(b), owners[b as usize] == 0, "block {b}");
        }
        let free = self.mgr.free_blocks();
        let free_set: BTreeSet<_> = free.iter().copied().collect();
        assert_eq!(free_set.len(), free.len(), "a block is queued twice");
        assert_eq!(free.len(), self.mgr.num_free_blocks());
        assert_eq!(free.len(), owners.iter().filter(|&&o| o == 0).count());
        assert!(free.iter().all(|&b| owners[b as usize] == 0));

        // Logical token order: read back through the block tables.
        for &seq in &seqs {
            let len = self.model[&seq].len();
            assert_eq!(self.mgr.tokens(seq).unwrap(), &self.model[&seq][..]);
            assert_eq!(
                self.mgr.blocks(seq).unwrap().len(),
                len.div_ceil(self.g.block_size)
            );
        }
        let table = self.mgr.block_table(&seqs, None, PAD_BLOCK).unwrap();
        let lens = self.mgr.seq_lens(&seqs).unwrap();
        let rows = gather_batch(
            self.layout,
            &self.g,
            &self.cache,
            &table.entries,
            table.max_blocks,
            &lens,
        )
        .unwrap();
        for (seq, row) in seqs.iter().zip(rows) {
            let expected: Vec<u32> = self.model[seq]
                .iter()
                .enumerate()
                .flat_map(|(p, &t)| [t, p as u32])
                .collect();
            assert_eq!(row, expected, "seq {seq} reads back wrong");
        }

        // Every cached block (in use or free) holds exactly the prefix the index says.
        if let Some(index) = self.mgr.prefix_index() {
            for b in 0..n as BlockId {
                let Some(prefix) = index.prefix_of(b) else {
                    continue;
                };
                assert!(index.blocks(prefix).any(|x| x == b));
                let mut chain = Vec::new();
                let mut p = prefix;
                while p != ROOT {
                    let (parent, tokens) = index.key_of(p).expect("a cached prefix's chain");
                    chain.push(tokens.to_vec());
                    p = parent;
                }
                let depth = chain.len() - 1;
                for (s, &t) in chain[0].iter().enumerate() {
                    let at = |d| self.cache[self.layout.offset(&self.g, b as usize, s, 0, d)];
                    assert_eq!(
                        [at(0), at(1)],
                        [t, (depth * self.g.block_size + s) as u32],
                        "cached block {b} slot {s} does not hold its prefix"
                    );
                }
            }
        }
    }
}

fn layout(i: usize) -> KvCacheLayout {
    [
        KvCacheLayout::BnBsH,
        KvCacheLayout::BnNBsD,
        KvCacheLayout::VllmKey { x: 2 },
        KvCacheLayout::VllmValue,
    ][i % 4]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn block_manager_state_machine_keeps_its_invariants(
        num_blocks in 3usize..16,
        block_size in 1usize..5,
        layout_i in 0usize..4,
        caching in any::<bool>(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        let mut w = World::new(num_blocks, block_size, layout(layout_i), caching);
        w.check();
        for op in &ops {
            w.step(op);
            w.check();
        }
        // Freeing everything returns every block.
        let seqs: Vec<SeqId> = w.model.keys().copied().collect();
        for seq in seqs {
            w.step(&Op::Free { pick: w.model.keys().position(|&s| s == seq).unwrap() });
            w.check();
        }
        prop_assert_eq!(w.mgr.num_free_blocks(), num_blocks);
    }
}

fn manager(num_blocks: usize, block_size: usize) -> BlockManager {
    BlockManager::new(num_blocks, block_size, PrefixCaching::Enabled).unwrap()
}

#[test]
fn prefix_cache_reuses_full_blocks_of_an_identical_prompt() {
    let mut m = manager(12, 4);
    let prompt: Vec<u32> = (0..10).collect();
    let a = m.allocate(1, &prompt).unwrap();
    assert_eq!(a.num_cached_tokens, 0);
    assert_eq!(a.slots, vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let b = m.allocate(2, &prompt).unwrap();
    assert_eq!(b.num_cached_tokens, 8);
    assert_eq!(m.blocks(2).unwrap()[..2], m.blocks(1).unwrap()[..2]);
    assert_ne!(m.blocks(2).unwrap()[2], m.blocks(1).unwrap()[2]);
    assert_eq!(b.slots, vec![12, 13]);
    assert_eq!(m.refcount(0), Some(2));
    assert_eq!(m.refcount(2), Some(1));
    // A prompt that differs in the second block reuses only the first.
    let mut other = prompt.clone();
    other[5] = 99;
    assert_eq!(m.allocate(3, &other).unwrap().num_cached_tokens, 4);
    // The same tokens at a different position are a different prefix.
    let shifted: Vec<u32> = (4..14).collect();
    assert_eq!(m.allocate(4, &shifted).unwrap().num_cached_tokens, 0);
}

#[test]
fn prefix_hit_never_covers_the_last_prompt_token() {
    let mut m = manager(8, 4);
    let prompt: Vec<u32> = (0..8).collect();
    m.allocate(1, &prompt).unwrap();
    let b = m.allocate(2, &prompt).unwrap();
    assert_eq!(
        b.num_cached_tokens, 4,
        "the block holding the last token is recomputed"
    );
    assert_eq!(b.slots.len(), 4);
    assert_eq!(m.allocate(3, &prompt[..1]).unwrap().num_cached_tokens, 0);
    assert_eq!(m.allocate(4, &[]).unwrap().num_cached_tokens, 0);
    assert_eq!(m.blocks(4).unwrap(), &[] as &[BlockId]);
}

#[test]
fn freed_blocks_stay_cached_until_the_free_queue_reuses_them_tail_first() {
    let mut m = manager(5, 2);
    let prompt = [7, 8, 9, 10, 11];
    m.allocate(1, &prompt).unwrap();
    assert_eq!(m.blocks(1).unwrap(), &[0, 1, 2]);
    // Freed last block first, after the never-used blocks 3 and 4.
    assert_eq!(m.free(1).unwrap(), vec![2, 1, 0]);
    assert_eq!(m.free_blocks(), vec![3, 4, 2, 1, 0]);
    // A hit takes cached free blocks back out of the queue.
    let again = m.allocate(2, &prompt).unwrap();
    assert_eq!(again.num_cached_tokens, 4);
    assert_eq!(m.blocks(2).unwrap(), &[0, 1, 3]);
    assert_eq!(m.free_blocks(), vec![4, 2]);
    assert_eq!(m.free(2).unwrap(), vec![3, 1, 0]);
    // Reusing blocks for other data evicts their cached prefix, least recently freed first:
    // the tail [9, 10] (block 1) goes before the head [7, 8] (block 0).
    m.allocate(3, &[1; 7]).unwrap();
    assert_eq!(m.blocks(3).unwrap(), &[4, 2, 3, 1]);
    let idx = m.prefix_index().unwrap();
    let head = idx.lookup(ROOT, &[7, 8]).unwrap();
    assert_eq!(idx.blocks(head).collect::<Vec<_>>(), vec![0]);
    assert_eq!(idx.lookup(head, &[9, 10]), None);
    m.free(3).unwrap();
    let after = m.allocate(4, &[7, 8, 9]).unwrap();
    assert_eq!(after.num_cached_tokens, 2, "block 0 still holds [7, 8]");
    assert_eq!(m.blocks(4).unwrap(), &[0, 1]);
}

#[test]
fn fork_shares_blocks_and_append_copies_the_shared_partial_block() {
    let mut m = manager(8, 4);
    m.allocate(1, &[0, 1, 2, 3, 4, 5]).unwrap();
    m.fork(1, 2).unwrap();
    assert_eq!(m.blocks(2).unwrap(), m.blocks(1).unwrap());
    assert_eq!(m.refcount(0), Some(2));
    assert_eq!(m.refcount(1), Some(2));
    let out = m.append(2, &[6, 7, 8]).unwrap();
    assert_eq!(out.copies, vec![BlockCopy { src: 1, dst: 2 }]);
    assert_eq!(out.slots, vec![2 * 4 + 2, 2 * 4 + 3, 3 * 4]);
    assert_eq!(m.blocks(1).unwrap(), &[0, 1]);
    assert_eq!(m.blocks(2).unwrap(), &[0, 2, 3]);
    assert_eq!(m.refcount(1), Some(1));
    // The parent's own block is no longer shared: no copy.
    assert_eq!(m.append(1, &[9]).unwrap().copies, vec![]);
    assert_eq!(m.free(2).unwrap(), vec![3, 2]);
    assert_eq!(m.free(1).unwrap(), vec![1, 0]);
}

#[test]
fn fork_at_a_block_boundary_needs_no_copy() {
    let mut m = manager(8, 4);
    m.allocate(1, &[0, 1, 2, 3]).unwrap();
    m.fork(1, 2).unwrap();
    let out = m.append(2, &[4]).unwrap();
    assert!(out.copies.is_empty());
    assert_eq!(m.blocks(2).unwrap(), &[0, 1]);
    assert_eq!(m.refcount(0), Some(2));
}

#[test]
fn out_of_blocks_is_a_typed_error_and_leaves_the_manager_unchanged() {
    let mut m = manager(3, 2);
    m.allocate(1, &[0, 1, 2]).unwrap();
    let before = m.clone();
    assert_eq!(
        m.allocate(2, &[5, 5, 5]),
        Err(BlockError::OutOfBlocks {
            seq: 2,
            needed: 2,
            free: 1
        })
    );
    assert_eq!(m, before);
    m.fork(1, 3).unwrap();
    let before = m.clone();
    // Copy-on-write of the shared partial block plus one new block.
    assert_eq!(
        m.append(3, &[3, 4]),
        Err(BlockError::OutOfBlocks {
            seq: 3,
            needed: 2,
            free: 1
        })
    );
    assert_eq!(m, before);
    assert!(m.append(3, &[3]).is_ok());
}

#[test]
fn unknown_and_existing_sequences_are_typed_errors() {
    let mut m = manager(4, 2);
    assert_eq!(m.append(5, &[1]), Err(BlockError::UnknownSequence(5)));
    assert_eq!(m.free(5), Err(BlockError::UnknownSequence(5)));
    assert_eq!(m.fork(5, 6), Err(BlockError::UnknownSequence(5)));
    assert_eq!(m.blocks(5), Err(BlockError::UnknownSequence(5)));
    assert_eq!(m.slot(5, 0), Err(BlockError::UnknownSequence(5)));
    m.allocate(1, &[1, 2, 3]).unwrap();
    assert_eq!(m.allocate(1, &[1]), Err(BlockError::SequenceExists(1)));
    m.allocate(2, &[]).unwrap();
    assert_eq!(m.fork(1, 2), Err(BlockError::SequenceExists(2)));
    assert_eq!(m.slot(1, 2), Ok(2));
    assert_eq!(
        m.slot(1, 3),
        Err(BlockError::PositionOutOfRange {
            seq: 1,
            pos: 3,
            len: 3
        })
    );
    assert_eq!(
        m.block_table(&[1, 9], None, PAD_BLOCK),
        Err(BlockError::UnknownSequence(9))
    );
}

#[test]
fn bad_manager_sizes_are_typed_errors() {
    assert_eq!(
        BlockManager::new(0, 16, PrefixCaching::Enabled),
        Err(BlockError::ZeroDimension { name: "num_blocks" })
    );
    assert_eq!(
        BlockManager::new(4, 0, PrefixCaching::Disabled),
        Err(BlockError::ZeroDimension { name: "block_size" })
    );
    assert!(matches!(
        BlockManager::new(i32::MAX as usize + 1, 1, PrefixCaching::Disabled),
        Err(BlockError::TooLarge { .. })
    ));
}

#[test]
fn block_table_exports_as_int32_batch_by_max_blocks_with_the_pad_value() {
    let mut m = manager(8, 2);
    m.allocate(1, &[1, 2, 3, 4, 5]).unwrap();
    m.allocate(2, &[9]).unwrap();
    m.allocate(3, &[]).unwrap();
    let t = m.block_table(&[1, 2, 3], None, PAD_BLOCK).unwrap();
    assert_eq!((t.batch, t.max_blocks, t.pad), (3, 3, -1));
    assert_eq!(t.entries, vec![0, 1, 2, 3, -1, -1, -1, -1, -1]);
    assert_eq!(t.row(1), Some(&[3, -1, -1][..]));
    assert_eq!(t.row(3), None);
    let tensor = conform_reference::ops::Tensor::block_table(&t);
    assert_eq!(tensor.dtype, ElemType::I32);
    assert_eq!(tensor.shape, vec![3, 3]);
    assert_eq!(
        tensor.to_i64_vec().unwrap(),
        vec![0, 1, 2, 3, -1, -1, -1, -1, -1]
    );
    let wide = m.block_table(&[2], Some(4), 0).unwrap();
    assert_eq!(wide.entries, vec![3, 0, 0, 0]);
    assert_eq!(m.seq_lens(&[1, 2, 3]).unwrap(), vec![5, 1, 0]);
    assert_eq!(
        m.block_table(&[1, 2], Some(2), PAD_BLOCK),
        Err(BlockError::BlockTableTooNarrow {
            seq: 1,
            blocks: 3,
            max_blocks: 2
        })
    );
}

#[test]
fn disabled_prefix_caching_never_reuses_blocks() {
    let mut m = BlockManager::new(8, 2, PrefixCaching::Disabled).unwrap();
    m.allocate(1, &[1, 2, 3, 4, 5]).unwrap();
    let b = m.allocate(2, &[1, 2, 3, 4, 5]).unwrap();
    assert_eq!(b.num_cached_tokens, 0);
    assert!(m.prefix_index().is_none());
    assert!(m
        .blocks(1)
        .unwrap()
        .iter()
        .all(|&b| m.refcount(b) == Some(1)));
}

#[test]
fn two_blocks_computed_for_one_prefix_are_both_cached() {
    let mut m = manager(8, 2);
    // Both sequences fill [4, 5] before either is cached: two holders of one prefix.
    m.allocate(1, &[4]).unwrap();
    m.allocate(2, &[4]).unwrap();
    m.append(1, &[5]).unwrap();
    m.append(2, &[5]).unwrap();
    let idx = m.prefix_index().unwrap();
    let p = idx.lookup(ROOT, &[4, 5]).unwrap();
    assert_eq!(idx.blocks(p).collect::<Vec<_>>(), vec![0, 1]);
    m.free(1).unwrap();
    // The hit prefers the holder still in use over the free one.
    let a = m.allocate(3, &[4, 5, 6]).unwrap();
    assert_eq!(a.num_cached_tokens, 2);
    assert_eq!(m.blocks(3).unwrap()[0], 1);
    assert!(m.is_free(0));
}
