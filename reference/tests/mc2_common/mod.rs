//! Shared helpers for the MC2 integration tests: the seed-000 cost models and a deterministic
//! random source.
#![allow(dead_code)]

use conform_reference::formats::{DType, Rounding};
use conform_reference::mc2::{AxisCost, CostAxis, PiecewiseCost, Polynomial, UnsplitTimes};

/// Seed 000's matmul figure: 803 us for M = 4096 (K = 3072, N = 8192, f16), linear in m.
pub fn seed_matmul() -> AxisCost {
    AxisCost::new(
        CostAxis::Rows,
        PiecewiseCost::single(
            "matmul",
            Polynomial::Linear {
                slope: 803.0 / 4096.0,
                intercept: 0.0,
            },
        )
        .unwrap(),
    )
}

/// Seed 000's all-reduce fit, x in MiB of the [m, N] output.
pub fn seed_comm() -> AxisCost {
    AxisCost::new(
        CostAxis::Mebibytes,
        PiecewiseCost::new(
            "communication",
            vec![
                Polynomial::Quadratic {
                    a: -0.9698202,
                    b: 27.0622573,
                    c: 14.769,
                },
                Polynomial::Linear {
                    slope: 13.58491263,
                    intercept: 61.508333,
                },
            ],
            vec![8.0],
        )
        .unwrap(),
    )
}

/// The seed's measured unsplit times (msProf): matmul 803 us, all-reduce 1071 us.
pub fn seed_unsplit() -> UnsplitTimes {
    UnsplitTimes {
        matmul_us: 803.0,
        comm_us: 1071.0,
    }
}

/// SplitMix64: a tiny deterministic generator for test data.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// `len` values uniform in [-1, 1) rounded to `dtype`.
    pub fn tensor(&mut self, len: usize, dtype: DType) -> Vec<f32> {
        (0..len)
            .map(|_| dtype.quantize_f32(self.uniform(-1.0, 1.0) as f32, Rounding::RNE))
            .collect()
    }
}
