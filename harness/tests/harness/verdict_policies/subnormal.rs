//! error_ratio over the subnormal stratum: the elements whose exact value is a nonzero
//! subnormal of the output dtype are judged as their own population, so a kernel that flushes
//! them to zero fails where the whole output's max and mean would hide it, while an honest
//! rounding passes, against an exact baseline too.

use super::*;

/// Smallest bf16 subnormal (one step of the subnormal grid).
const BF16_STEP: f64 = 9.183549615799121e-41; // 2^-133
/// Smallest f16 subnormal.
const F16_STEP: f64 = 5.960464477539063e-8; // 2^-24

fn error_ratio() -> CheckPolicy {
    CheckPolicy::from(policies::ErrorRatio {
        max_ratio: 2.0,
        mean_ratio: 1.5,
        atol: 0.0,
    })
}

/// An output of `normal` values in [1, 2) followed by `tiny.len()` subnormal ones: the oracle
/// (the normal values off the bf16 grid, the tiny ones as given, in units of the subnormal
/// step) and the bf16 bits of each side's normal part rounded to nearest even.
struct Case {
    oracle: Vec<f64>,
    normal_bits: Vec<u16>,
}

fn case(dtype: ElemType, normal: usize, tiny_steps: &[f64]) -> Case {
    let step = if dtype == ElemType::Bf16 {
        BF16_STEP
    } else {
        F16_STEP
    };
    let normal_vals: Vec<f64> = (0..normal)
        .map(|i| 1.0 + (i as f64 + 0.37) / 997.0)
        .collect();
    let normal_bits = Tensor::round_values(dtype, vec![normal], &normal_vals, Rounding::RNE)
        .bits16()
        .unwrap();
    let mut oracle = normal_vals;
    oracle.extend(tiny_steps.iter().map(|s| s * step));
    Case {
        oracle,
        normal_bits,
    }
}

impl Case {
    /// The tensor whose normal part is rounded to nearest and whose tiny part holds the given
    /// subnormal codes (signed step counts).
    /// (bf16 and f16 alike: sign bit 0x8000, a subnormal's code is its step count.)
    fn with_tiny(&self, dtype: ElemType, codes: &[i32]) -> Tensor {
        let mut bits = self.normal_bits.clone();
        bits.extend(codes.iter().map(|&c| {
            let m = c.unsigned_abs() as u16;
            if c < 0 {
                0x8000 | m
            } else {
                m
            }
        }));
        Tensor::from_bits16(dtype, vec![bits.len()], &bits)
    }

    fn judge(&self, dtype: ElemType, actual: &Tensor, baseline: &Tensor) -> OutputMetrics {
        let n = self.oracle.len();
        let s = spec(dtype, &[n], &["d"]);
        let oracle = Tensor::of_f64(vec![n], &self.oracle);
        run(
            &error_ratio(),
            &Comparison::new(&s, actual, baseline)
                .with_oracle(&oracle)
                .with_baseline(baseline),
        )
    }
}

