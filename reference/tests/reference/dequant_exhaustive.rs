//! Exhaustive checks of the FP4 dequantisation element semantics against exact oracles:
//! every MXFP4 (code, scale) pair, every finite NVFP4 (code, block scale) pair crossed with a
//! set of global scales for every scale order, and the seed's bit-placement conversion.

use crate::common;

use common::{e2m1_value, e4m3fn_value, round_f64, Half, Rng, BF16, F16};
use conform_reference::dequant::bit_placement;
use conform_reference::dequant::{
    mxfp4, nvfp4, Fp4DequantRecipe, Fp4Element, HalfType, ScaleOrder,
};
use conform_reference::formats::{Rounding, RoundingMode, SubnormalPolicy};

fn half(t: HalfType) -> Half {
    match t {
        HalfType::Bf16 => BF16,
        HalfType::F16 => F16,
    }
}

fn recipes_over_modes(base: Fp4DequantRecipe) -> Vec<Fp4DequantRecipe> {
    let mut v = Vec::new();
    for output in [HalfType::Bf16, HalfType::F16] {
        for mode in RoundingMode::ALL {
            for rounding in [Rounding::ieee(mode), Rounding::ieee(mode).flush_to_zero()] {
                v.push(Fp4DequantRecipe {
                    output,
                    rounding,
                    ..base.clone()
                });
            }
        }
    }
    v
}

