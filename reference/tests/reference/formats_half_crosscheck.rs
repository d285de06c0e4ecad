//! The reference's round-to-nearest-even f32 -> bf16 / f32 -> f16 conversions and its bf16/f16
//! -> f32 widenings against the `half` crate, an implementation written independently (its f16
//! path uses the CPU's F16C instructions where present, so that half is checked against
//! hardware).
//!
//! Quick tier: a strided subset of all f32 inputs, every bf16 and f16 rounding tie with its
//! neighbours, and the special values; all 65536 codes of each widening. Full tier
//! (`-- --ignored`): every one of the 2^32 f32 inputs.
//!
//! Where the two differ they differ on purpose, only on NaNs, and the tests assert the
//! difference exactly:
//! - narrowing: the reference writes the canonical quiet NaN with the input's sign
//!   (`NanPolicy::CanonicalQuiet`: bf16 `0x7FC0`, f16 `0x7E00`); `half` keeps the top payload
//!   bits and sets the quiet bit;
//! - widening: the reference keeps every bit of a NaN code (a signalling NaN stays signalling);
//!   `half` sets the quiet bit.

use conform_reference::formats::bf16::{bf16_to_f32, f32_to_bf16};
use conform_reference::formats::f16::{f16_to_f32, f32_to_f16};
use conform_reference::formats::Rounding;
use conform_reference::parallel::{map_tasks, Threads};
use half::{bf16, f16};
use std::time::Instant;

fn is_nan(bits: u32) -> bool {
    bits & 0x7FFF_FFFF > 0x7F80_0000
}

fn sign16(bits: u32) -> u16 {
    ((bits >> 16) & 0x8000) as u16
}

/// The reference's NaN policy under `Rounding::RNE`: the canonical quiet NaN, sign kept.
fn reference_bf16_nan(bits: u32) -> u16 {
    sign16(bits) | 0x7FC0
}

fn reference_f16_nan(bits: u32) -> u16 {
    sign16(bits) | 0x7E00
}

/// `half`'s NaN rule: sign and top payload bits kept, quiet bit set.
fn half_bf16_nan(bits: u32) -> u16 {
    ((bits >> 16) | 0x0040) as u16
}

fn half_f16_nan(bits: u32) -> u16 {
    sign16(bits) | 0x7E00 | ((bits >> 13) & 0x3FF) as u16
}

/// Compares both conversions of one input; returns a description of the first disagreement
/// that the documented NaN rules do not explain.
fn check_one(bits: u32) -> Option<String> {
    let x = f32::from_bits(bits);
    let pairs = [
        (
            "bf16",
            f32_to_bf16(x, Rounding::RNE),
            bf16::from_f32(x).to_bits(),
            reference_bf16_nan(bits),
            half_bf16_nan(bits),
        ),
        (
            "f16",
            f32_to_f16(x, Rounding::RNE),
            f16::from_f32(x).to_bits(),
            reference_f16_nan(bits),
            half_f16_nan(bits),
        ),
    ];
    for (name, ours, theirs, our_nan, their_nan) in pairs {
        let ok = if is_nan(bits) {
            ours == our_nan && theirs == their_nan
        } else {
            ours == theirs
        };
        if !ok {
            return Some(format!(
                "{name} of {bits:#010x}: reference {ours:#06x}, half {theirs:#06x}"
            ));
        }
    }
    None
}

/// Checks every input of `inputs`; panics with the count and the first disagreement.
fn check_all(what: &str, inputs: impl Iterator<Item = u32>) {
    let mut bad = 0u64;
    let mut first = None;
    let mut n = 0u64;
    for bits in inputs {
        n += 1;
        if let Some(m) = check_one(bits) {
            bad += 1;
            first.get_or_insert(m);
        }
    }
    assert!(n > 0, "{what}: no inputs");
    assert_eq!(bad, 0, "{what}: {bad} of {n} disagree; first: {first:?}");
}

/// Every `stride`-th f32 input from 0 (stride 1: all 2^32), in 256 fixed chunks combined in
/// order so the report does not depend on the thread count.
fn sweep(stride: u64) {
    const TASKS: u64 = 256;
    const PER_TASK: u64 = (1u64 << 32) / TASKS;
    let start = Instant::now();
    let results = map_tasks(TASKS as usize, Threads::available(), |task| {
        let base = task as u64 * PER_TASK;
        let (mut bad, mut first) = (0u64, None);
        let mut i = 0;
        while i < PER_TASK {
            if let Some(m) = check_one((base + i) as u32) {
                bad += 1;
                first.get_or_insert(m);
            }
            i += stride;
        }
        (bad, first)
    });
    let bad: u64 = results.iter().map(|r| r.0).sum();
    let first = results.into_iter().find_map(|r| r.1);
    eprintln!(
        "f32 -> bf16/f16 RNE vs half: {} inputs (stride {stride}) in {:.2?}",
        (1u64 << 32) / stride,
        start.elapsed()
    );
    assert_eq!(bad, 0, "{bad} inputs disagree; first: {first:?}");
}

