//! Fused attention over contiguous Q/K/V in any layout: the recipe's algorithm run in
//! parallel over (batch, head, query-row chunk), results written in a fixed order, and the
//! output rounded ONCE to the output dtype with the recipe's output rounding.

use super::error::AttentionError;
use super::ifa_tiling::IfaShape;
use super::mask::BatchMask;
use super::params::Geometry;
use super::recipe::{EmptyRow, Recipe};
use super::row_sink::RowSink;
use super::rows::{HeadTask, Rows, RowsResult};
use super::split_kv::rows_result;
use super::vexp;
use crate::formats::DType;
use crate::parallel::{map_tasks, Threads};

/// The input buffers: element values (bf16/f16 inputs decoded exactly to f32) in the
/// configuration's layout, and the optional explicit mask `[B, q_seq, kv_seq]` (nonzero =
/// masked).
#[derive(Clone, Copy, Debug)]
pub struct AttentionInputs<'a> {
    pub query: &'a [f32],
    pub key: &'a [f32],
    pub value: &'a [f32],
    pub atten_mask: Option<&'a [u8]>,
}

impl AttentionInputs<'_> {
    /// Checks the buffers' sizes against `g` ([`Geometry::check_inputs`]).
    pub(crate) fn check_sizes(&self, g: &Geometry) -> Result<(), AttentionError> {
        g.check_inputs(
            self.query.len(),
            self.key.len(),
            self.value.len(),
            self.atten_mask.map(|m| m.len()),
        )
    }
}

/// Recipe outputs: `attention_out` values (already rounded to the output dtype, so exactly
/// representable in it) in the output layout, and the f32 softmax LSE when asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionOutput {
    pub out: Vec<f32>,
    pub lse: Option<Vec<f32>>,
}

/// Query rows per parallel task: whole query tiles, at least 16 rows. Depends only on the
/// recipe, never on the thread count.
pub(crate) fn task_rows(recipe: &Recipe) -> usize {
    let t = recipe.q_tile.max(1);
    t * 16usize.div_ceil(t)
}

/// The LSE written for padded query rows (beyond `actual_seq_lengths`), whose output is 0.
pub(crate) fn padding_lse(recipe: &Recipe) -> f32 {
    match recipe.empty_row {
        EmptyRow::Zero { lse } => lse,
        EmptyRow::Arithmetic => f32::INFINITY,
        EmptyRow::DecodeKernel { empty_kv_lse } => empty_kv_lse,
    }
}

/// Runs the rows `r0..r1` of one head in query tiles of the recipe.
pub(crate) fn run_rows(
    recipe: &Recipe,
    kv_tile: usize,
    task: &HeadTask,
    r0: usize,
    r1: usize,
) -> RowsResult {
    let dim = task.q.dim();
    let mut acc = RowsResult {
        out: Vec::with_capacity((r1 - r0) * dim),
        lse: Vec::new(),
        max: Vec::new(),
        sum: Vec::new(),
        has_key: Vec::new(),
    };
    let mut t0 = r0;
    while t0 < r1 {
        let t1 = (t0 + recipe.q_tile.max(1)).min(r1);
        let r = rows_result(recipe, kv_tile, task, t0..t1);
        acc.out.extend_from_slice(&r.out);
        acc.lse.extend_from_slice(&r.lse);
        acc.max.extend_from_slice(&r.max);
        acc.sum.extend_from_slice(&r.sum);
        acc.has_key.extend_from_slice(&r.has_key);
        t0 = t1;
    }
    acc
}

/// [`run_rows`], then the output rounding of the recipe applied to the rows in place (inside
/// the parallel task, so that [`write_rows`] only copies).
pub(crate) fn run_rows_rounded(
    g: &Geometry,
    recipe: &Recipe,
    kv_tile: usize,
    task: &HeadTask,
    r0: usize,
    r1: usize,
) -> RowsResult {
    let mut res = run_rows(recipe, kv_tile, task, r0, r1);
    round_output(g, recipe, &mut res.out);
    res
}

/// Rounds finished output rows to the output dtype with the recipe's output rounding.
pub(crate) fn round_output(g: &Geometry, recipe: &Recipe, out: &mut [f32]) {
    match g.dtype {
        DType::F32 => {}
        DType::Bf16 => vexp::quantize_bf16_slice(out, recipe.output_rounding),
        DType::F16 => out
            .iter_mut()
            .for_each(|x| *x = DType::F16.quantize_f32(*x, recipe.output_rounding)),
    }
}

