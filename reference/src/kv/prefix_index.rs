//! The prefix index: which cached blocks hold the K/V of an identical token prefix.
//!
//! vLLM's automatic prefix caching names a full block by a hash chained over the prefix,
//! `h_i = hash(h_{i-1}, tokens of block i)`, so two blocks match only if every token before and
//! in them matches. This index keeps the same chain but exactly, with no hash collisions: a
//! *prefix* is a node keyed by `(parent prefix, the block's tokens)`, compared in full; node ids
//! are never reused. The root ([`ROOT`]) is the empty prefix.
//!
//! A prefix may be held by several physical blocks (two sequences that computed the same block
//! before either was cached); every holder is listed. A block holds at most one prefix.
//!
//! Removing a prefix's last block removes the prefix and its whole subtree: no live sequence can
//! hold a block of a descendant without holding a block of the prefix itself (a sequence holds a
//! chain of prefixes from the root), so the subtree's blocks are all free, and they merely stop
//! being cached.

use super::ids::{BlockId, TokenId};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use thiserror::Error;

/// The id of a cached prefix (a node of the index). Ids are never reused.
pub type PrefixId = u64;

/// The empty prefix, parent of every first block.
pub const ROOT: PrefixId = 0;

/// Misuse of the index.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PrefixIndexError {
    #[error("prefix index: parent prefix {0} is not in the index")]
    UnknownParent(PrefixId),
    #[error("prefix index: block {block} already holds prefix {prefix}")]
    BlockAlreadyCached { block: BlockId, prefix: PrefixId },
    #[error("prefix index: block {block} is past the {num_blocks} blocks of the index")]
    BlockOutOfRange { block: BlockId, num_blocks: usize },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    parent: PrefixId,
    tokens: Box<[TokenId]>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    key: Key,
    blocks: BTreeSet<BlockId>,
    children: BTreeSet<PrefixId>,
}

/// Exact chained index of cached full blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixIndex {
    by_key: HashMap<Key, PrefixId>,
    nodes: BTreeMap<PrefixId, Node>,
    root_children: BTreeSet<PrefixId>,
    block_prefix: Vec<Option<PrefixId>>,
    next_id: PrefixId,
}

impl PrefixIndex {
    /// An empty index over blocks `0..num_blocks`.
    pub fn new(num_blocks: usize) -> PrefixIndex {
        PrefixIndex {
            by_key: HashMap::new(),
            nodes: BTreeMap::new(),
            root_children: BTreeSet::new(),
            block_prefix: vec![None; num_blocks],
            next_id: ROOT + 1,
        }
    }

    /// The prefix `parent` followed by `tokens`, if some block holds it.
    pub fn lookup(&self, parent: PrefixId, tokens: &[TokenId]) -> Option<PrefixId> {
        // The key owns its tokens; a lookup by borrowed tokens would need a custom Borrow
        // impl, and blocks are small.
        self.by_key
            .get(&Key {
                parent,
                tokens: tokens.into(),
            })
            .copied()
    }