/// An odd stride visits every exponent and low-bit pattern: ~1M inputs in release.
const QUICK_STRIDE: u64 = if cfg!(debug_assertions) {
    65_521
} else {
    4_093
};

#[test]
fn f32_to_bf16_and_f16_rne_match_half_on_a_stride_of_all_f32() {
    sweep(QUICK_STRIDE);
}

#[test]
#[ignore = "full tier: all 2^32 inputs, about a minute in release on 2 cores"]
fn f32_to_bf16_and_f16_rne_match_half_for_every_f32() {
    sweep(1);
}

/// Zeros, subnormals, the normal and overflow boundaries of f32, bf16 and f16, infinities, and
/// quiet and signalling NaNs of both signs with assorted payloads.
const SPECIALS: [u32; 34] = [
    0x0000_0000, // +0
    0x8000_0000, // -0
    0x0000_0001, // smallest f32 subnormal
    0x8000_0001,
    0x0000_8000, // bf16 tie between 0 and the smallest bf16 subnormal: to 0
    0x0001_8000, // bf16 tie between subnormal codes 1 and 2: to 2
    0x007F_FFFF, // largest f32 subnormal: rounds to the smallest bf16 normal
    0x0080_0000, // smallest f32 normal
    0x7F7F_7FFF, // just below the bf16 overflow tie
    0x7F7F_8000, // bf16 overflow tie (0x7F7F is odd): to infinity
    0x7F7F_FFFF, // largest f32
    0xFF7F_FFFF,
    0x7F80_0000, // +inf
    0xFF80_0000, // -inf
    0x7F80_0001, // signalling NaN, smallest payload
    0x7F80_2000, // signalling NaN whose payload reaches the f16 fraction
    0x7FA0_0000, // signalling NaN, payload in the bf16 fraction
    0x7FBF_FFFF, // signalling NaN, largest payload
    0xFF80_0001, // negative signalling NaN
    0x7FC0_0000, // canonical quiet NaN: both agree exactly
    0xFFC0_0000,
    0x7FC0_0001, // quiet NaN with a payload below bf16 and f16
    0x7FFF_FFFF, // quiet NaN, all payload bits set
    0xFFFF_FFFF,
    0x477F_E000, // 65504, the largest f16
    0x477F_EFFF, // just below the f16 overflow tie
    0x477F_F000, // 65520: the f16 overflow tie (0x7BFF is odd): to infinity
    0x3380_0000, // 2^-24, the smallest f16 subnormal
    0x3300_0000, // 2^-25: tie between 0 and 2^-24, to 0
    0x3300_0001, // just above it: to 2^-24
    0x33C0_0000, // 3 * 2^-25: tie between codes 1 and 2, to 2
    0x3880_0000, // 2^-14, the smallest f16 normal
    0x387F_F000, // tie between the largest f16 subnormal and 2^-14: to 2^-14
    0x387F_E000, // the largest f16 subnormal
];

#[test]
fn special_values_match_half_or_its_documented_nan_difference() {
    check_all("specials", SPECIALS.into_iter());
    // The NaN difference, spelled out on two inputs: a quiet NaN with every payload bit set
    // keeps its payload in half and becomes canonical in the reference; the canonical quiet
    // NaN is the same in both.
    let all_payload = f32::from_bits(0x7FFF_FFFF);
    assert_eq!(f32_to_bf16(all_payload, Rounding::RNE), 0x7FC0);
    assert_eq!(bf16::from_f32(all_payload).to_bits(), 0x7FFF);
    assert_eq!(f32_to_f16(all_payload, Rounding::RNE), 0x7E00);
    assert_eq!(f16::from_f32(all_payload).to_bits(), 0x7FFF);
    let canonical = f32::from_bits(0xFFC0_0000);
    assert_eq!(f32_to_bf16(canonical, Rounding::RNE), 0xFFC0);
    assert_eq!(bf16::from_f32(canonical).to_bits(), 0xFFC0);
    assert_eq!(f32_to_f16(canonical, Rounding::RNE), 0xFE00);
    assert_eq!(f16::from_f32(canonical).to_bits(), 0xFE00);
    // And the ties, on values both must agree on.
    assert_eq!(
        f32_to_bf16(f32::from_bits(0x7F7F_8000), Rounding::RNE),
        0x7F80
    );
    assert_eq!(
        f32_to_f16(f32::from_bits(0x477F_F000), Rounding::RNE),
        0x7C00
    );
    assert_eq!(
        f32_to_f16(f32::from_bits(0x33C0_0000), Rounding::RNE),
        0x0002
    );
}

