//! IEEE binary32 as a rounding target: f64 -> f32 in every rounding mode.

use super::format::FLOAT32;
use super::rounding::{Exact, NanPolicy, OverflowPolicy, Rounding, RoundingMode, SubnormalPolicy};

/// Rounds an f64 to f32 under `rounding`, in one step. With the default IEEE policies and
/// ties-to-even this equals Rust's `as f32` cast; the other modes go through the generic rounder.
#[inline]
pub fn f64_to_f32(x: f64, rounding: Rounding) -> f32 {
    if rounding.mode == RoundingMode::NearestTiesToEven
        && rounding.subnormals == SubnormalPolicy::Keep
        && rounding.nan == NanPolicy::CanonicalQuiet
        && rounding.overflow == OverflowPolicy::Ieee
        && !x.is_nan()
    {
        return x as f32;
    }
    f32::from_bits(Exact::of_f64(x).round_to(&FLOAT32, rounding) as u32)
}
