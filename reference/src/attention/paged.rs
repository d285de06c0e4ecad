//! PagedAttention: K/V read from a paged cache through `block_table` `[B, max_blocks]` and
//! `actual_seq_lengths_kv` (numerics.md "vLLM paged attention" addressing; ascend-apis.md
//! "PagedAttention through FIA").
//!
//! Key t of batch b lives in physical block `block_table[b][t / block_size]`, slot
//! `t % block_size`; element offsets come from [`KvCacheLayout::offset`] (BnBsH or BnNBsD).
//! Only the first `ceil(lk / block_size)` table entries of a batch are read and checked
//! (entries after them may be padding such as -1), and only slots of valid tokens are read:
//! unused slots and tokens beyond `actual_seq_lengths_kv` never influence the output.
//!
//! Per (batch, KV head), the valid keys are gathered (decoded exactly to f32) and the query
//! heads of that group run the recipe with KV tiles of one cache block, exactly as the
//! contiguous path does ([`super::flash`]): the result equals fused attention on the gathered
//! contiguous K/V with `kv_tile = block_size`, bit for bit. Decode is `q_seq = 1`; prefill
//! any `q_seq`.

use super::error::AttentionError;
use super::flash::{
    round_output, run_rows_rounded, task_rows, write_padding, write_rows, AttentionOutput,
};
use super::ifa_tiling::IfaShape;
use super::mask::BatchMask;
use super::params::Geometry;
use super::recipe::Recipe;
use super::rows::{HeadTask, Rows, RowsResult};
use super::split_kv::rows_result;
use crate::formats::{bf16, f16};
use crate::kv::{CacheGeometry, KvCacheLayout};
use crate::parallel::{map_tasks, Threads};

/// Smallest and largest block size accepted.
pub const MIN_BLOCK_SIZE: usize = 16;
pub const MAX_BLOCK_SIZE: usize = 512;

/// The elements of one cache tensor.
#[derive(Clone, Copy, Debug)]
pub enum CacheData<'a> {
    F32(&'a [f32]),
    /// bf16 bit patterns.
    Bf16(&'a [u16]),
    /// f16 bit patterns.
    F16(&'a [u16]),
}

impl CacheData<'_> {
    fn len(&self) -> usize {
        match self {
            CacheData::F32(x) => x.len(),
            CacheData::Bf16(x) | CacheData::F16(x) => x.len(),
        }
    }

    #[inline(always)]
    fn copy_row(&self, o: usize, dst: &mut [f32]) {
        let n = dst.len();
        match self {
            CacheData::F32(x) => dst.copy_from_slice(&x[o..o + dst.len()]),
            CacheData::Bf16(x) => {
                for (d, &b) in dst.iter_mut().zip(&x[o..o + n]) {
                    *d = bf16::bf16_to_f32(b);
                }
            }
            CacheData::F16(x) => {
                for (d, &b) in dst.iter_mut().zip(&x[o..o + n]) {
                    *d = f16::f16_to_f32(b);
                }
            }
        }
    }
}

/// A paged key and value cache (same layout and geometry) and the block table.
#[derive(Clone, Copy, Debug)]
pub struct PagedKv<'a> {
    pub key_cache: CacheData<'a>,
    pub value_cache: CacheData<'a>,
    pub layout: KvCacheLayout,
    pub cache: CacheGeometry,
    /// `[batch, max_blocks]`, row-major.
    pub block_table: &'a [i64],
    pub max_blocks: usize,
}