#[test]
fn every_mxfp4_code_scale_pair_matches_exact_oracle() {
    let mut checked = 0;
    for order in [ScaleOrder::ExactOnce, ScaleOrder::BlockThenGlobalF32] {
        let base = Fp4DequantRecipe {
            order,
            ..Fp4DequantRecipe::mx_ocp()
        };
        for recipe in recipes_over_modes(base) {
            let t = half(recipe.output);
            for scale in 0..=255u8 {
                for code in 0..16u8 {
                    let got = mxfp4::element(code, scale, &recipe);
                    let want = if scale == 0xFF {
                        t.nan
                    } else {
                        // Exact in f64: |q| <= 6, X = 2^(e-127).
                        let exact = e2m1_value(code) * 2f64.powi(scale as i32 - 127);
                        let x = if order == ScaleOrder::ExactOnce {
                            exact
                        } else {
                            // Formed in f32 first: exact, or ±Inf on overflow.
                            (exact as f32) as f64
                        };
                        round_f64(x, t, recipe.rounding)
                    };
                    assert_eq!(got, want, "code {code} scale {scale} {recipe:?}");
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 2 * 2 * 6 * 2 * 16 * 256);
}

#[test]
fn mxfp4_to_bf16_pair_census_matches_the_notes() {
    // 4068 exact, 12 overflow to ±Inf, 16 NaN; subnormal results survive.
    let r = Fp4DequantRecipe::mx_ocp();
    let (mut exact, mut inf, mut nan) = (0, 0, 0);
    for scale in 0..=255u8 {
        for code in 0..16u8 {
            let bits = mxfp4::element(code, scale, &r);
            let v = f32::from_bits((bits as u32) << 16);
            if v.is_nan() {
                nan += 1;
            } else if v.is_infinite() {
                inf += 1;
            } else {
                assert_eq!(v as f64, e2m1_value(code) * 2f64.powi(scale as i32 - 127));
                exact += 1;
            }
        }
    }
    assert_eq!((exact, inf, nan), (4068, 12, 16));
    assert_eq!(mxfp4::element(1, 0, &r), 0x0020); // 0.5 * 2^-127
    assert_eq!(mxfp4::element(2, 254, &r), 0x7F00); // 1 * 2^127
    assert_eq!(mxfp4::element(4, 254, &r), 0x7F80); // 2 * 2^127 overflows
    assert_eq!(mxfp4::element(12, 254, &r), 0xFF80);
}

/// The global scales of the NVFP4 sweep: all powers of two in f32 range (normal and
/// subnormal), f32 subnormals, 1 + i * 2^-23, random finite values of both signs, zeros,
/// infinities and NaN.
fn global_scales() -> Vec<f32> {
    let mut g: Vec<f32> = (-149..=127).map(|e| 2f64.powi(e) as f32).collect();
    g.extend([0x1u32, 0x2, 0x3, 0x7F_FFFF, 0x40_0000, 0x40_0001, 0x12_3456].map(f32::from_bits));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..24 {
        g.push(f32::from_bits(1 + rng.below(0x7F_FFFF) as u32));
    }
    for i in 0..192u32 {
        g.push(f32::from_bits(0x3F80_0000 + i)); // 1 + i * 2^-23
        g.push(f32::from_bits(0x3F80_0000 + 0x7F_FFFF - i)); // just below 2
    }
    for _ in 0..160 {
        let bits = rng.next_u64() as u32;
        let x = f32::from_bits(bits);
        if x.is_finite() {
            g.push(x);
        }
    }
    // Typical NVFP4 global scales: amax / (448 * 6) for a spread of amax values.
    for i in 1..=64 {
        g.push((i as f32 * 0.37) / (448.0 * 6.0));
    }
    g.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -1.0,
        -0.5,
    ]);
    g
}

/// The oracle of one NVFP4 element: f64 holds every product here exactly (q*s has at most 6
/// significant bits, g 24), and `as f32` is one correct rounding to nearest-even.
fn nvfp4_oracle(code: u8, scale: u8, g: f32, recipe: &Fp4DequantRecipe) -> u16 {
    let t = half(recipe.output);
    let q = e2m1_value(code);
    let s = match e4m3fn_value(scale) {
        Some(s) => s,
        None => return t.nan,
    };
    let g = g as f64;
    let x = match recipe.order {
        ScaleOrder::BlockThenGlobalF32 => (((q * s) * g) as f32) as f64,
        ScaleOrder::CombinedScaleF32 => {
            let sg = ((s * g) as f32) as f64;
            ((q * sg) as f32) as f64
        }
        ScaleOrder::ExactOnce => q * s * g,
        ScaleOrder::CombinedScaleBf16 => {
            let sg = ((s * g) as f32) as f64;
            let sg = if sg.is_nan() {
                f64::NAN
            } else {
                let b = round_f64(sg, BF16, Rounding::RNE);
                f32::from_bits((b as u32) << 16) as f64
            };
            ((q * sg) as f32) as f64
        }
    };
    round_f64(x, t, recipe.rounding)
}

#[test]
#[cfg_attr(debug_assertions, ignore = "exhaustive: run in release")]
fn every_finite_nvfp4_code_scale_pair_times_global_scales_every_order_matches_exact_oracle() {
    let gs = global_scales();
    let mut recipes = Vec::new();
    for order in ScaleOrder::ALL {
        for (output, mode) in [
            (HalfType::Bf16, RoundingMode::NearestTiesToEven),
            (HalfType::Bf16, RoundingMode::NearestTiesAway),
            (HalfType::Bf16, RoundingMode::TowardZero),
            (HalfType::Bf16, RoundingMode::ToOdd),
            (HalfType::F16, RoundingMode::NearestTiesToEven),
        ] {
            recipes.push(Fp4DequantRecipe {
                order,
                output,
                rounding: Rounding::ieee(mode),
                ..Fp4DequantRecipe::vllm_nvfp4()
            });
        }
    }
    let mut checked = 0u64;
    for recipe in &recipes {
        for scale in 0..=255u8 {
            if e4m3fn_value(scale).is_none() {
                continue;
            }
            for code in 0..16u8 {
                for &g in &gs {
                    let got = nvfp4::element(code, scale, g, recipe);
                    let want = nvfp4_oracle(code, scale, g, recipe);
                    assert_eq!(
                        got,
                        want,
                        "code {code} scale {scale:#04x} g {g:e} ({:#010x}) {recipe:?}",
                        g.to_bits()
                    );
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, (recipes.len() * 254 * 16 * gs.len()) as u64);
    eprintln!("{checked} NVFP4 (code, scale, global, recipe) cases");
}

#[test]
fn nvfp4_nan_block_scale_makes_the_group_nan_in_every_order() {
    for order in ScaleOrder::ALL {
        let r = Fp4DequantRecipe {
            order,
            ..Fp4DequantRecipe::vllm_nvfp4()
        };
        for scale in [0x7Fu8, 0xFF] {
            for code in 0..16 {
                assert_eq!(nvfp4::element(code, scale, 1.0, &r), 0x7FC0);
            }
        }
        // A NaN global scale too; 0 * Inf is NaN.
        assert_eq!(nvfp4::element(3, 0x38, f32::NAN, &r), 0x7FC0);
        assert_eq!(nvfp4::element(0, 0x38, f32::INFINITY, &r), 0x7FC0);
    }
}

#[test]
fn nvfp4_orders_a_and_b_differ_on_some_inputs() {
    // Search a fixed set of global scales for the cases where (q*s)*g and q*(s*g), each in f32
    // then rounded to BF16, give different bits: the order is a real recipe parameter.
    let a = Fp4DequantRecipe {
        order: ScaleOrder::BlockThenGlobalF32,
        ..Fp4DequantRecipe::vllm_nvfp4()
    };
    let b = Fp4DequantRecipe {
        order: ScaleOrder::CombinedScaleF32,
        ..a.clone()
    };
    let c = Fp4DequantRecipe {
        order: ScaleOrder::ExactOnce,
        ..a.clone()
    };
    // Differences need (q*s)*g to fall within an f32 ulp of a BF16 rounding boundary, so aim
    // there: for BF16 midpoints m, take g = f32(m / (q*s)) and its f32 neighbours.
    let mut differ_ab = Vec::new();
    let mut differ_ac = 0;
    for k in 0..128u32 {
        let m = 1.0 + (2 * k + 1) as f64 * 2f64.powi(-8); // a BF16 midpoint in [1, 2)
        for scale in 0x30..0x48u8 {
            for code in [3u8, 5, 7] {
                let qs = e2m1_value(code) * e4m3fn_value(scale).unwrap();
                let g0 = (m / qs) as f32;
                for d in -3i32..=3 {
                    let g = f32::from_bits((g0.to_bits() as i32 + d) as u32);
                    let ea = nvfp4::element(code, scale, g, &a);
                    if ea != nvfp4::element(code, scale, g, &b) {
                        differ_ab.push((code, scale, g));
                    }
                    differ_ac += (ea != nvfp4::element(code, scale, g, &c)) as usize;
                }
            }
        }
    }
    assert!(!differ_ab.is_empty(), "orders A and B never differed");
    assert!(differ_ac > 0, "orders A and C never differed");
    let (code, scale, g) = differ_ab[0];
    eprintln!(
        "A vs B differ in {} cases, A vs C in {differ_ac}; e.g. code {code} scale {scale:#04x} \
         g {:#010x}: A {:#06x} B {:#06x}",
        differ_ab.len(),
        g.to_bits(),
        nvfp4::element(code, scale, g, &a),
        nvfp4::element(code, scale, g, &b)
    );
    // The witness really is a double-rounding difference: re-derive both from f64.
    assert_ne!(
        nvfp4_oracle(code, scale, g, &a),
        nvfp4_oracle(code, scale, g, &b)
    );
}

#[test]
fn bit_placement_equals_table_decode_for_every_code_ieee_and_ftz() {
    for element in [Fp4Element::E2m1, Fp4Element::E1m2] {
        for policy in [SubnormalPolicy::Keep, SubnormalPolicy::FlushToZero] {
            for code in 0..16u8 {
                let placed = bit_placement::fp4_to_bf16(code, element, policy);
                let table = bit_placement::table_decode_to_bf16(code, element, policy);
                assert_eq!(placed, table, "{element:?} {policy:?} code {code}");
                let f32v = bit_placement::fp4_to_f32_two_step(code, element, policy);
                assert_eq!(f32v.to_bits() >> 16, table as u32, "f32 form");
                assert_eq!(f32v.to_bits() & 0xFFFF, 0);
                let f16v = bit_placement::fp4_to_f16(code, element, policy);
                let f16_as_f32 = conform_reference::formats::f16::f16_to_f32(f16v);
                assert_eq!(f16_as_f32.to_bits(), f32v.to_bits(), "f16 form code {code}");
            }
        }
    }
    // Under IEEE the two-step result is the E2M1 value itself (BF16 bits from the notes).
    let ieee: Vec<u16> = (0..16)
        .map(|c| bit_placement::fp4_to_bf16(c, Fp4Element::E2m1, SubnormalPolicy::Keep))
        .collect();
    assert_eq!(
        &ieee[..8],
        &[0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0]
    );
    for c in 0..16u8 {
        assert_eq!(ieee[c as usize] as f64, ieee[c as usize] as f64);
        let v = f32::from_bits((ieee[c as usize] as u32) << 16) as f64;
        assert_eq!(v, e2m1_value(c));
    }
    // Under FTZ (denormals-are-zero on the placed field) it DIFFERS from IEEE exactly for the
    // subnormal codes 1 and 9 (±0.5 -> ±0): a flush-to-zero recipe must model this.
    let ftz: Vec<u16> = (0..16)
        .map(|c| bit_placement::fp4_to_bf16(c, Fp4Element::E2m1, SubnormalPolicy::FlushToZero))
        .collect();
    let differing: Vec<usize> = (0..16).filter(|&c| ftz[c] != ieee[c]).collect();
    assert_eq!(differing, vec![1, 9]);
    assert_eq!((ftz[1], ftz[9]), (0x0000, 0x8000));
}

#[test]
fn mxfp4_bit_placement_two_multiplies_equal_table_element_for_all_pairs() {
    for policy in [SubnormalPolicy::Keep, SubnormalPolicy::FlushToZero] {
        for mode in [
            RoundingMode::NearestTiesToEven,
            RoundingMode::NearestTiesAway,
        ] {
            let recipe = Fp4DequantRecipe {
                order: ScaleOrder::BlockThenGlobalF32,
                fp4_subnormals: policy,
                rounding: Rounding::ieee(mode),
                ..Fp4DequantRecipe::mx_ocp()
            };
            for scale in 0..=255u8 {
                for code in 0..16u8 {
                    assert_eq!(
                        bit_placement::mxfp4_element(code, scale, &recipe),
                        mxfp4::element(code, scale, &recipe),
                        "code {code} scale {scale} {policy:?}"
                    );
                }
            }
        }
    }
}
