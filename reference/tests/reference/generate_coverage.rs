//! Inputs that discriminate by construction: whatever the seed, an FP4 case holds every FP4
//! code, and a `special` case every extreme scale code (the seed permutes positions and
//! values, never presence); `fraction` and `non_finite` are honoured; a case too small to hold
//! the extremes is a clear error.

use conform_reference::ops::{self, GenContext, TensorMap, ValueDist};

use crate::common;

/// The tests' shared deterministic bit source (xorshift64*), seeded per case.
fn bits_source(seed: u64) -> impl FnMut() -> u64 {
    let mut rng = common::Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    move || rng.next_u64()
}

fn generate(op: &str, params: serde_json::Value, dist: ValueDist, seed: u64) -> TensorMap {
    let mut src = bits_source(seed);
    let mut ctx = GenContext::new(&mut src, dist);
    ops::find(op).unwrap().generate(&params, &mut ctx).unwrap()
}

fn present(bytes: &[u8]) -> [bool; 256] {
    let mut seen = [false; 256];
    for &b in bytes {
        seen[b as usize] = true;
    }
    seen
}

fn nibbles(bytes: &[u8]) -> [bool; 16] {
    let mut seen = [false; 16];
    for &b in bytes {
        seen[(b & 15) as usize] = true;
        seen[(b >> 4) as usize] = true;
    }
    seen
}

#[test]
fn every_mxfp4_special_case_holds_every_e8m0_extreme_and_every_fp4_code_on_every_seed() {
    let params = serde_json::json!({"dtype": "bf16", "n": 12, "k": 32});
    for seed in 0..500 {
        let dist = ValueDist::Special {
            fraction: 0.5,
            non_finite: true,
        };
        let t = generate("mxfp4_dequant", params.clone(), dist, seed);
        let scales = present(&t["scale"].data);
        for code in [0u8, 1, 127, 253, 254, 255] {
            assert!(scales[code as usize], "seed {seed}: E8M0 {code} missing");
        }
        assert!(nibbles(&t["weight"].data).iter().all(|&x| x), "seed {seed}");
    }
}

#[test]
fn non_finite_false_keeps_the_nan_scale_out_and_fraction_sets_the_share() {
    let params = serde_json::json!({"dtype": "bf16", "n": 64, "k": 1024});
    let extremes = [0u8, 1, 127, 253, 254, 255];
    for (fraction, non_finite) in [(0.1, false), (0.5, true), (0.9, false), (0.9, true)] {
        let dist = ValueDist::Special {
            fraction,
            non_finite,
        };
        let t = generate("mxfp4_dequant", params.clone(), dist, 7);
        let scales = &t["scale"].data;
        let nan = scales.iter().filter(|&&s| s == 255).count();
        assert_eq!(nan > 0, non_finite, "fraction {fraction}");
        // Exactly round(fraction x groups) groups hold an extreme code. 127 (2^0) is also an
        // ordinary code, so the count lies between the extremes other than 127 and all of them.
        let want = (fraction * scales.len() as f64).round() as usize;
        let all = scales.iter().filter(|s| extremes.contains(s)).count();
        let not_127 = scales
            .iter()
            .filter(|&&s| s != 127 && extremes.contains(&s))
            .count();
        assert!(
            not_127 <= want && want <= all,
            "fraction {fraction}: {not_127} <= {want} <= {all}"
        );
        // The ordinary draws put 127 in about 1 of 21 of the other groups: the share of extreme
        // groups is the fraction asked for, not more.
        let share = all as f64 / scales.len() as f64;
        assert!(
            share <= fraction + 0.06,
            "fraction {fraction}: share {share}"
        );
    }
}

#[test]
fn nvfp4_special_cases_hold_every_e4m3_special_code_on_every_seed() {
    let params = serde_json::json!({"dtype": "bf16", "n": 4, "k": 128});
    for seed in 0..500 {
        let dist = ValueDist::Special {
            fraction: 0.25,
            non_finite: false,
        };
        let t = generate("nvfp4_dequant", params.clone(), dist, seed);
        // No ordinary E4M3 scale (0x20..0x70) is an extreme: exactly a quarter of the 32
        // groups hold one, on every seed.
        let extreme = t["block_scale"]
            .data
            .iter()
            .filter(|s| [0u8, 1, 7, 8, 0x7E].contains(s))
            .count();
        assert_eq!(extreme, 8, "seed {seed}");
        let scales = present(&t["block_scale"].data);
        for code in [0u8, 1, 7, 8, 0x7E] {
            assert!(scales[code as usize], "seed {seed}: E4M3 {code:#x} missing");
        }
        assert!(!scales[0x7F], "seed {seed}: NaN without non_finite");
    }
}

#[test]
fn a_case_too_small_for_every_extreme_is_a_clear_error() {
    let params = serde_json::json!({"dtype": "bf16", "n": 2, "k": 32});
    let mut src = bits_source(1);
    let mut ctx = GenContext::new(
        &mut src,
        ValueDist::Special {
            fraction: 0.5,
            non_finite: true,
        },
    );
    let e = ops::find("mxfp4_dequant")
        .unwrap()
        .generate(&params, &mut ctx)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("give 1 of 2 scale groups an extreme code, fewer than the 6 extreme codes"),
        "{e}"
    );
}
