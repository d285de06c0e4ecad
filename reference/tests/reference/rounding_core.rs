//! Targeted checks of the generic rounder and the bf16/f16/f32 fast paths (the exhaustive sweeps
//! live in `formats_exhaustive.rs`).

use conform_reference::formats::bf16::{f32_to_bf16, f64_to_bf16};
use conform_reference::formats::f16::{f16_to_f32, f32_to_f16, f64_to_f16};
use conform_reference::formats::f32::f64_to_f32;
use conform_reference::formats::{Exact, Rounding, RoundingMode, BFLOAT16};

#[test]
fn f64_to_bf16_does_not_double_round() {
    let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
    assert_eq!(f64_to_bf16(x, Rounding::RNE), 0x3F81);
    // Exactly half-way: ties to even stays, ties away goes up.
    let t = 1.0 + 2f64.powi(-8);
    assert_eq!(f64_to_bf16(t, Rounding::RNE), 0x3F80);
    assert_eq!(f64_to_bf16(t, Rounding::RNA), 0x3F81);
}

#[test]
fn bf16_fast_path_equals_generic_rounder_on_a_spread_of_inputs() {
    let mut state = 0x1234_5678_9abc_def0u64;
    for _ in 0..2_000_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let x = f32::from_bits(state as u32);
        for mode in RoundingMode::ALL {
            for r in [
                Rounding::ieee(mode),
                Rounding::ieee(mode).flush_to_zero(),
                Rounding::ieee(mode).saturating(),
            ] {
                let fast = f32_to_bf16(x, r);
                let slow = Exact::of_f32(x).round_to(&BFLOAT16, r) as u16;
                assert_eq!(fast, slow, "x={:#010x} {:?}", x.to_bits(), r);
            }
        }
    }
}

#[test]
fn f16_known_values_and_edges() {
    assert_eq!(f32_to_f16(1.0, Rounding::RNE), 0x3C00);
    assert_eq!(f32_to_f16(65504.0, Rounding::RNE), 0x7BFF);
    assert_eq!(f32_to_f16(65520.0, Rounding::RNE), 0x7C00); // tie above max -> inf
    assert_eq!(
        f32_to_f16(65520.0, Rounding::ieee(RoundingMode::TowardZero)),
        0x7BFF
    );
    assert_eq!(f32_to_f16(2f32.powi(-24), Rounding::RNE), 0x0001);
    assert_eq!(f32_to_f16(2f32.powi(-25), Rounding::RNE), 0x0000); // tie to even (zero)
    assert_eq!(f32_to_f16(2f32.powi(-25), Rounding::RNA), 0x0001);
    assert_eq!(
        f32_to_f16(
            -2f32.powi(-26),
            Rounding::ieee(RoundingMode::TowardNegative)
        ),
        0x8001
    );
    assert_eq!(f32_to_f16(f32::NAN, Rounding::RNE), 0x7E00);
    assert_eq!(f32_to_f16(-f32::NAN, Rounding::RNE), 0xFE00);
    assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
    assert_eq!(f16_to_f32(0x03FF), 1023.0 * 2f32.powi(-24));
    assert_eq!(f16_to_f32(0x7BFF), 65504.0);
    assert_eq!(
        f64_to_f16(1.0 + 2f64.powi(-11) + 2f64.powi(-50), Rounding::RNE),
        0x3C01
    );
    for b in 0..=0xFFFFu16 {
        let x = f16_to_f32(b);
        if x.is_nan() {
            continue;
        }
        assert_eq!(f32_to_f16(x, Rounding::RNE), b, "round trip {b:#06x}");
    }
}

#[test]
fn f64_to_f32_matches_cast_and_directed_modes_bracket() {
    let xs = [
        1.0f64 / 3.0,
        -1.0 / 3.0,
        1e-40,
        3.4028235677973366e38,
        1e300,
        -1e-320,
    ];
    for &x in &xs {
        assert_eq!(f64_to_f32(x, Rounding::RNE).to_bits(), (x as f32).to_bits());
        let lo = f64_to_f32(x, Rounding::ieee(RoundingMode::TowardNegative)) as f64;
        let hi = f64_to_f32(x, Rounding::ieee(RoundingMode::TowardPositive)) as f64;
        assert!(lo <= x && x <= hi, "{x}: {lo} {hi}");
    }
}
