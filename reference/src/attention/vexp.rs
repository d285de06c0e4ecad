//! Slice forms of two per-element operations of the softmax, written so the compiler
//! vectorises them, and equal BIT FOR BIT to the scalar definitions (exhaustively tested over
//! all 2^32 f32 inputs in `tests/reference/attention_vexp.rs`):
//! - [`exp_f32_slice`] = [`crate::math::exp_f32`] (libm `expf`, the FreeBSD algorithm) on
//!   every element: the common range runs the same f32 operations in the same order, lane
//!   by lane; every other input goes through `math::exp_f32` itself;
//! - [`exp_f64_slice`] = [`crate::math::exp_f64`] (libm `exp`, FreeBSD e_exp.c) likewise,
//!   for the oracle (sampled test: f64 cannot be swept);
//! - [`quantize_bf16_slice`] = [`crate::formats::bf16::quantize_f32_bf16`] for IEEE round-to-
//!   nearest roundings (ties to even or away), as an integer operation on the bits.

use crate::formats::{bf16, NanPolicy, OverflowPolicy, Rounding, RoundingMode, SubnormalPolicy};
use crate::math;

// The constants of libm's expf (FreeBSD e_expf.c).
const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
const LN2_LO: f32 = f32::from_bits(0x35bf_be8e);
const INV_LN2: f32 = f32::from_bits(0x3fb8_aa3b);
const P1: f32 = f32::from_bits(0x3e2a_aa8f);
const P2: f32 = f32::from_bits(0xbb35_5215);

/// |x| bit bound of the vector path: |x| <= 80, so 2^k is normal and y * 2^k is an exact
/// normal product, as libm's `scalbnf` computes it.
const FAST_MAX_BITS: u32 = 0x42a0_0000;
/// |x| > 2^-14 (below it libm returns 1 + x; handled by a select).
const TINY_BITS: u32 = 0x3900_0000;

/// libm expf's common path for |x| <= 80 (the caller checks the range).
#[inline(always)]
fn expf_common(x: f32) -> f32 {
    let hx = x.to_bits() & 0x7fff_ffff;
    let negative = x.to_bits() >> 31 != 0;
    // Argument reduction, exactly as libm: k from the rounded product for |x| > 1.5 ln2,
    // +-1 for 0.5 ln2 < |x| <= 1.5 ln2, 0 below.
    let half = if negative { -0.5f32 } else { 0.5f32 };
    // libm truncates the product toward zero; for |x| <= 80 it lies in [-116, 116], so the
    // clamp changes nothing there and keeps the unchecked (vectorisable) conversion defined
    // for every input, NaN included (max/min return the non-NaN operand).
    #[allow(clippy::manual_clamp)] // clamp would keep a NaN (then the conversion is undefined)
    let t = (INV_LN2 * x + half).max(-256.0).min(256.0);
    // SAFETY: to_int_unchecked needs t finite with its truncation in i32 range: max/min
    // return the non-NaN operand, so t lies in [-256, 256] for every x, inf and NaN included.
    let k_big: i32 = unsafe { t.to_int_unchecked() };
    let k_one = if negative { -1 } else { 1 };
    let k = if hx > 0x3f85_1592 {
        k_big
    } else if hx > 0x3eb1_7218 {
        k_one
    } else {
        0
    };
    let reduce = hx > 0x3eb1_7218;
    let kf = k as f32;
    let hi = if reduce { x - kf * LN2_HI } else { x };
    let lo = if reduce { kf * LN2_LO } else { 0.0 };
    let r = if reduce { hi - lo } else { x };
    let xx = r * r;
    let c = r - xx * (P1 + xx * P2);
    let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
    // scalbnf(y, k) for -126 <= k <= 127 is one multiply by 2^k (k = 0: by 1, exact).
    let two_k = f32::from_bits(((0x7f + k) as u32) << 23);
    let full = y * two_k;
    if hx > TINY_BITS {
        full
    } else {
        1.0 + x
    }
}

/// Bits of -104.0 up to those of -inf: libm expf returns +0 for every x < -103.972084.
const UNDERFLOW_BITS: std::ops::RangeInclusive<u32> = 0xc2d0_0000..=0xff80_0000;