/// Checks the cache and block table against the query geometry; returns, per batch, the
/// physical blocks its valid tokens occupy.
pub fn validate_paged(g: &Geometry, kv: &PagedKv) -> Result<Vec<Vec<usize>>, AttentionError> {
    let c = &kv.cache;
    if !matches!(kv.layout, KvCacheLayout::BnBsH | KvCacheLayout::BnNBsD) {
        return Err(AttentionError::param(
            "cache_layout",
            format!(
                "{:?} is not an Ascend PagedAttention layout (BnBsH, BnNBsD)",
                kv.layout
            ),
        ));
    }
    if c.block_size < MIN_BLOCK_SIZE || c.block_size > MAX_BLOCK_SIZE {
        return Err(AttentionError::param(
            "block_size",
            format!(
                "{} is outside {MIN_BLOCK_SIZE}..={MAX_BLOCK_SIZE}",
                c.block_size
            ),
        ));
    }
    if c.num_blocks == 0 {
        return Err(AttentionError::param("num_blocks", "must be positive"));
    }
    if c.kv_heads != g.kv_heads {
        return Err(AttentionError::param(
            "num_key_value_heads",
            format!(
                "cache has {} KV heads, configuration {}",
                c.kv_heads, g.kv_heads
            ),
        ));
    }
    if c.head_dim != g.head_dim {
        return Err(AttentionError::param(
            "head_dim",
            format!(
                "cache has head_dim {}, configuration {}",
                c.head_dim, g.head_dim
            ),
        ));
    }
    kv.layout
        .validate(c)
        .map_err(|e| AttentionError::param("cache", e.to_string()))?;
    for (name, data) in [("key_cache", kv.key_cache), ("value_cache", kv.value_cache)] {
        if data.len() != c.len() {
            return Err(AttentionError::WrongInputSize {
                tensor: name.to_string(),
                shape: kv.layout.shape(c),
                expected: c.len(),
                actual: data.len(),
            });
        }
    }
    let expected = g.batch.saturating_mul(kv.max_blocks);
    if kv.block_table.len() != expected {
        return Err(AttentionError::WrongInputSize {
            tensor: "block_table".to_string(),
            shape: vec![g.batch, kv.max_blocks],
            expected,
            actual: kv.block_table.len(),
        });
    }
    let mut blocks = Vec::with_capacity(g.batch);
    for b in 0..g.batch {
        let lk = g.lk[b];
        let capacity = kv.max_blocks.saturating_mul(c.block_size);
        if lk > capacity {
            return Err(AttentionError::param(
                format!("actual_seq_lengths_kv[{b}]"),
                format!(
                    "{lk} exceeds the block table's capacity {} x {} = {capacity}",
                    kv.max_blocks, c.block_size
                ),
            ));
        }
        let used = lk.div_ceil(c.block_size);
        let mut row = Vec::with_capacity(used);
        for index in 0..used {
            let value = kv.block_table[b * kv.max_blocks + index];
            if value < 0 || value as u64 >= c.num_blocks as u64 {
                return Err(AttentionError::BlockOutOfRange {
                    batch: b,
                    index,
                    value,
                    num_blocks: c.num_blocks,
                });
            }
            row.push(value as usize);
        }
        blocks.push(row);
    }
    Ok(blocks)
}

/// Gathers the first `lk` tokens of KV head `kvh` through `blocks` into dense `[lk, dim]`.
pub fn gather(
    data: CacheData,
    layout: KvCacheLayout,
    c: &CacheGeometry,
    blocks: &[usize],
    kvh: usize,
    lk: usize,
) -> Vec<f32> {
    let dim = c.head_dim;
    let mut dense = vec![0.0f32; lk * dim];
    for (t, row) in dense.chunks_exact_mut(dim).enumerate() {
        let o = layout.offset(c, blocks[t / c.block_size], t % c.block_size, kvh, 0);
        data.copy_row(o, row);
    }
    dense
}

/// The query rows of heads `h0..h0 + group` of a decode step (one query row) as one `Rows`,
/// when the mask gives every such row the same keys (no explicit mask, and the structured
/// interval of rows 1..group equal to row 0's).
fn decode_group_rows<'a>(
    g: &Geometry,
    b: usize,
    h0: usize,
    query: &'a [f32],
    explicit: bool,
) -> Option<Rows<'a>> {
    if g.lq[b] != 1 || g.group < 2 || explicit {
        return None;
    }
    let m = BatchMask::structured(g.sparse, 1, g.lk[b]);
    if (1..g.group).any(|r| m.interval(r) != m.interval(0)) {
        return None;
    }
    let stride = g.q_offset(b, 0, h0 + 1) - g.q_offset(b, 0, h0);
    Rows::new(query, g.q_offset(b, 0, h0), stride, g.group, g.head_dim)
}

