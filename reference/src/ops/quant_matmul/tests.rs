use super::*;

#[test]
fn packing_keeps_19_bits_by_truncation_or_rounding() {
    let s = f32::from_bits(0x3C00_1FFF);
    assert_eq!(pack_scale(s, ScalePack::Truncate19).to_bits(), 0x3C00_0000);
    assert_eq!(pack_scale(s, ScalePack::RoundEven19).to_bits(), 0x3C00_2000);
    assert_eq!(pack_scale(s, ScalePack::FullF32), s);
    // An exact tie rounds to the even 19-bit value.
    let tie = f32::from_bits(0x3C00_1000);
    assert_eq!(
        pack_scale(tie, ScalePack::RoundEven19).to_bits(),
        0x3C00_0000
    );
    let tie_odd = f32::from_bits(0x3C00_3000);
    assert_eq!(
        pack_scale(tie_odd, ScalePack::RoundEven19).to_bits(),
        0x3C00_4000
    );
    // A carry out of the largest finite binade gives infinity in the rounding mode.
    let top = f32::from_bits(0x7F7F_F000);
    assert_eq!(pack_scale(top, ScalePack::RoundEven19), f32::INFINITY);
    assert_eq!(
        pack_scale(top, ScalePack::Truncate19).to_bits(),
        0x7F7F_E000
    );
    // A subnormal scale packs to a signed zero in the rounding mode.
    assert_eq!(
        pack_scale(f32::from_bits(0x8000_1234), ScalePack::RoundEven19).to_bits(),
        0x8000_0000
    );
}

#[test]
fn rounding_to_an_integer_and_the_offset_packing() {
    let e = RoundingMode::NearestTiesToEven;
    let a = RoundingMode::NearestTiesAway;
    assert_eq!(round_to_integer(2.5, e), 2);
    assert_eq!(round_to_integer(2.5, a), 3);
    assert_eq!(round_to_integer(-3.5, e), -4);
    assert_eq!(round_to_integer(-2.5, a), -3);
    assert_eq!(round_to_integer(-2.4999, e), -2);
    assert_eq!(round_to_integer(7.0, a), 7);
    assert_eq!(round_to_integer(-1.25, RoundingMode::TowardNegative), -2);
    assert_eq!(round_to_integer(1e300, e), i64::MAX);
    // npu_trans_quant_param's offset: ties to even, clamped to 9 bits.
    assert_eq!(pack_offset(0.5), 0);
    assert_eq!(pack_offset(-1.5), -2);
    assert_eq!(pack_offset(300.0), 255);
    assert_eq!(pack_offset(-300.7), -256);
    // The requantisation: 9-bit clamp before the offset, int8 clamp after it.
    let k = QmmRecipe::preset("a2_fixpipe").unwrap();
    assert_eq!(k.requant(1000.0, 1.0, -200), 55);
    assert_eq!(k.requant(5.0, 0.5, 0), 2);
    assert_eq!(k.requant(-300.0, 1.0, 100), -128);
}

#[test]
fn int_to_f32_rounds_above_2_24_with_the_mode() {
    let v = (1 << 24) + 1;
    assert_eq!(i32_to_f32(v, RoundingMode::NearestTiesToEven), 16777216.0);
    assert_eq!(i32_to_f32(v, RoundingMode::NearestTiesAway), 16777218.0);
    assert_eq!(i32_to_f32(-v, RoundingMode::TowardZero), -16777216.0);
    assert_eq!(i32_to_f32(12345, RoundingMode::TowardPositive), 12345.0);
}

#[test]
fn the_oracle_is_the_exact_value_rounded_to_odd() {
    // 3 * 0.5 * 0.25 + 1 = 1.375 exactly.
    assert_eq!(oracle_value(3, 0.5, Some(0.25), Some(1.0)), 1.375);
    // A product that needs more than 53 bits: rounded to odd (the last bit set).
    let acc = (1i64 << 30) + 1;
    let s = f32::from_bits(0x3F80_0001); // 1 + 2^-23
    let t = f32::from_bits(0x3F80_0001);
    let v = oracle_value(acc, s, Some(t), None);
    assert_eq!(v.to_bits() & 1, 1);
    // 2^-23 and 2^-52 written exactly (no platform pow in the reference crate).
    let ulp23 = 1.0 / 8_388_608.0;
    let exact = (acc as f64) * (1.0 + ulp23) * (1.0 + ulp23);
    assert!((v - exact).abs() <= exact * f64::EPSILON);
    // Far-apart terms still give the larger one (and the sign of the sum).
    assert_eq!(oracle_value(0, 1.0, None, Some(-2.0)), -2.0);
}

#[test]
fn the_kernel_multiplies_the_scale_first_then_the_token() {
    let k = QmmRecipe::preset("a2_pertoken").unwrap();
    let opt = QmmRecipe::preset("a2_pertoken_opt").unwrap();
    let (a, s, t) = (1000.0f32, 0.1f32, 0.3f32);
    assert_eq!(opt.epilogue(a, s, Some(t), None, 0.0), a * (t * s));
    assert_eq!(k.epilogue(a, s, Some(t), None, 0.0), (a * s) * t);
    let merged = QmmRecipe {
        scale_order: ScaleOrder::MergedFirst,
        ..k
    };
    assert_eq!(merged.epilogue(a, s, Some(t), None, 0.0), a * (s * t));
    assert_eq!(k.epilogue(a, s, None, Some(2.0), 0.0), a * s + 2.0);
}