/// `x[i] = math::exp_f32(x[i])` for every element, bit for bit.
pub fn exp_f32_slice(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::attention::kernel::use_avx512() {
            // SAFETY: the callee's only requirement is AVX-512F, which `use_avx512`
            // (`crate::cpu::avx512`) detected at run time just above (the CONFORM_NO_AVX512 and
            // CONFORM_NO_SIMD switches only make it answer false).
            return unsafe { exp_avx512(x) };
        }
        if crate::cpu::avx2() {
            // SAFETY: the callee's only requirement is AVX2, which `crate::cpu::avx2` detected
            // at run time just above (CONFORM_NO_SIMD only makes it answer false).
            return unsafe { exp_avx2(x) };
        }
    }
    exp_portable::<8>(x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn exp_avx2(x: &mut [f32]) {
    exp_portable::<8>(x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn exp_avx512(x: &mut [f32]) {
    exp_portable::<16>(x)
}

/// Chunks of `W` lanes: when every lane is in the common range or underflows (a masked
/// score), the chunk is computed lane by lane without branches; otherwise each element goes
/// through `math::exp_f32`.
#[inline(always)]
fn exp_portable<const W: usize>(x: &mut [f32]) {
    let mut chunks = x.chunks_exact_mut(W);
    for c in &mut chunks {
        let mut all_fast = true;
        for v in c.iter() {
            let b = v.to_bits();
            all_fast &= b & 0x7fff_ffff <= FAST_MAX_BITS || UNDERFLOW_BITS.contains(&b);
        }
        if all_fast {
            for v in c.iter_mut() {
                let under = UNDERFLOW_BITS.contains(&v.to_bits());
                let e = expf_common(*v);
                *v = if under { 0.0 } else { e };
            }
        } else {
            for v in c.iter_mut() {
                *v = math::exp_f32(*v);
            }
        }
    }
    for v in chunks.into_remainder() {
        *v = math::exp_f32(*v);
    }
}

/// Whether [`quantize_bf16_slice`] implements `rounding`.
pub fn bf16_fast_rounding(rounding: Rounding) -> bool {
    matches!(
        rounding.mode,
        RoundingMode::NearestTiesToEven | RoundingMode::NearestTiesAway
    ) && rounding.subnormals == SubnormalPolicy::Keep
        && rounding.nan == NanPolicy::CanonicalQuiet
        && rounding.overflow == OverflowPolicy::Ieee
}

#[inline(always)]
fn bf16_bits(x: f32, ties_away: bool) -> f32 {
    let b = x.to_bits();
    let mag = b & 0x7fff_ffff;
    let bias = if ties_away {
        0x8000
    } else {
        0x7fff + ((b >> 16) & 1)
    };
    let rounded = b.wrapping_add(bias) & 0xffff_0000;
    let nan = (b & 0x8000_0000) | 0x7fc0_0000;
    f32::from_bits(if mag > 0x7f80_0000 { nan } else { rounded })
}

/// `x[i] = bf16::quantize_f32_bf16(x[i], rounding)` for every element, bit for bit, where
/// [`bf16_fast_rounding`] holds; other roundings use the scalar definition.
pub fn quantize_bf16_slice(x: &mut [f32], rounding: Rounding) {
    if !bf16_fast_rounding(rounding) {
        for v in x.iter_mut() {
            *v = bf16::quantize_f32_bf16(*v, rounding);
        }
        return;
    }
    let away = rounding.mode == RoundingMode::NearestTiesAway;
    #[cfg(target_arch = "x86_64")]
    {
        if crate::cpu::avx2() {
            // SAFETY: the callee's only requirement is AVX2, which `crate::cpu::avx2` detected
            // at run time just above (CONFORM_NO_SIMD only makes it answer false).
            return unsafe { quantize_avx2(x, away) };
        }
    }
    quantize_portable(x, away)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn quantize_avx2(x: &mut [f32], away: bool) {
    quantize_portable(x, away)
}

#[inline(always)]
fn quantize_portable(x: &mut [f32], away: bool) {
    if away {
        x.iter_mut().for_each(|v| *v = bf16_bits(*v, true));
    } else {
        x.iter_mut().for_each(|v| *v = bf16_bits(*v, false));
    }
}

// The constants of libm's exp (FreeBSD e_exp.c).
const D_LN2HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const D_LN2LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
const D_INVLN2: f64 = f64::from_bits(0x3ff7_1547_652b_82fe);
const D_P1: f64 = f64::from_bits(0x3fc5_5555_5555_553e);
const D_P2: f64 = f64::from_bits(0xbf66_c16c_16be_bd93);
const D_P3: f64 = f64::from_bits(0x3f11_566a_af25_de2c);
const D_P4: f64 = f64::from_bits(0xbebb_bd41_c5d2_6bf1);
const D_P5: f64 = f64::from_bits(0x3e66_3769_72be_a4d0);

/// libm exp's common path for |x| <= 700 (2^k and y * 2^k normal: scalbn is one multiply).
#[inline(always)]
fn exp_common(x: f64) -> f64 {
    let hx = ((x.to_bits() >> 32) as u32) & 0x7fff_ffff;
    let negative = x.to_bits() >> 63 != 0;
    let half = if negative { -0.5f64 } else { 0.5f64 };
    // As in `expf_common`: |x| <= 700 keeps the truncated product within [-1010, 1010].
    #[allow(clippy::manual_clamp)] // clamp would keep a NaN (then the conversion is undefined)
    let t = (D_INVLN2 * x + half).max(-2048.0).min(2048.0);
    // SAFETY: to_int_unchecked needs t finite with its truncation in i32 range: max/min
    // return the non-NaN operand, so t lies in [-2048, 2048] for every x, inf and NaN included.
    let k_big: i32 = unsafe { t.to_int_unchecked() };
    let k_one = if negative { -1 } else { 1 };
    let reduce = hx > 0x3fd6_2e42;
    let k = if hx >= 0x3ff0_a2b2 {
        k_big
    } else if reduce {
        k_one
    } else {
        0
    };
    let kf = k as f64;
    let hi = if reduce { x - kf * D_LN2HI } else { x };
    let lo = if reduce { kf * D_LN2LO } else { 0.0 };
    let r = if reduce { hi - lo } else { x };
    let xx = r * r;
    let c = r - xx * (D_P1 + xx * (D_P2 + xx * (D_P3 + xx * (D_P4 + xx * D_P5))));
    let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
    let two_k = f64::from_bits(((0x3ff + k as i64) as u64) << 52);
    if hx > 0x3e30_0000 {
        y * two_k
    } else {
        1.0 + x
    }
}

/// `x[i] = math::exp_f64(x[i])` for every element, bit for bit.
pub fn exp_f64_slice(x: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::attention::kernel::use_avx512() {
            // SAFETY: the callee's only requirement is AVX-512F, which `use_avx512`
            // (`crate::cpu::avx512`) detected at run time just above (the CONFORM_NO_AVX512 and
            // CONFORM_NO_SIMD switches only make it answer false).
            return unsafe { exp64_avx512(x) };
        }
        if crate::cpu::avx2() {
            // SAFETY: the callee's only requirement is AVX2, which `crate::cpu::avx2` detected
            // at run time just above (CONFORM_NO_SIMD only makes it answer false).
            return unsafe { exp64_avx2(x) };
        }
    }
    exp64_portable::<4>(x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn exp64_avx2(x: &mut [f64]) {
    exp64_portable::<4>(x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn exp64_avx512(x: &mut [f64]) {
    exp64_portable::<8>(x)
}

#[inline(always)]
fn exp64_portable<const W: usize>(x: &mut [f64]) {
    let mut chunks = x.chunks_exact_mut(W);
    for c in &mut chunks {
        let mut all_fast = true;
        for v in c.iter() {
            all_fast &= v.abs() <= 700.0;
        }
        if all_fast {
            for v in c.iter_mut() {
                *v = exp_common(*v);
            }
        } else {
            for v in c.iter_mut() {
                *v = math::exp_f64(*v);
            }
        }
    }
    for v in chunks.into_remainder() {
        *v = math::exp_f64(*v);
    }
}
