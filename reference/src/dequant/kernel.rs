//! The table-driven dequantisation kernel shared by MXFP4 and NVFP4.
//!
//! Every output element is `value(code, scale_code)` for its FP4 code and its group's 8-bit
//! scale code, where `value` is the format's element semantics (`mxfp4::element`,
//! `nvfp4::element`). With at most 256 scale codes and 16 FP4 codes, the kernel evaluates
//! `value` once per (used scale code, code) pair into a table, and for the plain nibble orders
//! also a 256-entry table per used scale code that maps a whole packed byte to its two 16-bit
//! outputs. The tables are a cache of `value`, so the output is exactly the element semantics.
//!
//! Work is split into fixed chunks of whole groups and whole layout tiles (independent of the
//! thread count) written in place, so the result is bitwise identical for any thread count.

use super::error::{checked_mul, expect_len, DequantError};
use super::packing::{code_at, TilePermutation};
use super::recipe::Fp4DequantRecipe;
use crate::parallel::{fill_chunks, Threads};

/// Target number of output elements per parallel chunk (rounded up to whole groups and tiles).
const CHUNK_ELEMENTS: usize = 1 << 16;

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Checks the shapes of a `[n, k]` packed tensor with one scale code per group, and returns the
/// element count.
pub(crate) fn check_shapes(
    packed_len: usize,
    scales_len: usize,
    scales_param: &'static str,
    n: usize,
    k: usize,
    recipe: &Fp4DequantRecipe,
) -> Result<usize, DequantError> {
    recipe.validate()?;
    let group = recipe.group_size;
    if k % group != 0 {
        return Err(DequantError::NotMultiple {
            param: "k",
            value: k,
            multiple_of: group,
            what: "group size",
        });
    }
    let tile = recipe.layout.tile_len();
    if recipe.layout.permutation != TilePermutation::Identity && k % tile != 0 {
        return Err(DequantError::NotMultiple {
            param: "k",
            value: k,
            multiple_of: tile,
            what: "layout tile length",
        });
    }
    let count = checked_mul(n, k, "n * k")?;
    expect_len("packed", count / 2, packed_len)?;
    expect_len(scales_param, n * (k / group), scales_len)?;
    Ok(count)
}

/// Dequantises `packed` (`[n, k]` FP4 codes under `recipe.layout`) with one scale code per
/// group (`scale_codes`, `[n, k / group]` row-major) into `out` (`[n, k]`).
/// Shapes must have been checked with [`check_shapes`].
pub(crate) fn dequantize_table_driven<F>(
    packed: &[u8],
    scale_codes: &[u8],
    recipe: &Fp4DequantRecipe,
    value: F,
    out: &mut [u16],
    threads: Threads,
) -> Result<(), DequantError>
where
    F: Fn(u8, u8) -> u16,
{
    let group = recipe.group_size;
    let slots = recipe.layout.slot_table()?;
    let tile = slots.len();
    let count = out.len();
    // Which scale codes occur; evaluate the element semantics only for those.
    let mut used = [false; 256];
    for &s in scale_codes {
        used[s as usize] = true;
    }
    let mut nibble = vec![[0u16; 16]; 256];
    for (s, row) in nibble.iter_mut().enumerate() {
        if used[s] {
            for (c, v) in row.iter_mut().enumerate() {
                *v = value(c as u8, s as u8);
            }
        }
    }
    let lcm = group / gcd(group, tile) * tile;
    let chunk = CHUNK_ELEMENTS.div_ceil(lcm) * lcm;
    match recipe.layout.permutation {
        TilePermutation::Identity => {
            // Byte -> (first slot output, second slot output) as one u32 per used scale code.
            let first_is_high = recipe.layout.slot_is_high(0);
            let mut pair = vec![0u32; 256 * 256];
            for s in 0..256 {
                if !used[s] {
                    continue;
                }
                for b in 0..256usize {
                    let (first, second) = if first_is_high {
                        (b >> 4, b & 0xF)
                    } else {
                        (b & 0xF, b >> 4)
                    };
                    pair[s * 256 + b] =
                        nibble[s][first] as u32 | ((nibble[s][second] as u32) << 16);
                }
            }
            let group_bytes = group / 2;
            fill_chunks(out, chunk, threads, |ci, out_chunk| {
                let first_group = ci * chunk / group;
                for (gi, out_group) in out_chunk.chunks_exact_mut(group).enumerate() {
                    let g = first_group + gi;
                    let s = scale_codes[g] as usize;
                    let table: &[u32; 256] = pair[s * 256..s * 256 + 256]
                        .try_into()
                        .expect("a 256-entry slice");
                    let bytes = &packed[g * group_bytes..(g + 1) * group_bytes];
                    for (o, &b) in out_group.chunks_exact_mut(2).zip(bytes) {
                        let v = table[b as usize];
                        o[0] = v as u16;
                        o[1] = (v >> 16) as u16;
                    }
                }
            });
        }
        _ => {
            let layout = &recipe.layout;
            fill_chunks(out, chunk, threads, |ci, out_chunk| {
                let start = ci * chunk;
                for (j, o) in out_chunk.iter_mut().enumerate() {
                    let i = start + j;
                    let code = code_at(packed, i, &slots, layout);
                    *o = nibble[scale_codes[i / group] as usize][code as usize];
                }
            });
        }
    }
    debug_assert_eq!(count % tile, 0);
    Ok(())
}