#[test]
fn flushing_subnormal_outputs_to_zero_fails_though_the_whole_output_hides_it() {
    // 16 subnormal outputs from 16.3 to 31.3 steps (an eighth of the smallest normal and up),
    // half of them negative; the baseline rounds every element to nearest.
    let tiny: Vec<f64> = (0..16)
        .map(|i| (16.3 + i as f64) * if i % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    for dtype in [ElemType::Bf16, ElemType::F16] {
        let c = case(dtype, 240, &tiny);
        let rounded: Vec<i32> = tiny.iter().map(|t| t.round() as i32).collect();
        let baseline = c.with_tiny(dtype, &rounded);
        let flushed = c.with_tiny(dtype, &[0; 16]);
        let m = c.judge(dtype, &flushed, &baseline);
        assert!(!m.passed, "{dtype:?}: a flush to zero passed");
        // Only the stratum's rules see it: the whole output's max and mean do not.
        assert!(
            m.reason.starts_with("subnormal outputs (16 elements")
                && m.reason.contains(": max error ")
                && m.reason.contains(": mean error ")
                && !m.reason.contains("max abs error")
                && !m.reason.contains("mean abs error"),
            "{dtype:?}: {}",
            m.reason
        );
        assert!(m.reason.contains("> 2 x baseline"), "{}", m.reason);
        assert!(m.reason.contains("largest at d=255"), "{}", m.reason);
        assert_eq!(m.extra["subnormal_count"], 16.0);
        assert!(m.extra["baseline_subnormal_max_abs"] > 0.0);
        // The honest baseline itself passes.
        let m = c.judge(dtype, &baseline, &baseline);
        assert!(m.passed, "{dtype:?}: {}", m.reason);
    }
}

#[test]
fn an_honest_rounding_passes_against_a_baseline_exact_on_the_subnormal_grid() {
    // The exact values lie on the grid: the baseline's error there is 0.
    let tiny: Vec<f64> = (0..8).map(|i| 20.0 + 3.0 * i as f64).collect();
    for (dtype, step) in [(ElemType::Bf16, BF16_STEP), (ElemType::F16, F16_STEP)] {
        let c = case(dtype, 120, &tiny);
        let exact: Vec<i32> = tiny.iter().map(|&t| t as i32).collect();
        let baseline = c.with_tiny(dtype, &exact);
        // A kernel whose arithmetic lands just across a tie rounds one step away: passes.
        let one_off: Vec<i32> = exact.iter().map(|&e| e + 1).collect();
        let m = c.judge(dtype, &c.with_tiny(dtype, &one_off), &baseline);
        assert!(m.passed, "{dtype:?}: {}", m.reason);
        assert_eq!(m.extra["baseline_subnormal_max_abs"], 0.0);
        assert_eq!(m.extra["npu_subnormal_max_abs"], step);
        assert_eq!(m.extra["subnormal_step"], step);
        // Two steps off one element is not a rounding: fails the max rule only.
        let mut two_off = exact.clone();
        two_off[3] += 2;
        let m = c.judge(dtype, &c.with_tiny(dtype, &two_off), &baseline);
        assert!(!m.passed);
        assert!(
            m.reason.contains("subnormal outputs")
                && m.reason.contains(": max error")
                && !m.reason.contains(": mean error"),
            "{dtype:?}: {}",
            m.reason
        );
    }
}

#[test]
fn an_honest_rounding_off_the_grid_passes_against_a_rounding_baseline() {
    // Exact values 0.3 step past a grid point: the baseline (nearest) errs by 0.3 step, a
    // kernel rounding up by 0.7 step, within 2 x 0.3 + 1 steps.
    let tiny: Vec<f64> = (0..32).map(|i| -(40.3 + i as f64)).collect();
    let c = case(ElemType::Bf16, 100, &tiny);
    let nearest: Vec<i32> = tiny.iter().map(|t| t.round() as i32).collect();
    let away: Vec<i32> = tiny.iter().map(|t| t.floor() as i32).collect();
    let m = c.judge(
        ElemType::Bf16,
        &c.with_tiny(ElemType::Bf16, &away),
        &c.with_tiny(ElemType::Bf16, &nearest),
    );
    assert!(m.passed, "{}", m.reason);
    assert_eq!(m.extra["subnormal_count"], 32.0);
}

#[test]
fn nan_on_a_subnormal_output_fails() {
    let tiny = [17.0, -18.0, 19.0];
    let c = case(ElemType::Bf16, 61, &tiny);
    let baseline = c.with_tiny(ElemType::Bf16, &[17, -18, 19]);
    let mut bits = baseline.bits16().unwrap();
    bits[62] = 0x7FC0;
    let nan = Tensor::from_bits16(ElemType::Bf16, vec![64], &bits);
    let m = c.judge(ElemType::Bf16, &nan, &baseline);
    assert!(!m.passed);
    assert!(m.reason.contains("non-finite: 1 elements"), "{}", m.reason);
    // Every element of the stratum NaN: still fails.
    bits[61] = 0x7FC0;
    bits[63] = 0xFFC1;
    let nan = Tensor::from_bits16(ElemType::Bf16, vec![64], &bits);
    let m = c.judge(ElemType::Bf16, &nan, &baseline);
    assert!(!m.passed, "{}", m.reason);
}

#[test]
fn an_output_without_subnormal_values_is_judged_and_reported_as_before() {
    let c = case(ElemType::Bf16, 64, &[]);
    let t = c.with_tiny(ElemType::Bf16, &[]);
    let m = c.judge(ElemType::Bf16, &t, &t);
    assert!(m.passed, "{}", m.reason);
    assert!(!m.extra.contains_key("subnormal_count"), "{:?}", m.extra);
    // Exact zeros are not in the stratum: a zero cannot be flushed.
    let mut oracle = c.oracle.clone();
    oracle[5] = 0.0;
    let mut bits = t.bits16().unwrap();
    bits[5] = 0;
    let zeroed = Tensor::from_bits16(ElemType::Bf16, vec![64], &bits);
    let z = Case {
        oracle,
        normal_bits: bits,
    };
    let m = z.judge(ElemType::Bf16, &zeroed, &zeroed);
    assert!(m.passed, "{}", m.reason);
    assert!(!m.extra.contains_key("subnormal_count"), "{:?}", m.extra);
}