    /// The blocks holding `prefix`, in increasing id order (empty for an unknown prefix).
    pub fn blocks(&self, prefix: PrefixId) -> impl Iterator<Item = BlockId> + '_ {
        self.nodes
            .get(&prefix)
            .into_iter()
            .flat_map(|n| n.blocks.iter().copied())
    }

    /// The prefix `block` holds, if it is cached.
    pub fn prefix_of(&self, block: BlockId) -> Option<PrefixId> {
        self.block_prefix.get(block as usize).copied().flatten()
    }

    /// The parent prefix and tokens of `prefix`.
    pub fn key_of(&self, prefix: PrefixId) -> Option<(PrefixId, &[TokenId])> {
        self.nodes
            .get(&prefix)
            .map(|n| (n.key.parent, &n.key.tokens[..]))
    }

    /// Number of prefixes in the index.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the index holds no prefix.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Number of cached blocks.
    pub fn cached_blocks(&self) -> usize {
        self.block_prefix.iter().filter(|p| p.is_some()).count()
    }

    /// Records that `block` holds `tokens` after the prefix `parent`; returns the prefix id
    /// (an existing one if another block already holds the same prefix).
    pub fn insert(
        &mut self,
        parent: PrefixId,
        tokens: &[TokenId],
        block: BlockId,
    ) -> Result<PrefixId, PrefixIndexError> {
        let num_blocks = self.block_prefix.len();
        match self.block_prefix.get(block as usize) {
            None => return Err(PrefixIndexError::BlockOutOfRange { block, num_blocks }),
            Some(Some(prefix)) => {
                return Err(PrefixIndexError::BlockAlreadyCached {
                    block,
                    prefix: *prefix,
                })
            }
            Some(None) => {}
        }
        if parent != ROOT && !self.nodes.contains_key(&parent) {
            return Err(PrefixIndexError::UnknownParent(parent));
        }
        let key = Key {
            parent,
            tokens: tokens.into(),
        };
        let id = match self.by_key.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.next_id;
                self.next_id += 1;
                self.by_key.insert(key.clone(), id);
                self.nodes.insert(
                    id,
                    Node {
                        key,
                        blocks: BTreeSet::new(),
                        children: BTreeSet::new(),
                    },
                );
                self.children_mut(parent).insert(id);
                id
            }
        };
        if let Some(node) = self.nodes.get_mut(&id) {
            node.blocks.insert(block);
        }
        self.block_prefix[block as usize] = Some(id);
        Ok(id)
    }

    /// Stops caching `block` (it is about to be overwritten). If its prefix has no other
    /// block left, the prefix and its subtree leave the index. Returns every block that stopped
    /// being cached (`block` first; empty if `block` was not cached).
    pub fn remove_block(&mut self, block: BlockId) -> Vec<BlockId> {
        let Some(prefix) = self.prefix_of(block) else {
            return Vec::new();
        };
        self.block_prefix[block as usize] = None;
        let mut uncached = vec![block];
        let now_empty = match self.nodes.get_mut(&prefix) {
            Some(node) => {
                node.blocks.remove(&block);
                node.blocks.is_empty()
            }
            None => false,
        };
        if now_empty {
            if let Some(parent) = self.nodes.get(&prefix).map(|n| n.key.parent) {
                self.children_mut(parent).remove(&prefix);
            }
            let mut stack = vec![prefix];
            while let Some(id) = stack.pop() {
                if let Some(node) = self.nodes.remove(&id) {
                    self.by_key.remove(&node.key);
                    for b in node.blocks {
                        self.block_prefix[b as usize] = None;
                        uncached.push(b);
                    }
                    stack.extend(node.children);
                }
            }
        }
        uncached
    }

    fn children_mut(&mut self, parent: PrefixId) -> &mut BTreeSet<PrefixId> {
        if parent == ROOT {
            return &mut self.root_children;
        }
        match self.nodes.get_mut(&parent) {
            Some(node) => &mut node.children,
            // Callers check the parent exists; an orphan would only be unreachable.
            None => &mut self.root_children,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chained_lookup_needs_the_same_parent() {
        let mut ix = PrefixIndex::new(4);
        let a = ix.insert(ROOT, &[1, 2], 0).unwrap();
        let b = ix.insert(a, &[3, 4], 1).unwrap();
        assert_eq!(ix.lookup(ROOT, &[1, 2]), Some(a));
        assert_eq!(ix.lookup(a, &[3, 4]), Some(b));
        assert_eq!(ix.lookup(ROOT, &[3, 4]), None);
        // A second holder of the same prefix joins the node.
        assert_eq!(ix.insert(ROOT, &[1, 2], 2), Ok(a));
        assert_eq!(ix.blocks(a).collect::<Vec<_>>(), vec![0, 2]);
        // Removing one holder keeps the prefix; removing the last drops the subtree.
        assert_eq!(ix.remove_block(0), vec![0]);
        assert_eq!(ix.lookup(a, &[3, 4]), Some(b));
        assert_eq!(ix.remove_block(2), vec![2, 1]);
        assert!(ix.is_empty());
        assert_eq!(ix.prefix_of(1), None);
        assert_eq!(
            ix.insert(b, &[5, 6], 3),
            Err(PrefixIndexError::UnknownParent(b))
        );
    }
}
