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
    if !k.is_multiple_of(group) {
        return Err(DequantError::NotMultiple {
            param: "k",
            value: k,
            multiple_of: group,
            what: "group size",
        });
    }
    let tile = recipe.layout.tile_len();
    if recipe.layout.permutation != TilePermutation::Identity && !k.is_multiple_of(tile) {
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
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(unit) = simd::units_for(recipe)
            && crate::cpu::ssse3()
        {
            let tables = simd::Tables::new(&nibble);
            fill_chunks(out, chunk, threads, |ci, out_chunk| {
                // SAFETY: the callee's only requirement is SSSE3, which `crate::cpu::ssse3`
                // detected at run time just above (CONFORM_NO_SIMD only makes it answer
                // false); its memory accesses are checked inside.
                unsafe {
                    simd::dequantize_chunk(
                        packed,
                        scale_codes,
                        group,
                        &unit,
                        &tables,
                        ci * chunk,
                        out_chunk,
                    )
                }
            });
            return Ok(());
        }
    }
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

/// SSSE3 path: 16 outputs at a time with two byte shuffles (the low and high bytes of the 16
/// possible 16-bit outputs of the unit's scale code), for the identity layouts and split
/// halves with tiles of whole 16-byte runs, and group sizes that are multiples of 16. It reads
/// the same tables as the portable paths, so its results are the same bits (the bulk tests
/// compare every path with the element semantics).
#[cfg(target_arch = "x86_64")]
mod simd {
    use super::super::packing::{NibbleOrder, TilePermutation};
    use super::super::recipe::Fp4DequantRecipe;
    use std::arch::x86_64::*;

    /// How a run of 16 consecutive outputs maps to packed bytes.
    pub(super) enum Unit {
        /// 8 bytes, each giving two consecutive outputs (low nibble first if `low_first`).
        Interleaved { low_first: bool },
        /// Split halves with `bytes` bytes per tile: 16 bytes give 16 outputs of one nibble.
        Split { bytes: usize },
    }

    pub(super) fn units_for(recipe: &Fp4DequantRecipe) -> Option<Unit> {
        if !recipe.group_size.is_multiple_of(16) {
            return None;
        }
        match recipe.layout.permutation {
            TilePermutation::Identity => Some(Unit::Interleaved {
                low_first: recipe.layout.nibble_order == NibbleOrder::LowFirst,
            }),
            TilePermutation::SplitHalves { bytes } if bytes % 16 == 0 => {
                Some(Unit::Split { bytes })
            }
            _ => None,
        }
    }

    /// Per scale code: the low bytes and the high bytes of the 16 outputs.
    pub(super) struct Tables(Vec<[[u8; 16]; 2]>);

    impl Tables {
        pub(super) fn new(nibble: &[[u16; 16]]) -> Tables {
            Tables(
                nibble
                    .iter()
                    .map(|row| {
                        let mut t = [[0u8; 16]; 2];
                        for (c, &v) in row.iter().enumerate() {
                            t[0][c] = v as u8;
                            t[1][c] = (v >> 8) as u8;
                        }
                        t
                    })
                    .collect(),
            )
        }
    }

    /// Fills `out` (elements `start..start + out.len()`, whole groups and whole tiles).
    /// Compiled with SSSE3 enabled (the caller checks the CPU); the raw loads and stores go
    /// through fixed-size arrays taken from checked slices.
    #[target_feature(enable = "ssse3")]
    pub(super) fn dequantize_chunk(
        packed: &[u8],
        scale_codes: &[u8],
        group: usize,
        unit: &Unit,
        tables: &Tables,
        start: usize,
        out: &mut [u16],
    ) {
        let mask = _mm_set1_epi8(0x0F);
        let units_per_group = group / 16;
        // Outputs are produced in increasing element order, 16 at a time; the group index
        // advances every `units_per_group` units (no division in the loop).
        let mut g = start / group;
        let mut in_group = 0;
        let mut emit = |idx: __m128i, out16: &mut [u16]| {
            let t: &[[u8; 16]; 2] = &tables.0[scale_codes[g] as usize];
            // SAFETY: t[0] and t[1] are [u8; 16]: each unaligned 16-byte load reads exactly
            // one array.
            let (tlo, thi) = unsafe {
                (
                    _mm_loadu_si128(t[0].as_ptr() as *const __m128i),
                    _mm_loadu_si128(t[1].as_ptr() as *const __m128i),
                )
            };
            let lo = _mm_shuffle_epi8(tlo, idx);
            let hi = _mm_shuffle_epi8(thi, idx);
            let out16: &mut [u16; 16] = out16.try_into().expect("16 outputs");
            let dst = out16.as_mut_ptr() as *mut __m128i;
            // SAFETY: out16 is [u16; 16], 32 bytes: the unaligned 16-byte stores at dst and
            // dst + 1 (16 bytes on) write exactly its two halves.
            unsafe {
                _mm_storeu_si128(dst, _mm_unpacklo_epi8(lo, hi));
                _mm_storeu_si128(dst.add(1), _mm_unpackhi_epi8(lo, hi));
            }
            in_group += 1;
            if in_group == units_per_group {
                in_group = 0;
                g += 1;
            }
        };
        match *unit {
            Unit::Interleaved { low_first } => {
                let src = &packed[start / 2..start / 2 + out.len() / 2];
                for (bytes8, out16) in src.chunks_exact(8).zip(out.chunks_exact_mut(16)) {
                    let bytes8: &[u8; 8] = bytes8.try_into().expect("8 bytes");
                    // SAFETY: bytes8 is [u8; 8] and _mm_loadl_epi64 reads 8 bytes (unaligned).
                    let b = unsafe { _mm_loadl_epi64(bytes8.as_ptr() as *const __m128i) };
                    let lo = _mm_and_si128(b, mask);
                    let hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
                    let idx = if low_first {
                        _mm_unpacklo_epi8(lo, hi)
                    } else {
                        _mm_unpacklo_epi8(hi, lo)
                    };
                    emit(idx, out16);
                }
            }
            Unit::Split { bytes } => {
                let src = &packed[start / 2..start / 2 + out.len() / 2];
                for (tile_bytes, tile_out) in
                    src.chunks_exact(bytes).zip(out.chunks_exact_mut(2 * bytes))
                {
                    let (first_half, second_half) = tile_out.split_at_mut(bytes);
                    for (high, half) in [(true, first_half), (false, second_half)] {
                        for (b16, out16) in
                            tile_bytes.chunks_exact(16).zip(half.chunks_exact_mut(16))
                        {
                            let b16: &[u8; 16] = b16.try_into().expect("16 bytes");
                            // SAFETY: b16 is [u8; 16]: the unaligned 16-byte load reads it.
                            let b = unsafe { _mm_loadu_si128(b16.as_ptr() as *const __m128i) };
                            let idx = if high {
                                _mm_and_si128(_mm_srli_epi16(b, 4), mask)
                            } else {
                                _mm_and_si128(b, mask)
                            };
                            emit(idx, out16);
                        }
                    }
                }
            }
        }
    }
}
