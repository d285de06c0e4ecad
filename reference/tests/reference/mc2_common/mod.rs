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

/// The tests' deterministic bit source.
pub use conform_reference::splitmix::SplitMix64 as SplitMix;

/// `len` values uniform in [-1, 1) rounded to `dtype`.
pub fn tensor(rng: &mut SplitMix, len: usize, dtype: DType) -> Vec<f32> {
    (0..len)
        .map(|_| dtype.quantize_f32(rng.uniform(-1.0, 1.0) as f32, Rounding::RNE))
        .collect()
}
