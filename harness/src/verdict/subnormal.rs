//! The subnormal stratum of an output: the elements whose exact (oracle) value is a nonzero
//! number below the output dtype's smallest normal, judged as their own population by the
//! policies that compare against a baseline (`error_ratio`).
//!
//! Next to normal-sized outputs, an error on a subnormal output is invisible: flushing a bf16
//! subnormal to zero errs by about 1e-38, an f16 one by at most 6.1e-5, far below the errors
//! of the normal-sized elements that set an output's max and mean. Judged over the stratum
//! alone (the target's max and mean |a - oracle| there against the baseline's over the same
//! elements), a flush is an error of the whole value, many times the baseline's rounding.
//!
//! An honest kernel's error on a subnormal output is its rounding to the subnormal grid, at
//! most half a step of the grid (the smallest subnormal) once rounded, plus what its
//! arithmetic carried. A baseline can be exact there (error 0); the limits therefore add one
//! step of the grid ([`SubnormalRange::step`]) to the ratio, so an honest rounding never fails
//! against an exact baseline, while a flushed element (at least an eighth of the smallest
//! normal in the suites' subnormal regimes: 16 steps in bf16, 128 in f16) cannot pass.
//!
//! The figures are gathered on one thread in flat order: they do not depend on the thread
//! count.

use super::index::format_index;
use super::lane::{Bf16Lane, F16Lane, F32Lane, F64Lane, Lane};
use conform_reference::ops::{ElemType, Tensor, TensorSpec};

/// The subnormal range of a float dtype.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SubnormalRange {
    /// The smallest positive normal value: the stratum holds |oracle| below it.
    pub min_normal: f64,
    /// The smallest positive subnormal: the spacing of the subnormal grid, and the absolute
    /// floor the stratum's limits add.
    pub step: f64,
}

impl SubnormalRange {
    /// The range of `dtype`; `None` for an integer type.
    pub(crate) fn of(dtype: ElemType) -> Option<SubnormalRange> {
        let (min_normal_exp, step_exp) = match dtype {
            ElemType::Bf16 => (-126, -133),
            ElemType::F16 => (-14, -24),
            ElemType::F32 => (-126, -149),
            ElemType::F64 => (-1022, -1074),
            ElemType::U8 | ElemType::I8 | ElemType::I32 | ElemType::I64 => return None,
        };
        Some(SubnormalRange {
            min_normal: libm::ldexp(1.0, min_normal_exp),
            step: libm::ldexp(1.0, step_exp),
        })
    }

    /// Whether an element whose exact value is `o` belongs to the stratum.
    fn holds(self, o: f64) -> bool {
        o != 0.0 && o.abs() < self.min_normal
    }
}

/// The figures of one tensor (the target's or the baseline's) over the subnormal stratum.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SubnormalStratum {
    /// The dtype's range (the stratum's bound and the floor of its limits).
    pub range: SubnormalRange,
    /// Elements of the stratum with a finite value in the tensor judged. (An element NaN or
    /// infinite there is left to the non-finite rule, which fails it whatever the policy.)
    pub count: u64,
    pub max_abs: f64,
    pub sum_abs: f64,
    /// Where the largest error is, as `format_index` writes it, with the value there and the
    /// oracle's.
    pub worst: Option<(String, f64, f64)>,
}

impl SubnormalStratum {
    pub(crate) fn mean_abs(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_abs / self.count as f64
        }
    }
}

