//! The slice forms of expf and of the bf16 cast used by the softmax equal the scalar
//! definitions bit for bit: every 13th f32 input (bf16 cast: every 5th) in release, every
//! 257th in debug; the sweeps over all 2^32 inputs are the `full tier` tests (`-- --ignored`,
//! about a minute of CPU each).

use conform_reference::attention::vexp::{exp_f32_slice, quantize_bf16_slice};
use conform_reference::formats::{bf16, Rounding};
use conform_reference::math;
use conform_reference::parallel::{map_tasks, Threads};

const STEP: u64 = if cfg!(debug_assertions) { 257 } else { 5 };
const EXP_STEP: u64 = if cfg!(debug_assertions) { 257 } else { 13 };
const CHUNK: u64 = 1 << 22;

/// Runs `check(block)` over all f32 bit patterns in blocks of 4096 (strided in debug) and
/// returns the first mismatching input, if any.
fn sweep(step: u64, check: impl Fn(&[f32]) -> Option<u32> + Sync) -> Option<u32> {
    let tasks = ((1u64 << 32) / CHUNK) as usize;
    let found = map_tasks(tasks, Threads::available(), |t| {
        let start = t as u64 * CHUNK;
        let mut buf = Vec::with_capacity(4096);
        let mut i = start;
        while i < start + CHUNK {
            buf.clear();
            while buf.len() < 4096 && i < start + CHUNK {
                buf.push(f32::from_bits(i as u32));
                i += step;
            }
            if let Some(x) = check(&buf) {
                return Some(x);
            }
        }
        None
    });
    found.into_iter().flatten().next()
}

fn exp_mismatch(step: u64) -> Option<u32> {
    sweep(step, |xs| {
        let mut y = xs.to_vec();
        exp_f32_slice(&mut y);
        xs.iter()
            .zip(&y)
            .find(|(x, y)| {
                let e = math::exp_f32(**x);
                e.to_bits() != y.to_bits() && !(e.is_nan() && y.is_nan())
            })
            .map(|(x, _)| x.to_bits())
    })
}

#[test]
fn exp_slice_equals_libm_expf_on_a_stride_of_all_f32() {
    let bad = exp_mismatch(EXP_STEP);
    assert_eq!(bad, None, "first mismatch at input bits {bad:08x?}");
}

#[test]
#[ignore = "full tier: all 2^32 inputs"]
fn exp_slice_equals_libm_expf_for_every_f32() {
    let bad = exp_mismatch(1);
    assert_eq!(bad, None, "first mismatch at input bits {bad:08x?}");
}

fn bf16_check(step: u64) {
    for rounding in [Rounding::RNE, Rounding::RNA] {
        let bad = sweep(step, |xs| {
            let mut y = xs.to_vec();
            quantize_bf16_slice(&mut y, rounding);
            xs.iter()
                .zip(&y)
                .find(|(x, y)| bf16::quantize_f32_bf16(**x, rounding).to_bits() != y.to_bits())
                .map(|(x, _)| x.to_bits())
        });
        assert_eq!(
            bad, None,
            "{rounding:?}: first mismatch at input bits {bad:08x?}"
        );
    }
}

#[test]
fn bf16_slice_cast_equals_the_scalar_cast_on_a_stride_of_all_f32() {
    bf16_check(STEP);
}

#[test]
#[ignore = "full tier: all 2^32 inputs"]
fn bf16_slice_cast_equals_the_scalar_cast_for_every_f32() {
    bf16_check(1);
}
