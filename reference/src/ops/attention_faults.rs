//! Faults of the attention kernels (`fa_prefill`, `pa_decode`): the online softmax, masks,
//! head mapping, scale, rounding points, LSE, and the paged cache reads.

use crate::attention::recipe::{
    Algorithm, Combine, EmptyRow, KvTiling, MaskFill, Normalize, ORescale, RowSumOf,
};
use crate::attention::{Geometry, Recipe};
use crate::formats::DType;
use crate::kv::KvCacheLayout;
use crate::ops::attention_regimes::score_view;
use crate::ops::fault::swap_rounding_ties;
use crate::ops::fault::tensors::{get_mut, ints, nan_bytes, param_usize, set_element, set_ints};
use crate::ops::fault::{Edit, Fault, Requirement};
use crate::ops::{ElemType, OpError, OpFamily, TensorMap};

const ATTENTION: &[&str] = &["fa_prefill", "pa_decode"];
const FA: &[&str] = &["fa_prefill"];
const PA: &[&str] = &["pa_decode"];
/// Faults of the attention arithmetic that the C8 decode's attention half runs too (on its
/// dequantised cache): its moderate maxima, subnormal value columns and attention ties.
const WITH_C8: &[&str] = &["fa_prefill", "pa_decode", "pa_decode_int8"];

fn is_paged(params: &serde_json::Value) -> bool {
    params.get("block_size").is_some() || params.get("cache_layout").is_some()
}

fn geometry(params: &serde_json::Value) -> Result<Geometry, OpError> {
    if is_paged(params) {
        crate::ops::pa_decode::geometry_of(params)
    } else {
        crate::ops::fa_prefill::geometry_of(params)
    }
}

/// The position head `h` is moved to so that the reference's `h / group` mapping reads the KV
/// head `h % kv_heads`; `None` when both mappings agree for every head.
fn head_position(g: &Geometry) -> Option<impl Fn(usize) -> usize + use<>> {
    let (kv, group) = (g.kv_heads, g.group);
    (kv > 1 && group > 1).then_some(move |h: usize| (h % kv) * group + h / kv)
}

/// Moves query head `h` to [`head_position`]`(h)`.
fn permute_query(params: &serde_json::Value, inputs: &mut TensorMap) -> Result<bool, OpError> {
    let g = geometry(params)?;
    let Some(pos) = head_position(&g) else {
        return Ok(false);
    };
    let q = get_mut("attention", inputs, "query")?;
    let w = q.dtype.size_bytes() * g.head_dim;
    let src = q.data.clone();
    for b in 0..g.batch {
        for i in 0..g.q_rows(b) {
            for h in 0..g.heads {
                let (from, to) = (g.q_offset(b, i, h), g.q_offset(b, i, pos(h)));
                let (from, to) = (from / g.head_dim * w, to / g.head_dim * w);
                q.data[to..to + w].copy_from_slice(&src[from..from + w]);
            }
        }
    }
    Ok(true)
}

/// Reads head `h`'s output (and LSE) back from [`head_position`]`(h)`.
fn unpermute_outputs(
    params: &serde_json::Value,
    _inputs: &TensorMap,
    outputs: &mut TensorMap,
) -> Result<bool, OpError> {
    let g = geometry(params)?;
    let Some(pos) = head_position(&g) else {
        return Ok(false);
    };
    let d = g.head_dim;
    let o = get_mut("attention", outputs, "attention_out")?;
    let w = o.dtype.size_bytes() * d;
    let src = o.data.clone();
    for b in 0..g.batch {
        for i in 0..g.q_rows(b) {
            for h in 0..g.heads {
                let from = g.out_offset(b, i, pos(h)) / d * w;
                let to = g.out_offset(b, i, h) / d * w;
                o.data[to..to + w].copy_from_slice(&src[from..from + w]);
            }
        }
    }
    if let Some(l) = outputs.get_mut("softmax_lse") {
        let w = l.dtype.size_bytes();
        let src = l.data.clone();
        for b in 0..g.batch {
            for i in 0..g.q_rows(b) {
                for h in 0..g.heads {
                    let from = g.lse_index(b, i, pos(h)) * w;
                    let to = g.lse_index(b, i, h) * w;
                    l.data[to..to + w].copy_from_slice(&src[from..from + w]);
                }
            }
        }
    }
    Ok(true)
}