/// The stratum's figures of `values` (the target's output or the baseline, in the output
/// dtype) against `oracle` (F64, or the output dtype). `None` for an integer output.
pub(crate) fn subnormal_stratum(
    values: &Tensor,
    oracle: &Tensor,
    spec: &TensorSpec,
) -> Option<SubnormalStratum> {
    let range = SubnormalRange::of(values.dtype)?;
    let numel = values.numel().min(oracle.numel());
    let (v, o) = (&values.data[..], &oracle.data[..]);
    macro_rules! lane {
        ($lane:ty) => {
            if oracle.dtype == ElemType::F64 {
                gather::<$lane, F64Lane>(v, o, numel, range)
            } else {
                gather::<$lane, $lane>(v, o, numel, range)
            }
        };
    }
    let (count, max_abs, sum_abs, worst) = match values.dtype {
        ElemType::Bf16 => lane!(Bf16Lane),
        ElemType::F16 => lane!(F16Lane),
        ElemType::F32 => lane!(F32Lane),
        ElemType::F64 => gather::<F64Lane, F64Lane>(v, o, numel, range),
        ElemType::U8 | ElemType::I8 | ElemType::I32 | ElemType::I64 => return None,
    };
    Some(SubnormalStratum {
        range,
        count,
        max_abs,
        sum_abs,
        worst: worst.map(|(flat, a, g)| (format_index(flat, &spec.shape, &spec.axes), a, g)),
    })
}

/// Count, max and sum of |v - o| over the stratum, in flat order, and where the max is.
#[allow(clippy::type_complexity)]
fn gather<V: Lane, G: Lane>(
    v: &[u8],
    o: &[u8],
    numel: usize,
    range: SubnormalRange,
) -> (u64, f64, f64, Option<(usize, f64, f64)>) {
    let (mut count, mut max_abs, mut sum_abs, mut worst) = (0u64, 0f64, 0f64, None);
    for i in 0..numel {
        let g = G::value(G::load(&o[i * G::BYTES..(i + 1) * G::BYTES]));
        if !range.holds(g) {
            continue;
        }
        let a = V::value(V::load(&v[i * V::BYTES..(i + 1) * V::BYTES]));
        if !a.is_finite() {
            continue;
        }
        let d = (a - g).abs();
        count += 1;
        sum_abs += d;
        if worst.is_none() || d > max_abs {
            max_abs = d;
            worst = Some((i, a, g));
        }
    }
    (count, max_abs, sum_abs, worst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ranges_are_the_dtypes_smallest_normal_and_subnormal() {
        let bf16 = SubnormalRange::of(ElemType::Bf16).unwrap();
        assert_eq!(bf16.min_normal, f32::MIN_POSITIVE as f64);
        assert_eq!(bf16.step, f32::from_bits(0x0001_0000) as f64);
        let f16 = SubnormalRange::of(ElemType::F16).unwrap();
        assert_eq!(f16.min_normal, 6.103515625e-5);
        assert_eq!(f16.step, 5.960464477539063e-8);
        let f32r = SubnormalRange::of(ElemType::F32).unwrap();
        assert_eq!(f32r.step, f32::from_bits(1) as f64);
        assert_eq!(SubnormalRange::of(ElemType::F64).unwrap().step, 5e-324);
        assert_eq!(SubnormalRange::of(ElemType::I8), None);
    }

    #[test]
    fn the_stratum_holds_nonzero_oracle_values_below_the_smallest_normal() {
        let spec = TensorSpec::new("y", ElemType::F16, vec![5], &["e"]);
        let min_normal = 6.103515625e-5;
        let oracle = Tensor::of_f64(
            vec![5],
            &[0.0, min_normal, min_normal / 2.0, -3e-6, f64::NAN],
        );
        // f16 bits: 0, min normal, min normal / 2 (0x0200), -0 (a flushed -3e-6), 1.0.
        let actual =
            Tensor::from_bits16(ElemType::F16, vec![5], &[0, 0x0400, 0x0200, 0x8000, 0x3C00]);
        let s = subnormal_stratum(&actual, &oracle, &spec).unwrap();
        assert_eq!(s.count, 2);
        assert_eq!(s.max_abs, 3e-6);
        assert_eq!(s.sum_abs, 3e-6);
        assert_eq!(s.worst, Some(("e=3".to_string(), -0.0, -3e-6)));
        assert_eq!(s.mean_abs(), 1.5e-6);
    }
}
