//! Faults of the paged KV cache update (`paged_kv`): slot mapping, padding and layout.

use crate::ops::fault::tensors::{copy_row, get_mut, ints, set_ints};
use crate::ops::fault::{Edit, Fault, Requirement};
use crate::ops::{OpError, TensorMap};

const KV: &[&str] = &["paged_kv"];
const OP: &str = "paged_kv";

/// Cache slots and the elements of one row, from the key rows `[t, n, d]` and the key cache.
fn slots_and_row(inputs: &TensorMap) -> Result<(usize, usize), OpError> {
    let key = inputs.get("key").ok_or(OpError::MissingInput {
        op: OP.into(),
        input: "key".into(),
    })?;
    let cache = inputs.get("key_cache_in").ok_or(OpError::MissingInput {
        op: OP.into(),
        input: "key_cache_in".into(),
    })?;
    let row: usize = key.shape.iter().skip(1).product();
    Ok((cache.numel() / row.max(1), row))
}

fn slot_off_by_one(_: &serde_json::Value, inputs: &mut TensorMap) -> Result<bool, OpError> {
    let (slots, _) = slots_and_row(inputs)?;
    let t = get_mut(OP, inputs, "slot_mapping")?;
    let v = ints(OP, "slot_mapping", t)?;
    if !v.iter().any(|&s| s >= 0) || slots < 2 {
        return Ok(false);
    }
    let shifted: Vec<i64> = v
        .iter()
        .map(|&s| if s >= 0 { (s + 1) % slots as i64 } else { s })
        .collect();
    set_ints(t, &shifted);
    Ok(true)
}

/// The last padding token's row is written to the highest slot no other token writes (where
/// a kernel indexing with -1 lands).
fn padding_written(_: &serde_json::Value, inputs: &mut TensorMap) -> Result<bool, OpError> {
    let (slots, _) = slots_and_row(inputs)?;
    let t = get_mut(OP, inputs, "slot_mapping")?;
    let mut v = ints(OP, "slot_mapping", t)?;
    let Some(last_pad) = v.iter().rposition(|&s| s < 0) else {
        return Ok(false);
    };
    let Some(free) = (0..slots as i64).rev().find(|s| !v.contains(s)) else {
        return Ok(false);
    };
    v[last_pad] = free;
    set_ints(t, &v);
    Ok(true)
}

fn swap_k_v(
    _: &serde_json::Value,
    _: &TensorMap,
    outputs: &mut TensorMap,
) -> Result<bool, OpError> {
    let (Some(k), Some(v)) = (outputs.get("key_cache_out"), outputs.get("value_cache_out")) else {
        return Ok(false);
    };
    if k.shape != v.shape || k == v {
        return Ok(false);
    }
    let (k, v) = (k.clone(), v.clone());
    outputs.insert("key_cache_out".into(), v);
    outputs.insert("value_cache_out".into(), k);
    Ok(true)
}

/// The row of token 0 written to the cache twice: the last written slot gets it too (a
/// kernel whose token index does not advance for the last token).
fn last_token_repeats_first(
    _: &serde_json::Value,
    inputs: &TensorMap,
    outputs: &mut TensorMap,
) -> Result<bool, OpError> {
    let (_, row) = slots_and_row(inputs)?;
    let slots = ints(
        OP,
        "slot_mapping",
        inputs.get("slot_mapping").ok_or(OpError::MissingInput {
            op: OP.into(),
            input: "slot_mapping".into(),
        })?,
    )?;
    let written: Vec<(usize, i64)> = slots
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, s)| s >= 0)
        .collect();
    if written.len() < 2 {
        return Ok(false);
    }
    // Only row-contiguous layouts hold a token's row as one run.
    for (rows, out) in [("key", "key_cache_out"), ("value", "value_cache_out")] {
        let src = inputs.get(rows).cloned().ok_or(OpError::MissingInput {
            op: OP.into(),
            input: rows.into(),
        })?;
        let o = get_mut(OP, outputs, out)?;
        if o.shape.len() != 3 {
            return Ok(false);
        }
        let (first, last) = (written[0], written[written.len() - 1]);
        copy_row(&src, first.0, o, last.1 as usize, row);
    }
    Ok(true)
}

pub(crate) static FAULTS: &[Fault] = &[
    Fault {
        name: "kv-slot-off-by-one",
        family: "paged_kv",
        ops: KV,
        requirement: Requirement::Quick,
        description: "every token is written one slot after its slot_mapping entry",
        edit: Edit::inputs(slot_off_by_one),
    },
    Fault {
        name: "kv-padding-slot-written",
        family: "paged_kv",
        ops: KV,
        requirement: Requirement::Quick,
        description: "a padding token (slot -1) is written into the cache instead of skipped",
        edit: Edit::inputs(padding_written),
    },
    Fault {
        name: "kv-layout-swapped",
        family: "paged_kv",
        ops: KV,
        requirement: Requirement::Quick,
        description: "the cache written in the other Ascend layout (BnBsH vs BnNBsD; vLLM's as BnNBsD)",
        edit: Edit::params(|p| {
            let to = match p.get("layout").and_then(|v| v.as_str()) {
                Some("BnNBsD") => "BnBsH",
                Some(_) => "BnNBsD",
                None => return false,
            };
            p["layout"] = serde_json::json!(to);
            true
        }),
    },
    Fault {
        name: "kv-key-value-swapped",
        family: "paged_kv",
        ops: KV,
        requirement: Requirement::Quick,
        description: "the key rows written into the value cache and the value rows into the key cache",
        edit: Edit::outputs(swap_k_v),
    },
    Fault {
        name: "kv-last-token-repeats-first",
        family: "paged_kv",
        ops: KV,
        requirement: Requirement::Quick,
        description: "the last token's slot receives the first token's row (a token index that does not advance)",
        edit: Edit::outputs(last_token_repeats_first),
    },
];