/// Every bf16 tie (low half 0x8000) with its neighbours, and the exact codes, for all 65536
/// upper halves: every sign, exponent and bf16 code, NaNs included.
#[test]
fn every_bf16_rounding_tie_matches_half() {
    let lows = [0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF];
    check_all(
        "bf16 ties",
        (0..=0xFFFFu32).flat_map(|hi| lows.iter().map(move |lo| (hi << 16) | lo)),
    );
}

/// Every f16 tie (the midpoint between two adjacent finite f16 values, exact in f32) with its
/// f32 neighbours, both signs; the midpoint above 65504 is 65520, the overflow tie.
#[test]
fn every_f16_rounding_tie_matches_half() {
    let midpoints: Vec<f32> = (0..0x7C00u16)
        .map(|c| {
            let lo = f16::from_bits(c).to_f32() as f64;
            let hi = if c == 0x7BFF {
                65536.0
            } else {
                f16::from_bits(c + 1).to_f32() as f64
            };
            ((lo + hi) / 2.0) as f32
        })
        .collect();
    assert_eq!(midpoints[0], 2f32.powi(-25));
    assert_eq!(midpoints[midpoints.len() - 1], 65520.0);
    let inputs = midpoints.iter().flat_map(|m| {
        let b = m.to_bits();
        [b - 1, b, b + 1]
            .into_iter()
            .flat_map(|x| [x, x | 0x8000_0000])
    });
    check_all("f16 ties", inputs);
}

/// Widens every code with the reference and with `half`; returns the codes they disagree on,
/// after checking that every disagreement is a NaN whose only difference is half's quiet bit.
fn widening_differences(
    ours: fn(u16) -> f32,
    theirs: fn(u16) -> f32,
    is_nan_code: fn(u16) -> bool,
    quiet_bit: u32,
) -> Vec<u16> {
    let mut differ = Vec::new();
    for c in 0..=u16::MAX {
        let (a, b) = (ours(c).to_bits(), theirs(c).to_bits());
        if a != b {
            assert!(
                is_nan_code(c),
                "{c:#06x}: reference {a:#010x}, half {b:#010x}"
            );
            assert_eq!(a & quiet_bit, 0, "{c:#06x}: differs though already quiet");
            assert_eq!(a | quiet_bit, b, "{c:#06x}: differs beyond the quiet bit");
            differ.push(c);
        }
    }
    differ
}

/// bf16 -> f32 for all 65536 codes: equal except on the 126 signalling NaN codes
/// (0x7F81..=0x7FBF and 0xFF81..=0xFFBF), which the reference keeps and half quiets.
#[test]
fn bf16_to_f32_matches_half_for_every_code_except_signalling_nans() {
    let differ = widening_differences(
        bf16_to_f32,
        |c| bf16::from_bits(c).to_f32(),
        |c| c & 0x7FFF > 0x7F80,
        0x0040_0000,
    );
    let signalling: Vec<u16> = (0x7F81..=0x7FBF).chain(0xFF81..=0xFFBF).collect();
    assert_eq!(differ, signalling);
    assert_eq!(bf16_to_f32(0x7F81).to_bits(), 0x7F81_0000);
}

/// f16 -> f32 for all 65536 codes: equal except on the 1022 signalling NaN codes
/// (0x7C01..=0x7DFF and 0xFC01..=0xFDFF), which the reference keeps and half quiets.
#[test]
fn f16_to_f32_matches_half_for_every_code_except_signalling_nans() {
    let differ = widening_differences(
        f16_to_f32,
        |c| f16::from_bits(c).to_f32(),
        |c| c & 0x7FFF > 0x7C00,
        0x0040_0000,
    );
    let signalling: Vec<u16> = (0x7C01..=0x7DFF).chain(0xFC01..=0xFDFF).collect();
    assert_eq!(differ, signalling);
    assert_eq!(f16_to_f32(0x7C01).to_bits(), 0x7F80_2000);
}