/// The case's softmax scale (the parameter, or the default 1/sqrt(head_dim)).
fn scale_of(params: &serde_json::Value) -> Option<f64> {
    let d = param_usize(params, "head_dim")? as f64;
    Some(
        params
            .get("scale")
            .and_then(|s| s.as_f64())
            .unwrap_or(1.0 / crate::math::sqrt_f64(d)),
    )
}

fn set_scale(params: &mut serde_json::Value, scale: f64) -> bool {
    if scale_of(params) == Some(scale) {
        return false;
    }
    params["scale"] = serde_json::json!(scale);
    true
}

/// Fixes `max_blocks` and `num_blocks` of a `pa_decode` case to their current values, so that
/// changed sequence lengths keep every tensor's shape.
fn pin_pa_shapes(params: &mut serde_json::Value) -> bool {
    let Ok(desc) = crate::ops::pa_decode::PaDecode.describe(params) else {
        return false;
    };
    let shape = |name: &str| {
        desc.inputs
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.shape.clone())
    };
    let (Some(table), Some(cache)) = (shape("block_table"), shape("key_cache")) else {
        return false;
    };
    params["max_blocks"] = serde_json::json!(table[1]);
    params["num_blocks"] = serde_json::json!(cache[0]);
    true
}

/// Applies `f` to every `actual_seq_lengths_kv` entry of a `pa_decode` case (shapes kept).
fn edit_pa_lengths(params: &mut serde_json::Value, f: impl Fn(i64, i64, i64) -> i64) -> bool {
    let Some(bs) = param_usize(params, "block_size") else {
        return false;
    };
    if !pin_pa_shapes(params) {
        return false;
    }
    let cap = (param_usize(params, "max_blocks").unwrap_or(0) * bs) as i64;
    let Some(lens) = params
        .get("actual_seq_lengths_kv")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|x| x.as_i64()).collect::<Vec<_>>())
    else {
        return false;
    };
    let new: Vec<i64> = lens.iter().map(|&l| f(l, bs as i64, cap)).collect();
    if new == lens {
        return false;
    }
    params["actual_seq_lengths_kv"] = serde_json::json!(new);
    true
}

fn table_off_by_one(params: &serde_json::Value, inputs: &mut TensorMap) -> Result<bool, OpError> {
    let blocks = inputs
        .get("key_cache")
        .map(|t| t.shape[0] as i64)
        .unwrap_or(0);
    let _ = params;
    let t = get_mut("pa_decode", inputs, "block_table")?;
    let v = ints("pa_decode", "block_table", t)?;
    if blocks < 2 {
        return Ok(false);
    }
    let shifted: Vec<i64> = v.iter().map(|&b| (b + 1).rem_euclid(blocks)).collect();
    set_ints(t, &shifted);
    Ok(true)
}

fn lse_log2(
    _params: &serde_json::Value,
    _inputs: &TensorMap,
    outputs: &mut TensorMap,
) -> Result<bool, OpError> {
    let Some(l) = outputs.get_mut("softmax_lse") else {
        return Ok(false);
    };
    let v = l.to_f32_vec().map_err(|e| OpError::Failed {
        op: "attention".into(),
        message: e.to_string(),
    })?;
    let log2e = std::f32::consts::LOG2_E;
    let scaled: Vec<f32> = v.iter().map(|&x| x * log2e).collect();
    *l = crate::ops::Tensor::from_f32(l.shape.clone(), &scaled);
    Ok(true)
}

/// ln(f32::MAX): exp of a larger argument overflows f32.
const EXP_OVERFLOW_F32: f64 = 88.722_839_052_068_35;

/// The op of an attention case's parameters.
fn op_of(params: &serde_json::Value) -> &'static str {
    if is_paged(params) {
        "pa_decode"
    } else {
        "fa_prefill"
    }
}

/// `x` as one little-endian element of a float LSE tensor (F32 from a recipe, F64 from the
/// oracle).
fn lse_bytes(dtype: ElemType, x: f64) -> Option<Vec<u8>> {
    match dtype {
        ElemType::F32 => Some((x as f32).to_le_bytes().to_vec()),
        ElemType::F64 => Some(x.to_le_bytes().to_vec()),
        _ => None,
    }
}