/// PagedAttention with `recipe`: queries contiguous in the configuration's layout (the
/// configuration's `kv_seq` is the table capacity `max_blocks * block_size`), K/V through the
/// paged cache. KV tiles are the cache block size, or the recipe's kernel tiling
/// ([`Recipe::for_problem`]).
pub fn paged_attention(
    g: &Geometry,
    recipe: &Recipe,
    query: &[f32],
    atten_mask: Option<&[u8]>,
    kv: &PagedKv,
    threads: Threads,
) -> Result<AttentionOutput, AttentionError> {
    recipe.validate()?;
    g.require_one_width()?;
    if g.layout.is_varlen() {
        return Err(AttentionError::param(
            "input_layout",
            "PagedAttention takes BSND, BNSD, BSH or BNSD_BSND queries",
        ));
    }
    let q_len = g.q_len();
    if query.len() != q_len {
        return Err(AttentionError::WrongInputSize {
            tensor: "query".to_string(),
            shape: g.q_shape(),
            expected: q_len,
            actual: query.len(),
        });
    }
    g.check_inputs(q_len, g.kv_len(), g.kv_len(), atten_mask.map(|m| m.len()))?;
    let blocks = validate_paged(g, kv)?;
    let shape = IfaShape::of(
        g,
        kv.max_blocks.saturating_mul(kv.cache.block_size),
        Some(kv.cache.block_size),
    );
    let (recipe, kv_tile) = recipe.for_problem(&shape, kv.cache.block_size);
    let recipe = &recipe;
    let chunk = task_rows(recipe);
    // Query rows of every (batch, head), built up front so a bad size is an error.
    let mut q_rows = Vec::with_capacity(g.batch * g.heads);
    for b in 0..g.batch {
        for h in 0..g.heads {
            q_rows.push(
                Rows::new(
                    query,
                    g.q_offset(b, 0, h),
                    g.q_stride(),
                    g.lq[b],
                    g.head_dim,
                )
                .ok_or_else(|| AttentionError::param("query", "row outside the tensor"))?,
            );
        }
    }
    let results = map_tasks(g.batch * g.kv_heads, threads, |t| {
        let (b, kvh) = (t / g.kv_heads, t % g.kv_heads);
        let lk = g.lk[b];
        let kd = gather(kv.key_cache, kv.layout, &kv.cache, &blocks[b], kvh, lk);
        let vd = gather(kv.value_cache, kv.layout, &kv.cache, &blocks[b], kvh, lk);
        let mut res = Vec::new();
        let h0 = kvh * g.group;
        if let Some(rows) = decode_group_rows(g, b, h0, query, atten_mask.is_some()) {
            // Decode with a mask that does not depend on the row: the group's heads share
            // K/V and mask, and a row's arithmetic never depends on the other rows of its
            // tile, so the group runs as one tile (same bits as one tile per head; the tests
            // compare against the per-head contiguous path).
            let task = HeadTask {
                q: rows,
                k: Rows::dense(&kd, g.head_dim),
                v: Rows::dense(&vd, g.head_dim),
                mask: BatchMask::new(g, b, None),
                scale: g.scale,
            };
            let mut all = rows_result(recipe, kv_tile, &task, 0..g.group);
            round_output(g, recipe, &mut all.out);
            let dim = g.head_dim;
            for r in 0..g.group {
                let one = RowsResult {
                    out: all.out[r * dim..(r + 1) * dim].to_vec(),
                    lse: vec![all.lse[r]],
                    max: vec![all.max[r]],
                    sum: vec![all.sum[r]],
                    has_key: vec![all.has_key[r]],
                };
                res.push((h0 + r, 0, one));
            }
            return res;
        }
        for h in kvh * g.group..(kvh + 1) * g.group {
            let task = HeadTask {
                q: q_rows[b * g.heads + h],
                k: Rows::dense(&kd, g.head_dim),
                v: Rows::dense(&vd, g.head_dim),
                mask: BatchMask::new(g, b, atten_mask),
                scale: g.scale,
            };
            let mut r0 = 0;
            while r0 < g.lq[b] {
                let r1 = (r0 + chunk).min(g.lq[b]);
                res.push((h, r0, run_rows_rounded(g, recipe, kv_tile, &task, r0, r1)));
                r0 = r1;
            }
        }
        res
    });
    let mut out = vec![0.0f32; g.out_len()];
    let mut lse = vec![0.0f32; g.lse_len()];
    write_padding(g, recipe, &mut out, &mut lse);
    for (t, group) in results.iter().enumerate() {
        let b = t / g.kv_heads;
        for (h, r0, res) in group {
            write_rows(g, b, *h, *r0, res, &mut out, &mut lse);
        }
    }
    Ok(AttentionOutput {
        out,
        lse: g.softmax_lse_flag.then_some(lse),
    })
}

/// The valid keys and values of every (batch, KV head) gathered into contiguous tensors in
/// the configuration's layout (`kv_seq` = table capacity; slots beyond `actual_seq_lengths_kv`
/// are 0): the input on which contiguous attention equals [`paged_attention`].
pub fn gather_contiguous(
    g: &Geometry,
    kv: &PagedKv,
) -> Result<(Vec<f32>, Vec<f32>), AttentionError> {
    g.require_one_width()?;
    let blocks = validate_paged(g, kv)?;
    let dim = g.head_dim;
    let mut k = vec![0.0f32; g.kv_len()];
    let mut v = vec![0.0f32; g.kv_len()];
    for (b, blocks) in blocks.iter().enumerate() {
        for kvh in 0..g.kv_heads {
            let kd = gather(kv.key_cache, kv.layout, &kv.cache, blocks, kvh, g.lk[b]);
            let vd = gather(kv.value_cache, kv.layout, &kv.cache, blocks, kvh, g.lk[b]);
            for j in 0..g.lk[b] {
                let o = g.kv_offset(b, j, kvh);
                k[o..o + dim].copy_from_slice(&kd[j * dim..(j + 1) * dim]);
                v[o..o + dim].copy_from_slice(&vd[j * dim..(j + 1) * dim]);
            }
        }
    }
    Ok((k, v))
}
