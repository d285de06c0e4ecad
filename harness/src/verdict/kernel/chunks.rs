//! The passes of a comparison over whole tensors: one pass over (actual, expected, golden) that
//! gathers every figure a verdict reports, and the lean baseline pass.
//!
//! Work is split into fixed chunks of [`CHUNK`] elements (independent of the thread count);
//! each chunk's figures are computed by the kernels of this module (blocks of 64 elements, sums
//! in a fixed order of 8 partial sums described there) and the chunks are combined in chunk
//! order on one thread, so every figure is bitwise identical for any thread count and any CPU.
//! No memory is allocated per element.

use super::{baseline_chunk, pass_chunk, KernelPath};
use crate::verdict::heatmap::HeatGeometry;
use crate::verdict::lane::{
    Bf16Lane, F16Lane, F32Lane, F64Lane, I32Lane, I64Lane, I8Lane, Lane, U8Lane,
};
use crate::verdict::pass::{PassConfig, PassStats};
use conform_reference::ops::{ElemType, Tensor};
use conform_reference::parallel::{map_tasks, Threads};

/// Elements per chunk of the parallel decomposition (fixed: the figures never depend on it
/// varying with the thread count).
pub const CHUNK: usize = 1 << 18;

fn pass_typed<A: Lane, G: Lane>(
    act: &[u8],
    exp: &[u8],
    gold: &[u8],
    numel: usize,
    cfg: &PassConfig<'_>,
    threads: Threads,
    path: KernelPath,
) -> PassStats {
    let n_chunks = numel.div_ceil(CHUNK);
    let parts = map_tasks(n_chunks, threads, |c| {
        let lo = c * CHUNK;
        let hi = (lo + CHUNK).min(numel);
        pass_chunk::<A, G>(
            &act[lo * A::BYTES..hi * A::BYTES],
            &exp[lo * A::BYTES..hi * A::BYTES],
            &gold[lo * G::BYTES..hi * G::BYTES],
            lo,
            cfg,
            path,
        )
    });
    let mut total = PassStats::new(cfg.heat.map_or(0, HeatGeometry::cells));
    for p in &parts {
        total.absorb(p);
    }
    total
}

/// The baseline pass: `baseline` against `golden` (same element count; golden of the same
/// dtype or F64), fixed chunks combined in order like [`run_pass`]. Fills the counts, the
/// absolute-error max and sum, and the small-value split (`small_value`); nothing else.
pub(crate) fn run_baseline_pass(
    baseline: &Tensor,
    golden: &Tensor,
    small_value: Option<(f64, f64)>,
    threads: Threads,
) -> PassStats {
    run_baseline_pass_on(baseline, golden, small_value, threads, KernelPath::Auto)
}

/// [`run_baseline_pass`] on a chosen kernel path (every path gives the same figures).
pub(crate) fn run_baseline_pass_on(
    baseline: &Tensor,
    golden: &Tensor,
    small_value: Option<(f64, f64)>,
    threads: Threads,
    path: KernelPath,
) -> PassStats {
    let numel = baseline.numel();
    let golden_f64 = golden.dtype == ElemType::F64 && baseline.dtype != ElemType::F64;
    fn typed<A: Lane, G: Lane>(
        b: &[u8],
        g: &[u8],
        numel: usize,
        small_value: Option<(f64, f64)>,
        threads: Threads,
        path: KernelPath,
    ) -> PassStats {
        let parts = map_tasks(numel.div_ceil(CHUNK), threads, |c| {
            let lo = c * CHUNK;
            let hi = (lo + CHUNK).min(numel);
            baseline_chunk::<A, G>(
                &b[lo * A::BYTES..hi * A::BYTES],
                &g[lo * G::BYTES..hi * G::BYTES],
                small_value,
                path,
            )
        });
        let mut total = PassStats::new(0);
        for p in &parts {
            total.absorb(p);
        }
        total
    }
    let (b, g) = (&baseline.data[..], &golden.data[..]);
    macro_rules! lane {
        ($lane:ty) => {
            if golden_f64 {
                typed::<$lane, F64Lane>(b, g, numel, small_value, threads, path)
            } else {
                typed::<$lane, $lane>(b, g, numel, small_value, threads, path)
            }
        };
    }
    match baseline.dtype {
        ElemType::Bf16 => lane!(Bf16Lane),
        ElemType::F16 => lane!(F16Lane),
        ElemType::F32 => lane!(F32Lane),
        ElemType::F64 => typed::<F64Lane, F64Lane>(b, g, numel, small_value, threads, path),
        ElemType::U8 => lane!(U8Lane),
        ElemType::I8 => lane!(I8Lane),
        ElemType::I32 => lane!(I32Lane),
        ElemType::I64 => lane!(I64Lane),
    }
}

