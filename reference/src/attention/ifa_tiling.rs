//! The run-time KV tiling of Ascend's incre (decode) flash attention kernel, as its host
//! tiling code chooses it (docs/ascend.md, rows `fa.ascend_ifa_bf16.kv_tile` and
//! `fa.ascend_ifa_bf16.split`, cite the source):
//!
//! - **Flash decode** (split-KV across cores) when batch x KV heads is below 0.4 x the vector
//!   cores, and either one query head per KV head or a longest context of at least 2048 keys;
//!   never under PagedAttention with a longest context of at most 1024 keys. The number of
//!   splits starts at `cores / (batch x KV heads)` and drops while a split would hold fewer
//!   than 512 keys of the longest context; each split holds `ceil(longest / splits)` keys,
//!   rounded up to whole cache blocks. A batch uses as many splits as its own length needs.
//! - **The KV tile** (sInner) inside a split (or over the whole context): 8192 keys, or
//!   8192 / 4096 / 2048 by query heads per KV head (below 5, below 10, more), aligned down to
//!   a multiple of the cache block size. A context shorter than the tile is one tile.
//!
//! Modelled: the kernel's general template (bf16/f16 K/V, no rope, no antiquant, no shared
//! prefix, one query row). The CUBE_VIEW_MM template that the kernel picks for head_dim 128
//! paged BNSD caches with many (batch, head, 2048-key) units is assumed to tile the same way.

/// The problem facts the tiling depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfaShape {
    pub batch: usize,
    pub kv_heads: usize,
    /// Query heads per KV head.
    pub group: usize,
    /// The longest valid KV length of the batch.
    pub max_kv: usize,
    /// The KV axis the kernel is given: the block table capacity under PagedAttention, the
    /// padded KV length otherwise.
    pub kv_capacity: usize,
    /// The cache block size under PagedAttention.
    pub block_size: Option<usize>,
    /// The query's S (the prompt kernel's tiling reads it, [`super::pfa_tiling`]).
    pub q_seq: usize,
    /// Whether a mask is given (a sparse mode other than 0, or an explicit mask).
    pub masked: bool,
}

impl IfaShape {
    /// What the tilings see of `g`: a KV axis of `kv_capacity` keys, paged in blocks of
    /// `block_size` keys or contiguous (`None`).
    pub fn of(g: &super::Geometry, kv_capacity: usize, block_size: Option<usize>) -> IfaShape {
        IfaShape {
            batch: g.batch,
            kv_heads: g.kv_heads,
            group: g.group,
            max_kv: g.lk.iter().copied().max().unwrap_or(0),
            kv_capacity,
            block_size,
            q_seq: g.q_seq,
            masked: g.atten_mask || g.sparse != super::SparseMode::None,
        }
    }
}

/// The tiling the kernel runs: KV tile and, under flash decode, keys per split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IfaTiling {
    pub kv_tile: usize,
    pub split: Option<usize>,
}

/// Fraction of the vector cores below which batch x KV heads leaves enough idle cores to
/// split the KV axis (the kernel's general template).
const FLASH_DECODE_BN_RATIO: f64 = 0.4;
/// A split holds at least this many keys of the longest context (unless there is one split).
const MIN_SPLIT_KEYS: usize = 512;
/// Under PagedAttention, contexts up to this length never split.
const PAGED_NO_SPLIT_MAX: usize = 1024;
/// With several query heads per KV head, contexts below this length never split.
const GQA_SPLIT_MIN: usize = 2048;

/// The kernel's tiling for `shape` on `vector_cores` cores.
pub fn ifa_tiling(shape: &IfaShape, vector_cores: usize) -> IfaTiling {
    let bn = shape.batch.saturating_mul(shape.kv_heads).max(1);
    let align_up = |n: usize| match shape.block_size {
        Some(bs) if bs > 0 => n.div_ceil(bs).saturating_mul(bs),
        _ => n,
    };
    if flash_decode(shape, bn, vector_cores) {
        let mut parts = (vector_cores / bn).max(1);
        while parts > 1 && shape.max_kv / parts < MIN_SPLIT_KEYS {
            parts -= 1;
        }
        let per_split = align_up(shape.max_kv.div_ceil(parts)).max(1);
        let computed = align_up(shape.kv_capacity.div_ceil(parts));
        IfaTiling {
            kv_tile: inner_size(shape, computed),
            split: Some(per_split),
        }
    } else {
        IfaTiling {
            kv_tile: inner_size(shape, shape.kv_capacity),
            split: None,
        }
    }
}