/// A kernel that computes exp(s) without subtracting the row maximum: on every row whose
/// largest scaled score exceeds ln(f32::MAX), exp overflows to +Inf, the row sum is +Inf and
/// O = (Inf-weighted sum) / Inf is NaN; the LSE, ln(Inf), is +Inf. Rows below the overflow
/// point only change in rounding and are left as the recipe computes them (the model is the
/// part of the bug that no tolerance can miss).
fn no_max_subtraction(
    params: &serde_json::Value,
    inputs: &TensorMap,
    outputs: &mut TensorMap,
) -> Result<bool, OpError> {
    let v = score_view(op_of(params), params, inputs)?;
    let g = &v.g;
    let mut rows = Vec::new();
    for b in 0..g.batch {
        for i in 0..g.lq[b] {
            for h in 0..g.heads {
                if v.max_score(b, i, h).is_some_and(|m| m > EXP_OVERFLOW_F32) {
                    rows.push((b, i, h));
                }
            }
        }
    }
    if rows.is_empty() {
        return Ok(false);
    }
    let o = get_mut("attention", outputs, "attention_out")?;
    let nan = nan_bytes(o.dtype).ok_or_else(|| OpError::Failed {
        op: op_of(params).into(),
        message: format!("attention_out is {}, not a float", o.dtype.name()),
    })?;
    for &(b, i, h) in &rows {
        let start = g.out_offset(b, i, h);
        for e in start..start + g.head_dim {
            set_element(o, e, &nan);
        }
    }
    if let Some(l) = outputs.get_mut("softmax_lse")
        && let Some(inf) = lse_bytes(l.dtype, f64::INFINITY)
    {
        for &(b, i, h) in &rows {
            set_element(l, g.lse_index(b, i, h), &inf);
        }
    }
    Ok(true)
}

/// A kernel whose LSE on valid rows without any allowed key is -Inf (the log of an empty
/// sum, FA3's convention) where the recipe's empty-row value is anything else (+Inf for
/// Ascend and FA2), or +Inf where the recipe's is -Inf; the output rows are unchanged.
fn lse_wrong_on_empty_rows(
    params: &serde_json::Value,
    inputs: &TensorMap,
    outputs: &mut TensorMap,
) -> Result<bool, OpError> {
    if !outputs.contains_key("softmax_lse") {
        return Ok(false);
    }
    let v = score_view(op_of(params), params, inputs)?;
    let g = &v.g;
    let l = get_mut("attention", outputs, "softmax_lse")?;
    let values = l.to_f64_vec();
    let mut changed = false;
    for b in 0..g.batch {
        for i in 0..g.lq[b] {
            if !v.row_empty(b, i) {
                continue;
            }
            for h in 0..g.heads {
                let idx = g.lse_index(b, i, h);
                let wrong = if values[idx] == f64::NEG_INFINITY {
                    f64::INFINITY
                } else {
                    f64::NEG_INFINITY
                };
                if let Some(bytes) = lse_bytes(l.dtype, wrong) {
                    set_element(l, idx, &bytes);
                    changed = true;
                }
            }
        }
    }
    Ok(changed)
}

/// Copies `rows` whole rows of `width` bytes: row `to(r)` of `t` takes row `from(r)` of its
/// original contents.
fn move_rows(
    t: &mut crate::ops::Tensor,
    width: usize,
    moves: impl Iterator<Item = (usize, usize)>,
) -> bool {
    let src = t.data.clone();
    let mut changed = false;
    for (to, from) in moves {
        let (to, from) = (to * width, from * width);
        if src[to..to + width] != src[from..from + width] {
            changed = true;
        }
        t.data[to..to + width].copy_from_slice(&src[from..from + width]);
    }
    changed
}

/// A kernel whose query batch stride is 0: every batch entry reads the query rows of entry 0
/// (row i of entry b is row i of entry 0, for the rows both have).
fn query_of_batch_0(params: &serde_json::Value, inputs: &mut TensorMap) -> Result<bool, OpError> {
    let g = geometry(params)?;
    if g.batch < 2 {
        return Ok(false);
    }
    let q = get_mut("attention", inputs, "query")?;
    let d = g.head_dim;
    let width = q.dtype.size_bytes() * d;
    let g = &g;
    let moves = (1..g.batch).flat_map(|b| {
        let rows = g.q_rows(b).min(g.q_rows(0));
        (0..rows).flat_map(move |i| {
            (0..g.heads).map(move |h| (g.q_offset(b, i, h) / d, g.q_offset(0, i, h) / d))
        })
    });
    Ok(move_rows(q, width, moves))
}

