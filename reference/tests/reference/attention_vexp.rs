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

/// f64 cannot be swept: random doubles over the whole range, uniform values over the ranges
/// the oracle uses ([-745, 710] and around 0), and the boundaries of the fast path.
#[test]
fn exp_f64_slice_equals_libm_exp_on_sampled_inputs() {
    use conform_reference::attention::vexp::exp_f64_slice;
    let n = if cfg!(debug_assertions) {
        1 << 16
    } else {
        1 << 22
    };
    let tasks = 16;
    let bad = map_tasks(tasks, Threads::available(), |t| {
        let mut s = 0x1234_5678_9abc_def0u64 ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut xs: Vec<f64> = Vec::with_capacity(n);
        for i in 0..n {
            let r = next();
            xs.push(match i % 4 {
                0 => f64::from_bits(r),
                1 => -745.0 + 1455.0 * ((r >> 11) as f64 / (1u64 << 53) as f64),
                2 => -1.0 + 2.0 * ((r >> 11) as f64 / (1u64 << 53) as f64),
                _ => f64::from_bits(r >> (r % 64)) * if r & 1 == 0 { 1.0 } else { -1.0 },
            });
        }
        xs.extend_from_slice(&[
            0.0,
            -0.0,
            700.0,
            -700.0,
            700.0000000000001,
            -700.0000000000001,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            3.7252902984e-09,
            -3.7252902984e-09,
            0.34657359027997264,
            -0.34657359027997264,
            1.0397207708399179,
            -1.0397207708399179,
        ]);
        let mut y = xs.clone();
        exp_f64_slice(&mut y);
        xs.iter().zip(&y).find_map(|(&x, &y)| {
            let e = math::exp_f64(x);
            (e.to_bits() != y.to_bits() && !(e.is_nan() && y.is_nan())).then_some(x)
        })
    });
    let bad: Vec<f64> = bad.into_iter().flatten().collect();
    assert!(bad.is_empty(), "mismatch at {:e}", bad[0]);
}

/// Softmax-shaped inputs: chunks mixing the common range with masked scores (-FLT_MAX,
/// -inf), the underflow edge (-103.97...), the subnormal-result range and NaN, at every
/// position, so every select of the vector path meets every other kind of lane.
#[test]
fn exp_slice_equals_libm_expf_on_masked_softmax_rows() {
    let specials = [
        -f32::MAX,
        f32::NEG_INFINITY,
        -104.0,
        -103.972_08,
        -103.972_09,
        -103.5,
        -90.0,
        -87.5,
        -80.0,
        -80.000_01,
        f32::NAN,
        -0.0,
        1e-30,
    ];
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for len in [1usize, 7, 8, 15, 16, 17, 31, 64, 129] {
        for round in 0..400 {
            let row: Vec<f32> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if (x >> 60) < 4 + (round % 8) as u64 {
                        specials[(x >> 32) as usize % specials.len()]
                    } else {
                        -((x >> 40) as f32) / (1u64 << 24) as f32 * 80.0
                    }
                })
                .collect();
            let mut y = row.clone();
            exp_f32_slice(&mut y);
            for (a, b) in row.iter().zip(&y) {
                let e = math::exp_f32(*a);
                assert!(
                    e.to_bits() == b.to_bits() || (e.is_nan() && b.is_nan()),
                    "exp({a:e}) = {b:e}, libm {e:e}"
                );
            }
        }
    }
}
