//! Two FP4 codes per byte: nibble order and kernel-specific layouts, as data.
//!
//! A [`PackingLayout`] says where logical element `i` of a flat sequence of FP4 codes is
//! stored. Storage is a sequence of nibble SLOTS: slot `2b` is the first nibble of byte `b`,
//! slot `2b + 1` the second, where "first" is the low nibble under
//! [`NibbleOrder::LowFirst`] (PyTorch `float4_e2m1fn_x2`, ONNX FLOAT4E2M1, vLLM) or the high
//! nibble under [`NibbleOrder::HighFirst`]. On top of that a [`TilePermutation`] maps, within
//! each tile of `T` consecutive logical elements, logical element `i` to slot `perm[i]` of the
//! tile's `T` slots. Kernel layouts are therefore data, not code forks:
//!
//! - [`TilePermutation::Identity`]: element `i` in slot `i`;
//! - [`TilePermutation::SplitHalves`] with `B` bytes per tile (the open-source Ascend soft-FP4
//!   dequant kernel, QingCheng ascend-kernel `dequant_kernels/fp4_to_bf16_custom.cpp`): within
//!   each tile of `2B` elements, the first `B` come from the HIGH nibbles of the tile's `B`
//!   bytes and the next `B` from their LOW nibbles;
//! - [`TilePermutation::Explicit`]: any permutation given as a table.
//!
//! Odd counts (identity layout only) follow the ONNX rule: the last byte's unused second slot
//! (the high nibble under low-first) is zero. Tiled layouts need a count that is a multiple of
//! the tile.

use super::error::DequantError;

/// Which nibble of a byte holds the earlier slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NibbleOrder {
    /// Slot `2b` is the low nibble of byte `b` (PyTorch, ONNX, vLLM, chitu).
    LowFirst,
    /// Slot `2b` is the high nibble of byte `b`.
    HighFirst,
}

/// A permutation of the slots within each tile of logical elements.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TilePermutation {
    /// Element `i` is in slot `i` (tile of 2 elements = one byte).
    Identity,
    /// Tiles of `2 * bytes` elements: element `j < bytes` is the HIGH nibble of the tile's byte
    /// `j`, element `bytes + j` its LOW nibble (independent of the nibble order).
    SplitHalves { bytes: usize },
    /// Tiles of `perm.len()` elements (even); element `i` is in slot `perm[i]`.
    Explicit(Vec<u32>),
}

/// Where each FP4 code of a flat sequence is stored.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct PackingLayout {
    pub nibble_order: NibbleOrder,
    pub permutation: TilePermutation,
}

impl PackingLayout {
    /// Low nibble first, no permutation: PyTorch `float4_e2m1fn_x2`, ONNX, vLLM, chitu.
    pub const LOW_FIRST: PackingLayout = PackingLayout {
        nibble_order: NibbleOrder::LowFirst,
        permutation: TilePermutation::Identity,
    };
    /// High nibble first, no permutation.
    pub const HIGH_FIRST: PackingLayout = PackingLayout {
        nibble_order: NibbleOrder::HighFirst,
        permutation: TilePermutation::Identity,
    };

    /// The "split halves" layout with `bytes` bytes (`2 * bytes` elements) per tile.
    pub fn split_halves(bytes: usize) -> PackingLayout {
        PackingLayout {
            nibble_order: NibbleOrder::LowFirst,
            permutation: TilePermutation::SplitHalves { bytes },
        }
    }

    /// The number of logical elements per tile (2 for the identity layout).
    pub fn tile_len(&self) -> usize {
        match &self.permutation {
            TilePermutation::Identity => 2,
            TilePermutation::SplitHalves { bytes } => 2 * bytes,
            TilePermutation::Explicit(p) => p.len(),
        }
    }