/// The row moves of a kernel that takes the outer stride of `slabs` slabs of `outer * inner`
/// rows (laid out outer-major) from the outer axis itself: it reads row (o, i) of a slab at
/// `(o * outer + i) mod (outer * inner)` instead of `o * inner + i`. Every row is its own
/// source exactly when `outer == inner`.
fn swapped_stride_moves(
    slabs: usize,
    outer: usize,
    inner: usize,
) -> impl Iterator<Item = (usize, usize)> {
    let n = outer * inner;
    (0..slabs * n).map(move |r| {
        let (slab, o, i) = (r / n, r % n / inner, r % inner);
        (r, slab * n + (o * outer + i) % n)
    })
}

/// A kernel that reads the query with the strides of the sequence and head axes swapped
/// (BSND: token stride N*D taken as S*D; BNSD: head stride S*D taken as N*D). Invisible when
/// S == N; otherwise most rows read another row's data.
fn query_strides_swapped(
    params: &serde_json::Value,
    inputs: &mut TensorMap,
) -> Result<bool, OpError> {
    use crate::attention::InputLayout;
    let g = geometry(params)?;
    let (s, n) = (g.q_seq, g.heads);
    let bnsd = match g.layout {
        InputLayout::Bsnd | InputLayout::Bsh => false,
        InputLayout::Bnsd | InputLayout::BnsdBsnd => true,
        InputLayout::Tnd => return Ok(false),
    };
    if s == n {
        return Ok(false);
    }
    // BSND: tokens outer, heads inner; BNSD: heads outer, tokens inner.
    let (outer, inner) = if bnsd { (n, s) } else { (s, n) };
    let q = get_mut("attention", inputs, "query")?;
    let width = q.dtype.size_bytes() * g.head_dim;
    let moves = swapped_stride_moves(g.batch, outer, inner);
    Ok(move_rows(q, width, moves))
}

/// A kernel that reads the paged key and value caches with the strides of the slot and head
/// axes swapped inside a block (BnBsH: slot stride Hkv*D taken as block_size*D; BnNBsD: head
/// stride block_size*D taken as Hkv*D). Invisible when block_size == Hkv.
fn cache_strides_swapped(
    params: &serde_json::Value,
    inputs: &mut TensorMap,
) -> Result<bool, OpError> {
    let p: crate::ops::pa_decode::PaDecodeParams = crate::ops::parse_params("pa_decode", params)?;
    let (bs, kvh, d) = (p.block_size, p.num_key_value_heads, p.head_dim);
    let heads_major = match p.cache_layout {
        KvCacheLayout::BnBsH => false,
        KvCacheLayout::BnNBsD => true,
        KvCacheLayout::VllmKey { .. } | KvCacheLayout::VllmValue => return Ok(false),
    };
    if bs == kvh {
        return Ok(false);
    }
    // BnBsH: slots outer, heads inner; BnNBsD: heads outer, slots inner.
    let (outer, inner) = if heads_major { (kvh, bs) } else { (bs, kvh) };
    let mut changed = false;
    for name in ["key_cache", "value_cache"] {
        let t = get_mut("pa_decode", inputs, name)?;
        let width = t.dtype.size_bytes() * d;
        let blocks = t.data.len() / (width * bs * kvh).max(1);
        changed |= move_rows(t, width, swapped_stride_moves(blocks, outer, inner));
    }
    Ok(changed)
}

/// A kernel that lays the LSE of each (batch, head) out by the entry's actual query length
/// instead of the padded length S: valid row i of head h lands at `h * lq + i` of the entry's
/// `N * S` slab, and the slab's other positions keep the padded-row value. Invisible when no
/// row is padded.
fn lse_strided_by_actual_length(
    params: &serde_json::Value,
    _inputs: &TensorMap,
    outputs: &mut TensorMap,
) -> Result<bool, OpError> {
    let g = geometry(params)?;
    if g.layout.is_varlen() {
        return Ok(false);
    }
    let Some(l) = outputs.get_mut("softmax_lse") else {
        return Ok(false);
    };
    let w = l.dtype.size_bytes();
    let src = l.data.clone();
    let mut changed = false;
    for b in 0..g.batch {
        let lq = g.lq[b];
        if lq >= g.q_seq {
            continue;
        }
        // The padded-row value, as the kernel under test would have written it.
        let pad = g.lse_index(b, lq, 0) * w;
        let pad = src[pad..pad + w].to_vec();
        let slab = g.lse_index(b, 0, 0);
        for k in 0..g.heads * g.q_seq {
            l.data[(slab + k) * w..(slab + k + 1) * w].copy_from_slice(&pad);
        }
        for h in 0..g.heads {
            for i in 0..lq {
                let from = g.lse_index(b, i, h) * w;
                let to = (slab + h * lq + i) * w;
                l.data[to..to + w].copy_from_slice(&src[from..from + w]);
            }
        }
        changed |= l.data[slab * w..(slab + g.heads * g.q_seq) * w]
            != src[slab * w..(slab + g.heads * g.q_seq) * w];
    }
    Ok(changed)
}

