//! Reshape-and-cache: write new K (or V) rows into cache slots given a slot mapping.
//!
//! `rows` is `[num_tokens, kv_heads, head_dim]` (row-major); `slot_mapping[t]` is the slot of
//! token `t`: `slot = block * block_size + offset`. A negative slot is padding and its row is
//! skipped (vLLM's `PAD_SLOT_ID = -1`; any negative value is accepted). Elements are moved, never
//! converted, so the function is generic over any `Copy` element: `u16` bit patterns move a
//! bf16/f16 cache bitwise (NaN payloads included).
//!
//! The whole input is validated before the first write: on error the cache is unchanged.

use super::error::KvError;
use super::layout::{CacheGeometry, KvCacheLayout};

/// Writes `rows` into `cache` at the slots of `slot_mapping`; returns how many rows were
/// written (the non-negative entries).
///
/// Errors: the cache buffer does not fit `layout`/`g` ([`KvError::Layout`]); `rows` is not
/// `slot_mapping.len() * kv_heads * head_dim` long ([`KvError::WrongLength`] naming `rows`); a
/// slot is `>= num_blocks * block_size` ([`KvError::SlotOutOfRange`]); two tokens map to the same
/// slot ([`KvError::DuplicateSlot`]).
pub fn scatter<T: Copy>(
    layout: KvCacheLayout,
    g: &CacheGeometry,
    cache: &mut [T],
    rows: &[T],
    slot_mapping: &[i64],
) -> Result<usize, KvError> {
    let valid = validate_slot_mapping(layout, g, cache.len(), rows.len(), slot_mapping)?;
    let row_len = g.row_len();
    let contiguous = layout.rows_contiguous();
    for &(slot, token) in &valid {
        let slot = slot as usize;
        let (block, offset) = (slot / g.block_size, slot % g.block_size);
        let row = &rows[token * row_len..(token + 1) * row_len];
        for head in 0..g.kv_heads {
            let src = &row[head * g.head_dim..(head + 1) * g.head_dim];
            if contiguous {
                let start = layout.offset(g, block, offset, head, 0);
                cache[start..start + g.head_dim].copy_from_slice(src);
            } else {
                for (d, &v) in src.iter().enumerate() {
                    cache[layout.offset(g, block, offset, head, d)] = v;
                }
            }
        }
    }
    Ok(valid.len())
}

/// Checks a scatter's arguments; returns the valid `(slot, token)` pairs sorted by slot.
fn validate_slot_mapping(
    layout: KvCacheLayout,
    g: &CacheGeometry,
    cache_len: usize,
    rows_len: usize,
    slot_mapping: &[i64],
) -> Result<Vec<(i64, usize)>, KvError> {
    layout.validate_buffer(g, cache_len)?;
    let expected = slot_mapping
        .len()
        .checked_mul(g.row_len())
        .ok_or(KvError::WrongLength {
            name: "rows",
            expected: usize::MAX,
            actual: rows_len,
        })?;
    if rows_len != expected {
        return Err(KvError::WrongLength {
            name: "rows",
            expected,
            actual: rows_len,
        });
    }
    let num_slots = g.num_slots();
    let mut valid = Vec::with_capacity(slot_mapping.len());
    for (token, &slot) in slot_mapping.iter().enumerate() {
        if slot < 0 {
            continue;
        }
        if slot as u64 >= num_slots as u64 {
            return Err(KvError::SlotOutOfRange {
                token,
                slot,
                num_slots,
            });
        }
        valid.push((slot, token));
    }
    valid.sort_unstable();
    for w in valid.windows(2) {
        if w[0].0 == w[1].0 {
            return Err(KvError::DuplicateSlot {
                slot: w[0].0,
                first: w[0].1,
                second: w[1].1,
            });
        }
    }
    Ok(valid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_one_row_where_the_layout_says() {
        let g = CacheGeometry {
            num_blocks: 2,
            block_size: 4,
            kv_heads: 2,
            head_dim: 8,
        };
        for layout in KvCacheLayout::all(2) {
            let mut cache = vec![0u16; g.len()];
            let rows: Vec<u16> = (1..=16).collect();
            assert_eq!(scatter(layout, &g, &mut cache, &rows, &[6]), Ok(1));
            for h in 0..2 {
                for d in 0..8 {
                    assert_eq!(cache[layout.offset(&g, 1, 2, h, d)], (h * 8 + d + 1) as u16);
                }
            }
            assert_eq!(cache.iter().filter(|&&v| v != 0).count(), 16);
        }
    }
}