/// Runs one pass. `actual` and `expected` share a dtype and length; `golden` has the same
/// element count and either that dtype or F64. The caller has checked all of this.
pub(crate) fn run_pass(
    actual: &Tensor,
    expected: &Tensor,
    golden: &Tensor,
    cfg: &PassConfig<'_>,
    threads: Threads,
) -> PassStats {
    run_pass_on(actual, expected, golden, cfg, threads, KernelPath::Auto)
}

/// [`run_pass`] on a chosen kernel path (every path gives the same figures).
pub(crate) fn run_pass_on(
    actual: &Tensor,
    expected: &Tensor,
    golden: &Tensor,
    cfg: &PassConfig<'_>,
    threads: Threads,
    path: KernelPath,
) -> PassStats {
    let numel = actual.numel();
    let golden_f64 = golden.dtype == ElemType::F64 && actual.dtype != ElemType::F64;
    let (a, e, g) = (&actual.data[..], &expected.data[..], &golden.data[..]);
    macro_rules! typed {
        ($lane:ty) => {
            if golden_f64 {
                pass_typed::<$lane, F64Lane>(a, e, g, numel, cfg, threads, path)
            } else {
                pass_typed::<$lane, $lane>(a, e, g, numel, cfg, threads, path)
            }
        };
    }
    match actual.dtype {
        ElemType::Bf16 => typed!(Bf16Lane),
        ElemType::F16 => typed!(F16Lane),
        ElemType::F32 => typed!(F32Lane),
        ElemType::F64 => pass_typed::<F64Lane, F64Lane>(a, e, g, numel, cfg, threads, path),
        ElemType::U8 => typed!(U8Lane),
        ElemType::I8 => typed!(I8Lane),
        ElemType::I32 => typed!(I32Lane),
        ElemType::I64 => typed!(I64Lane),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::pass::ElementRule;

    #[test]
    fn baseline_pass_agrees_with_the_full_kernel_on_every_figure_it_fills() {
        let n = CHUNK + 1000;
        let oracle: Vec<f64> = (0..n)
            .map(|i| {
                let x = ((i * 7919) % 10007) as f64 / 10007.0 - 0.5;
                if i % 977 == 0 {
                    f64::NAN
                } else if i % 1009 == 5 {
                    // The oracle's own infinities, and values beyond bf16's range (its
                    // infinities in the dtype): matched by the baseline or not.
                    [f64::INFINITY, f64::NEG_INFINITY, 4e38, -4e38][(i / 1009) % 4]
                } else {
                    x * 2f64.powi((i % 13) as i32 - 9)
                }
            })
            .collect();
        let base: Vec<u16> = oracle
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                if i % 1019 == 3 {
                    0x7F80 // +inf where the oracle is finite
                } else {
                    ((v as f32).to_bits() >> 16) as u16 ^ (i % 3 == 0) as u16
                }
            })
            .collect();
        let b = Tensor::from_bits16(ElemType::Bf16, vec![n], &base);
        let o = Tensor::of_f64(vec![n], &oracle);
        let small = Some((2f64.powi(-8), 2f64.powi(-16)));
        let cfg = PassConfig {
            rule: ElementRule::AbsAbove {
                limit: f64::INFINITY,
            },
            poison: &[],
            unwritten: None,
            small_value: small,
            heat: None,
            worst: false,
        };
        for threads in [Threads(1), Threads(3)] {
            let full = run_pass(&b, &b, &o, &cfg, threads);
            let lean = run_baseline_pass(&b, &o, small, threads);
            assert_eq!(
                (
                    lean.numel,
                    lean.comparable,
                    lean.non_comparable,
                    lean.non_finite
                ),
                (
                    full.numel,
                    full.comparable,
                    full.non_comparable,
                    full.non_finite
                )
            );
            assert_eq!((lean.max_abs, lean.sum_abs), (full.max_abs, full.sum_abs));
            assert_eq!(
                (lean.small, lean.small_err, lean.normal),
                (full.small, full.small_err, full.normal)
            );
            assert_eq!(
                (lean.normal_sum_rel, lean.normal_max_rel, lean.normal_sum_sq),
                (full.normal_sum_rel, full.normal_max_rel, full.normal_sum_sq)
            );
            assert!(lean.small_err > 0 && lean.non_comparable > 0 && lean.non_finite > 0);
        }
    }
}