/// A kernel that treats subnormal inputs as zero (DAZ): every nonzero subnormal of the query,
/// key and value tensors (the paged caches for `pa_decode`; the new rows before their write
/// for `pa_decode_int8`) becomes zero of the same sign.
fn subnormal_inputs_flushed(
    _: &serde_json::Value,
    inputs: &mut TensorMap,
) -> Result<bool, OpError> {
    let mut changed = false;
    for name in ["query", "key", "value", "key_cache", "value_cache"] {
        let Some(t) = inputs.get_mut(name) else {
            continue;
        };
        // (sign bit, exponent mask) of the float dtypes with subnormals.
        let (sign, exp): (u32, u32) = match t.dtype {
            ElemType::F16 => (0x8000, 0x7C00),
            ElemType::Bf16 => (0x8000, 0x7F80),
            ElemType::F32 => (0x8000_0000, 0x7F80_0000),
            _ => continue,
        };
        let es = t.dtype.size_bytes();
        for e in t.data.chunks_exact_mut(es) {
            let mut b = [0u8; 4];
            b[..es].copy_from_slice(e);
            let bits = u32::from_le_bytes(b);
            if bits & exp == 0 && bits & !sign != 0 {
                e.copy_from_slice(&(bits & sign).to_le_bytes()[..es]);
                changed = true;
            }
        }
    }
    Ok(changed)
}

fn online(r: &Recipe) -> bool {
    r.algorithm == Algorithm::Online
}

fn low_precision_p(r: &Recipe) -> bool {
    r.p_dtype != DType::F32
}