    /// The permutation as a table: `table[i]` is the slot of logical element `i` of a tile.
    /// Errors if the description is not a permutation of an even, non-empty tile.
    pub fn slot_table(&self) -> Result<Vec<u32>, DequantError> {
        let table: Vec<u32> = match &self.permutation {
            TilePermutation::Identity => vec![0, 1],
            TilePermutation::SplitHalves { bytes } => {
                let b = *bytes;
                if b == 0 {
                    return Err(DequantError::InvalidLayout {
                        param: "split_halves.bytes",
                        reason: "must be at least 1".into(),
                    });
                }
                let (hi, lo) = match self.nibble_order {
                    NibbleOrder::LowFirst => (1, 0),
                    NibbleOrder::HighFirst => (0, 1),
                };
                (0..b)
                    .map(|j| (2 * j + hi) as u32)
                    .chain((0..b).map(|j| (2 * j + lo) as u32))
                    .collect()
            }
            TilePermutation::Explicit(p) => p.clone(),
        };
        if table.is_empty() || !table.len().is_multiple_of(2) {
            return Err(DequantError::InvalidLayout {
                param: "permutation",
                reason: format!("tile length {} is not a positive even number", table.len()),
            });
        }
        let mut seen = vec![false; table.len()];
        for (i, &s) in table.iter().enumerate() {
            let s = s as usize;
            if s >= table.len() || seen[s] {
                return Err(DequantError::InvalidLayout {
                    param: "permutation",
                    reason: format!("entry {i} (slot {s}) is out of range or repeated"),
                });
            }
            seen[s] = true;
        }
        Ok(table)
    }

    /// Whether slot `s` (within its byte) is the byte's high nibble.
    #[inline(always)]
    pub(crate) fn slot_is_high(&self, slot: usize) -> bool {
        (slot % 2 == 1) == (self.nibble_order == NibbleOrder::LowFirst)
    }
}

/// The number of bytes that `count` packed FP4 codes occupy (ONNX: `ceil(count / 2)`).
pub fn packed_len(count: usize) -> usize {
    count / 2 + count % 2
}

fn check_count(layout: &PackingLayout, count: usize) -> Result<Vec<u32>, DequantError> {
    let table = layout.slot_table()?;
    if layout.permutation != TilePermutation::Identity && !count.is_multiple_of(table.len()) {
        return Err(DequantError::NotMultiple {
            param: "count",
            value: count,
            multiple_of: table.len(),
            what: "layout tile length",
        });
    }
    Ok(table)
}

/// Packs one 4-bit code per byte (`codes[i] < 16`) into `ceil(len / 2)` bytes under `layout`.
pub fn pack(codes: &[u8], layout: &PackingLayout) -> Result<Vec<u8>, DequantError> {
    let table = check_count(layout, codes.len())?;
    let tile = table.len();
    let mut out = vec![0u8; packed_len(codes.len())];
    for (i, &c) in codes.iter().enumerate() {
        if c > 0xF {
            return Err(DequantError::CodeOutOfRange {
                param: "codes",
                index: i,
                value: c,
            });
        }
        let slot = (i / tile) * tile + table[i % tile] as usize;
        let shift = if layout.slot_is_high(slot) { 4 } else { 0 };
        out[slot / 2] |= c << shift;
    }
    Ok(out)
}

/// Unpacks `count` codes (one per byte, in the low nibble) from `packed` under `layout`.
/// `packed` must be exactly `ceil(count / 2)` bytes; an odd count's padding nibble is ignored.
pub fn unpack(
    packed: &[u8],
    count: usize,
    layout: &PackingLayout,
) -> Result<Vec<u8>, DequantError> {
    let table = check_count(layout, count)?;
    super::error::expect_len("packed", packed_len(count), packed.len())?;
    Ok((0..count)
        .map(|i| {
            crate::cancel::checkpoint_every(i);
            code_at(packed, i, &table, layout)
        })
        .collect())
}

/// The code of logical element `i` in a buffer packed with `layout`, given its slot table.
#[inline(always)]
pub(crate) fn code_at(packed: &[u8], i: usize, table: &[u32], layout: &PackingLayout) -> u8 {
    let tile = table.len();
    let slot = (i / tile) * tile + table[i % tile] as usize;
    let byte = packed[slot / 2];
    if layout.slot_is_high(slot) {
        byte >> 4
    } else {
        byte & 0xF
    }
}