/// Writes a task's rows, already rounded to the output dtype ([`run_rows_rounded`]), into the
/// output buffers.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_rows(
    g: &Geometry,
    b: usize,
    h: usize,
    r0: usize,
    res: &RowsResult,
    out: &mut [f32],
    lse: &mut [f32],
) {
    let dim = g.head_dim;
    for (r, i) in (r0..r0 + res.lse.len()).enumerate() {
        let o = g.out_offset(b, i, h);
        out[o..o + dim].copy_from_slice(&res.out[r * dim..(r + 1) * dim]);
        lse[g.lse_index(b, i, h)] = res.lse[r];
    }
}

/// Fills padded query rows (`lq..q_rows`) of every (b, h) with output 0 and the padding LSE.
pub(crate) fn write_padding(g: &Geometry, recipe: &Recipe, out: &mut [f32], lse: &mut [f32]) {
    let dim = g.head_dim;
    for b in 0..g.batch {
        for h in 0..g.heads {
            for i in g.lq[b]..g.q_rows(b) {
                let o = g.out_offset(b, i, h);
                out[o..o + dim].fill(0.0);
                lse[g.lse_index(b, i, h)] = padding_lse(recipe);
            }
        }
    }
}

/// The (b, head) unit of work over contiguous inputs.
pub(crate) fn head_task<'a>(
    g: &Geometry,
    inputs: &AttentionInputs<'a>,
    b: usize,
    h: usize,
) -> Result<HeadTask<'a>, AttentionError> {
    let kv_offset = g.kv_offset(b, 0, g.kv_head(h));
    let rows = |tensor: &str, data: &'a [f32], offset: usize, stride: usize, len: usize| {
        Rows::new(data, offset, stride, len, g.head_dim)
            .ok_or_else(|| AttentionError::param(tensor, "row outside the tensor"))
    };
    Ok(HeadTask {
        q: rows(
            "query",
            inputs.query,
            g.q_offset(b, 0, h),
            g.q_stride(),
            g.lq[b],
        )?,
        k: rows("key", inputs.key, kv_offset, g.kv_stride(), g.lk[b])?,
        v: rows("value", inputs.value, kv_offset, g.kv_stride(), g.lk[b])?,
        mask: BatchMask::new(g, b, inputs.atten_mask),
        scale: g.scale,
    })
}

/// Attention with `recipe` over contiguous inputs, KV tiles of `recipe.kv_tile` keys (or the
/// recipe's kernel tiling, [`Recipe::for_problem`]).
pub fn attention(
    g: &Geometry,
    recipe: &Recipe,
    inputs: &AttentionInputs,
    threads: Threads,
) -> Result<AttentionOutput, AttentionError> {
    recipe.validate()?;
    g.require_one_width()?;
    inputs.check_sizes(g)?;
    let shape = IfaShape::of(g, g.kv_seq, None);
    let (recipe, kv_tile) = recipe.for_problem(&shape, recipe.kv_tile);
    let recipe = &recipe;
    let chunk = task_rows(recipe);
    let tasks = g.row_tasks(chunk);
    // Build every head task first so that a bad geometry is an error, not a panic.
    let mut heads = Vec::with_capacity(g.batch * g.heads);
    for b in 0..g.batch {
        for h in 0..g.heads {
            heads.push(head_task(g, inputs, b, h)?);
        }
    }
    // K and V of each (batch, KV head) packed densely (the same values, so the same bits):
    // strided rows cost a TLB miss per key in BSND layouts.
    let packed: Vec<(Vec<f32>, Vec<f32>)> = map_tasks(g.batch * g.kv_heads, threads, |t| {
        let head = &heads[(t / g.kv_heads) * g.heads + (t % g.kv_heads) * g.group];
        let pack = |rows: &Rows| -> Vec<f32> {
            let mut d = Vec::with_capacity(rows.len() * rows.dim());
            for j in 0..rows.len() {
                d.extend_from_slice(rows.row(j));
            }
            d
        };
        (pack(&head.k), pack(&head.v))
    });
    let mut out = vec![0.0f32; g.out_len()];
    let mut lse = vec![0.0f32; g.lse_len()];
    write_padding(g, recipe, &mut out, &mut lse);
    let sink = RowSink::new(&mut out, &mut lse);
    map_tasks(tasks.len(), threads, |t| {
        let (b, h, r0, r1) = tasks[t];
        let (k, v) = &packed[b * g.kv_heads + g.kv_head(h)];
        let task = HeadTask {
            k: Rows::dense(k, g.head_dim),
            v: Rows::dense(v, g.head_dim),
            ..heads[b * g.heads + h]
        };
        let res = run_rows_rounded(g, recipe, kv_tile, &task, r0, r1);
        // SAFETY: the tasks partition the (b, h, query row) triples: task t alone owns rows
        // r0..r1 of (b, h).
        unsafe { sink.write(g, b, h, r0, &res) };
    });
    Ok(AttentionOutput {
        out,
        lse: g.softmax_lse_flag.then_some(lse),
    })
}