pub(crate) static FAULTS: &[Fault] = &[
    Fault {
        name: "attn-o-not-rescaled",
        family: "attention",
        ops: ATTENTION,
        requirement: Requirement::Quick,
        description: "the running output O is not multiplied by exp(m_old - m_new) when the running row max rises in a later KV tile",
        edit: Edit::recipe(crate::recipe_edit!(crate::attention::Recipe, |r| {
            if !online(r) || r.o_rescale == ORescale::Skipped {
                return false;
            }
            r.o_rescale = ORescale::Skipped;
            true
        })),
    },
    Fault {
        name: "attn-o-rescale-lagged",
        family: "attention",
        ops: WITH_C8,
        requirement: Requirement::Quick,
        description: "the running output O is rescaled one KV tile late (by the previous tile's exp(m_old - m_new)), the row sum on time: a moderate rise of the running max (moderate_late_max) leaves the earlier tiles over-weighted",
        edit: Edit::recipe(crate::recipe_edit!(crate::attention::Recipe, |r| {
            if !online(r) || r.o_rescale != ORescale::VectorF32 {
                return false;
            }
            r.o_rescale = ORescale::Lagged;
            true
        })),
    },
    Fault {
        name: "attn-running-max-falls",
        family: "attention",
        ops: WITH_C8,
        requirement: Requirement::Quick,
        description: "the running max is replaced by each KV tile's own maximum and O and the row sum are rescaled only when it rises: a later tile below an early maximum (moderate_early_max) is weighted up against the earlier tiles",
        edit: Edit::recipe(crate::recipe_edit!(crate::attention::Recipe, |r| {
            if !online(r) || r.o_rescale != ORescale::VectorF32 {
                return false;
            }
            r.o_rescale = ORescale::TileMaxNotCarried;
            true
        })),
    },
    Fault {
        name: "attn-subnormal-inputs-flushed",
        family: "attention",
        ops: WITH_C8,
        requirement: Requirement::Quick,
        description: "subnormal query, key and value elements are read as zero of the same sign (denormals-are-zero on the inputs): the value columns of subnormal_outputs then give zeros",
        edit: Edit::inputs(subnormal_inputs_flushed),
    },
    Fault {
        name: "attn-pv-accumulated-in-p-dtype",
        family: "attention",
        ops: ATTENTION,
        requirement: Requirement::Quick,
        description: "O is kept in bf16/f16 between KV tiles (P V accumulated at 16 bits) instead of f32",
        edit: Edit::recipe(crate::recipe_edit!(crate::attention::Recipe, |r| {
            // A kernel that holds O in f16 by design (ORescale::VectorF16) is not faulted.
            if !online(r)
                || !low_precision_p(r)
                || matches!(r.o_rescale, ORescale::HeldInPDtype | ORescale::VectorF16)
            {
                return false;
            }
            r.o_rescale = ORescale::HeldInPDtype;
            true
        })),
    },
    Fault {
        name: "attn-causal-diagonal-excluded",
        family: "attention",
        ops: FA,
        requirement: Requirement::Quick,
        description: "the causal mask also hides the diagonal (j < i instead of j <= i)",
        edit: Edit::params(|p| {
            let mode = p.get("sparse_mode").and_then(|v| v.as_u64()).unwrap_or(0);
            let next = match mode {
                3 => -1,
                2 => {
                    let uniform = p.get("actual_seq_lengths").is_none()
                        && p.get("actual_seq_lengths_kv").is_none();
                    match (param_usize(p, "q_seq"), param_usize(p, "kv_seq")) {
                        (Some(q), Some(k)) if uniform => q as i64 - k as i64 - 1,
                        _ => return false,
                    }
                }
                _ => return false,
            };
            p["sparse_mode"] = serde_json::json!(4);
            p["pre_tokens"] = serde_json::json!(i32::MAX);
            p["next_tokens"] = serde_json::json!(next);
            true
        }),
    },
    Fault {
        name: "attn-causal-alignment-swapped",
        family: "attention",
        ops: FA,
        requirement: Requirement::Quick,
        description: "causal masking aligned top-left (j <= i) where bottom-right (j <= i + Lk - Lq) is asked, or the reverse",
        edit: Edit::params(|p| {
            let to = match p.get("sparse_mode").and_then(|v| v.as_u64()) {
                Some(2) => 3,
                Some(3) => 2,
                _ => return false,
            };
            p["sparse_mode"] = serde_json::json!(to);
            true
        }),
    },
    Fault {
        name: "attn-gqa-head-modulo",
        family: "attention",
        ops: ATTENTION,
        requirement: Requirement::Quick,
        description: "GQA query head h reads KV head h % Hkv instead of h / (Hq / Hkv)",
        edit: Edit {
            inputs: Some(permute_query),
            outputs: Some(unpermute_outputs),
            ..Edit::EMPTY
        },
    },
    Fault {
        name: "attn-query-of-batch-0",
        family: "attention",
        ops: ATTENTION,
        requirement: Requirement::Quick,
        description: "the query's batch stride is 0: every batch entry attends with entry 0's query rows",
        edit: Edit {
            inputs: Some(query_of_batch_0),
            ..Edit::EMPTY
        },
    },
    Fault {
        name: "attn-query-strides-swapped",
        family: "attention",
        ops: FA,
        requirement: Requirement::Quick,
        description: "the query read with the sequence and head strides swapped (BSND's token stride taken as S*D, BNSD's head stride as N*D): right only when S == N",
        edit: Edit {
            inputs: Some(query_strides_swapped),
            ..Edit::EMPTY
        },
    },
    Fault {
        name: "pa-cache-strides-swapped",
        family: "paged_attention",
        ops: PA,
        requirement: Requirement::Quick,
        description: "the cache blocks read with the slot and head strides swapped (BnBsH's slot stride taken as block_size*D, BnNBsD's head stride as Hkv*D): right only when block_size == Hkv",
        edit: Edit {
            inputs: Some(cache_strides_swapped),
            ..Edit::EMPTY
        },
    },
    Fault {
        name: "attn-lse-strided-by-actual-length",
        family: "attention",
        ops: FA,
        requirement: Requirement::Quick,
        description: "softmax_lse laid out by each entry's actual query length instead of the padded S: valid rows land on padded positions",
        edit: Edit {
            outputs: Some(lse_strided_by_actual_length),
            ..Edit::EMPTY
        },
    },
    Fault {
        name: "attn-scale-one-over-d",
        family: "attention",
        ops: ATTENTION,
        requirement: Requirement::Quick,
        description: "scores scaled by 1/D instead of the given scale (1/sqrt(D) by default)",
        edit: Edit::params(|p| match param_usize(p, "head_dim") {
            Some(d) => set_scale(p, 1.0 / d as f64),
            None => false,
        }),
    },
    Fault {
        name: "attn-scale-applied-twice",
        family: "attention",
        ops: ATTENTION,
        requirement: Requirement::Quick,
        description: "the softmax scale is applied twice (once folded into Q, once to the scores)",
        edit: Edit::params(|p| match scale_of(p) {
            Some(s) => set_scale(p, s * s),
            None => false,
        }),
    },
    Fault {
        name: "attn-p-rounding-swapped",
        family: "attention",
        ops: WITH_C8,
        requirement: Requirement::Quick,
        description: "P is cast to bf16/f16 before P V with ties away (CAST_ROUND) where the recipe rounds ties to even (CAST_RINT), or the reverse",
        edit: Edit::recipe(crate::recipe_edit!(crate::attention::Recipe, |r| {
            low_precision_p(r) && swap_rounding_ties(&mut r.p_rounding)
        })),
    },
    Fault {
        name: "attn-output-rounding-swapped",
        family: "attention",
        ops: WITH_C8,
        requirement: Requirement::Quick,
        description: "the final cast of O breaks ties the other way (CAST_ROUND vs CAST_RINT)",
        edit: Edit::recipe(crate::recipe_edit!(crate::attention::Recipe, |r| {
            // O already in f16 (the f16 high-performance kernel) makes the cast exact.
            low_precision_p(r)
                && r.o_rescale != ORescale::VectorF16
                && swap_rounding_ties(&mut r.output_rounding)
        })),
    },
    Fault {
        name: "attn-kv-tile-halved",
        family: "attention",
        ops: FA,
        requirement: Requirement::Quick,
        description: "the online softmax visits KV tiles of half the recipe's size (256 keys instead of the prompt kernel's 512)",
        edit: Edit::recipe(crate::recipe_edit!(crate::attention::Recipe, |r| {
            if !online(r) {
                return false;
            }
            match r.kv_tiling {
                KvTiling::Fixed if r.kv_tile >= 2 => r.kv_tile /= 2,
                KvTiling::AscendPfa { tile_divisor } => {
                    r.kv_tiling = KvTiling::AscendPfa {
                        tile_divisor: tile_divisor * 2,
                    }
                }
                _ => return false,
            }
            true
        })),
    },
    Fault {
        name: "attn-f16-rowsum-rounding-swapped",
        family: "attention",
        ops: FA,
        requirement: Requirement::Quick,
        description: "the f16 high-performance kernel casts its f32 row sum to f16 with ties to even (CAST_RINT) where the recipe rounds ties away (CAST_ROUND), or the reverse, before dividing O by it",
        edit: Edit::recipe(crate::recipe_edit!(crate::attention::Recipe, |r| match &mut r.normalize {
            Normalize::DivideF16 { sum_rounding } => swap_rounding_ties(sum_rounding),
            _ => false,
        })),
    },
    Fault {
        name: "attn-rowsum-swapped",
        family: "attention",
        ops: ATTENTION,
        requirement: Requirement::Quick,
        description: "the row sum adds the rounded P where the recipe adds the f32 exp values, or the reverse",
        edit: Edit::recipe(crate::recipe_edit!(crate::attention::Recipe, |r| {
            if !low_precision_p(r) {
                return false;
            }
            r.rowsum_of = match r.rowsum_of {
                RowSumOf::RawP => RowSumOf::RoundedP,
                RowSumOf::RoundedP => RowSumOf::RawP,
            };
            true
        })),
    },
    Fault {
        name: "attn-lse-log2-domain",
        family: "attention",
        ops: ATTENTION,
        requirement: Requirement::Quick,
        description: "softmax_lse returned in the log2 domain (times log2(e)) instead of the natural log",
        edit: Edit::outputs(lse_log2),
    },
    Fault {
        name: "attn-empty-row-policy",
        family: "attention",
        ops: ATTENTION,
        requirement: Requirement::Quick,
        description: "the other empty-row policy: a query row with no allowed key is not special-cased (it gets whatever the arithmetic gives, the mean of V under a -FLT_MAX mask) where the kernel writes 0, and, where the decode kernel (no row-invalid correction) averages V over its masked keys, the row is corrected to 0 with LSE +inf",
        edit: Edit::recipe(crate::recipe_edit!(crate::attention::Recipe, |r| {
            r.empty_row = match r.empty_row {
                EmptyRow::Zero { .. } => EmptyRow::Arithmetic,
                EmptyRow::Arithmetic | EmptyRow::DecodeKernel { .. } => {
                    EmptyRow::Zero { lse: f32::INFINITY }
                }
            };
            true
        })),
    },
    Fault {
        name: "attn-no-max-subtraction",
        family: "attention",
        ops: ATTENTION,
        requirement: Requirement::Quick,
        description: "exp(s) is taken without subtracting the (running) row maximum: rows with a scaled score above ln(f32::MAX) ~ 88.7 overflow to Inf and give NaN outputs and an Inf LSE",
        edit: Edit::outputs(no_max_subtraction),
    },
    Fault {
        name: "attn-lse-wrong-on-empty-rows",
        family: "attention",
        ops: ATTENTION,
        requirement: Requirement::Quick,
        description: "softmax_lse of a valid query row without any allowed key is -Inf (the log of an empty sum) instead of the recipe's empty-row value (+Inf), the output row unchanged",
        edit: Edit::outputs(lse_wrong_on_empty_rows),
    },
    Fault {
        name: "attn-mask-fill-swapped",
        family: "attention",
        ops: ATTENTION,
        requirement: Requirement::Advisory,
        description: "masked scores filled with -inf where the recipe uses -FLT_MAX, or the reverse (visible only on rows without any allowed key)",
        edit: Edit::recipe(crate::recipe_edit!(crate::attention::Recipe, |r| {
            r.mask_fill = match r.mask_fill {
                MaskFill::NegFltMax => MaskFill::NegInf,
                MaskFill::NegInf
                | MaskFill::AdditiveMinus10000
                | MaskFill::SelectMinus1e12
                | MaskFill::SelectF16Lowest => MaskFill::NegFltMax,
            };
            true
        })),
    },
    Fault {
        name: "attn-kv-length-ignored",
        family: "attention",
        ops: FA,
        requirement: Requirement::Quick,
        description: "actual_seq_lengths_kv is ignored: keys past each sequence's length (padding) are attended to",
        edit: Edit::params(|p| {
            if p.get("input_layout").and_then(|v| v.as_str()) == Some("TND") {
                return false;
            }
            p.as_object_mut()
                .and_then(|o| o.remove("actual_seq_lengths_kv"))
                .is_some()
        }),
    },
    Fault {
        name: "pa-last-partial-block-dropped",
        family: "paged_attention",
        ops: PA,
        requirement: Requirement::Quick,
        description: "the last, partly filled cache block of each sequence is not read",
        edit: Edit::params(|p| edit_pa_lengths(p, |l, bs, _| if l > bs { l / bs * bs } else { l })),
    },
    Fault {
        name: "pa-read-one-past-length",
        family: "paged_attention",
        ops: PA,
        requirement: Requirement::Quick,
        description: "one cache slot past the sequence length is read (an off-by-one in the context length)",
        edit: Edit::params(|p| edit_pa_lengths(p, |l, _, cap| (l + 1).min(cap))),
    },
    Fault {
        name: "pa-block-table-off-by-one",
        family: "paged_attention",
        ops: PA,
        requirement: Requirement::Quick,
        description: "every block-table entry is read as the next physical block",
        edit: Edit::inputs(table_off_by_one),
    },
    Fault {
        name: "pa-cache-layout-confused",
        family: "paged_attention",
        ops: PA,
        requirement: Requirement::Quick,
        description: "a BnBsH cache read as BnNBsD, or the reverse",
        edit: Edit::params(|p| {
            let to = match p.get("cache_layout").and_then(|v| v.as_str()) {
                Some("BnNBsD") => KvCacheLayout::BnBsH,
                _ => KvCacheLayout::BnNBsD,
            };
            p["cache_layout"] = serde_json::to_value(to).unwrap_or_default();
            true
        }),
    },
    Fault {
        name: "pa-v2-combine-swapped",
        family: "paged_attention",
        ops: PA,
        requirement: Requirement::Quick,
        description: "the split-KV (vLLM v2) partitions are combined with the other formula (LSE weights vs exp-sum weights)",
        edit: Edit::recipe(crate::recipe_edit!(crate::attention::Recipe, |r| match r.split.as_mut() {
            Some(s) => {
                s.combine = match s.combine {
                    Combine::Lse => Combine::VllmExpSum,
                    Combine::VllmExpSum | Combine::AscendSumMax => Combine::Lse,
                };
                true
            }
            None => false,
        })),
    },
];