fn flash_decode(shape: &IfaShape, bn: usize, vector_cores: usize) -> bool {
    if shape.block_size.is_some() && shape.max_kv <= PAGED_NO_SPLIT_MAX {
        return false;
    }
    let cores_idle = (bn as f64) < FLASH_DECODE_BN_RATIO * vector_cores as f64;
    cores_idle && (shape.group == 1 || shape.max_kv >= GQA_SPLIT_MIN)
}

/// The sInner size for a KV axis of `seq` keys (at least one key).
fn inner_size(shape: &IfaShape, seq: usize) -> usize {
    const BY_GROUP: [usize; 3] = [8192, 4096, 2048];
    let mut s = BY_GROUP[(shape.group / 5).min(2)];
    if let Some(bs) = shape.block_size
        && bs > 0
        && !s.is_multiple_of(bs)
    {
        s = (s / bs) * bs;
    }
    // A tile longer than the axis is the whole axis (the same tiles: one).
    s.min(seq).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paged(batch: usize, kv_heads: usize, group: usize, max_kv: usize, bs: usize) -> IfaShape {
        IfaShape {
            batch,
            kv_heads,
            group,
            max_kv,
            kv_capacity: max_kv.div_ceil(bs) * bs,
            block_size: Some(bs),
            q_seq: 1,
            masked: false,
        }
    }

    #[test]
    fn short_paged_contexts_are_one_tile_and_never_split() {
        // Llama-style decode at 64 keys, block 16: one tile of the whole (capacity) axis.
        let t = ifa_tiling(&paged(3, 2, 4, 64, 16), 48);
        assert_eq!(
            t,
            IfaTiling {
                kv_tile: 64,
                split: None
            }
        );
        // 1024 keys under PagedAttention never split, however idle the cores.
        let t = ifa_tiling(&paged(1, 1, 1, 1024, 16), 48);
        assert_eq!(t.split, None);
    }

    #[test]
    fn the_tile_follows_the_group_size_and_aligns_down_to_the_block() {
        // 32 (batch x KV heads) units keep the cores busy: no split.
        let t = ifa_tiling(&paged(4, 8, 8, 8192, 128), 48);
        assert_eq!(
            t,
            IfaTiling {
                kv_tile: 4096,
                split: None
            }
        );
        let t = ifa_tiling(&paged(4, 8, 4, 20000, 128), 48);
        assert_eq!(t.kv_tile, 8192);
        let t = ifa_tiling(&paged(4, 8, 16, 20000, 128), 48);
        assert_eq!(t.kv_tile, 2048);
        // Block 112 does not divide 8192: 73 blocks.
        let t = ifa_tiling(&paged(4, 8, 1, 20000, 112), 48);
        assert_eq!(t.kv_tile, 8176);
    }

    #[test]
    fn idle_cores_split_the_longest_context_into_whole_blocks() {
        // 2 units on 48 cores: 24 splits wanted, fewer while a split holds < 512 keys of
        // 1500: 2 splits of 750 keys, rounded up to 752 (47 blocks of 16).
        let t = ifa_tiling(&paged(1, 2, 1, 1500, 16), 48);
        assert_eq!(t.split, Some(752));
        assert_eq!(t.kv_tile, 752);
        // GQA below 2048 keys does not split; at 2048 it does, into 4 splits of 512 keys.
        assert_eq!(ifa_tiling(&paged(1, 2, 4, 2047, 16), 48).split, None);
        assert_eq!(ifa_tiling(&paged(1, 2, 4, 2048, 16), 48).split, Some(512));
        // Busy cores (20 units >= 0.4 x 48): no split.
        assert_eq!(ifa_tiling(&paged(10, 2, 1, 30000, 16), 48).split, None);
    }

    #[test]
    fn contiguous_caches_split_short_contexts_too() {
        let s = IfaShape {
            batch: 1,
            kv_heads: 1,
            group: 1,
            max_kv: 1024,
            kv_capacity: 1024,
            block_size: None,
            q_seq: 1,
            masked: false,
        };
        // 48 splits wanted, 2 keep >= 512 keys each.
        assert_eq!(
            ifa_tiling(&s, 48),
            IfaTiling {
                kv_tile: 512,
                split: Some(512)
            }
        );
    }

    #[test]
    fn the_core_count_decides_whether_busy_cores_split() {
        // 18 units (9 x 2 KV heads): below 0.4 x 48 = 19.2 but not below 0.4 x 40 = 16, so a
        // 48-vector-core part (Ascend910B2) splits the 20000-key context and a 40-core one
        // (Ascend910B4, the Atlas 800I A2) does not: the count is the SoC's, never assumed.
        let s = paged(9, 2, 1, 20000, 16);
        assert_eq!(ifa_tiling(&s, 48).split, Some(10000));
        assert_eq!(ifa_tiling(&s, 40).split, None);
    }
}
