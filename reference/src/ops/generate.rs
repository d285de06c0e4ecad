//! Deterministic input values: distributions over a caller-supplied stream of random bits.
//!
//! The bit source is supplied by the caller (the harness uses a ChaCha20 stream keyed by case id
//! and seed), so this crate has no RNG dependency and the values depend only on the bits:
//! identical on every machine. Normal variates use Box-Muller with the pure-Rust libm.

use crate::math;
use crate::parallel::{map_elements, Threads};

/// A distribution of input values.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ValueDist {
    /// Uniform in [low, high).
    Uniform { low: f64, high: f64 },
    /// Normal with the given mean and standard deviation.
    Normal { mean: f64, std: f64 },
    /// CANN's test set: uniform(-1, 1) with a fraction of outliers scaled by `outlier_scale`
    /// (defaults: 0.1% outliers x1000).
    CannOutliers {
        #[serde(default = "default_outlier_fraction")]
        fraction: f64,
        #[serde(default = "default_outlier_scale")]
        outlier_scale: f64,
    },
    /// Special values mixed into uniform(-1, 1): ±0, subnormals and the largest finite value
    /// of the input dtype (the op supplies them), plus NaN/Inf only where the op allows.
    Special {
        #[serde(default = "default_special_fraction")]
        fraction: f64,
        #[serde(default)]
        non_finite: bool,
    },
}

fn default_outlier_fraction() -> f64 {
    0.001
}
fn default_outlier_scale() -> f64 {
    1000.0
}
fn default_special_fraction() -> f64 {
    0.05
}

impl Default for ValueDist {
    fn default() -> Self {
        ValueDist::Uniform {
            low: -1.0,
            high: 1.0,
        }
    }
}

/// Special values of a dtype that [`ValueDist::Special`] draws from.
#[derive(Clone, Debug, Default)]
pub struct SpecialValues {
    pub finite: Vec<f64>,
    pub non_finite: Vec<f64>,
}

/// A source of random bits plus the value distribution for this case.
pub struct GenContext<'a> {
    bits: &'a mut dyn FnMut() -> u64,
    pub dist: ValueDist,
    /// The recipe the case's expected outputs come from, for the regimes that depend on it
    /// (`rounding_ties`); `None` where the caller has none.
    pub recipe: Option<String>,
}

impl<'a> GenContext<'a> {
    /// Wraps a bit source.
    pub fn new(bits: &'a mut dyn FnMut() -> u64, dist: ValueDist) -> GenContext<'a> {
        GenContext {
            bits,
            dist,
            recipe: None,
        }
    }

    /// The same context, for a case whose expected outputs come from `recipe`.
    pub fn with_recipe(mut self, recipe: &str) -> GenContext<'a> {
        self.recipe = Some(recipe.to_string());
        self
    }

    /// 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        (self.bits)()
    }

    /// Uniform in [0, 1) with 53 random bits.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        unit_of(self.next_u64())
    }

    /// Uniform integer in [0, n) (n > 0), by rejection (no modulo bias).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let v = self.next_u64();
            if v < zone {
                return v % n;
            }
        }
    }

    /// A standard normal variate (Box-Muller, pure-Rust libm).
    pub fn standard_normal(&mut self) -> f64 {
        let w1 = self.next_u64();
        let w2 = self.next_u64();
        normal_of(w1, w2)
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }

    /// Writes every value of `required` into `slots` at distinct positions chosen from the
    /// stream (in a stream-chosen order), so a case holds each of them whatever the seed: the
    /// seed permutes positions and values, never presence. `Err(needed)` when `slots` is too
    /// short to hold them all.
    pub fn place_all<T: Copy>(&mut self, slots: &mut [T], required: &[T]) -> Result<(), usize> {
        if slots.len() < required.len() {
            return Err(required.len());
        }
        // A partial Fisher-Yates draw of distinct positions.
        let mut positions: Vec<usize> = (0..slots.len()).collect();
        for (i, value) in required.iter().enumerate() {
            let j = i + self.below((slots.len() - i) as u64) as usize;
            positions.swap(i, j);
            slots[positions[i]] = *value;
        }
        Ok(())
    }

    /// `n` values from the context's distribution rounded to `dtype` with `rounding`: the same
    /// tensor as [`Tensor::round_values`] of [`GenContext::values`], drawn and rounded a
    /// million values at a time, so a large operand never exists as f64 all at once.
    pub fn rounded_tensor(
        &mut self,
        dtype: super::ElemType,
        shape: Vec<usize>,
        special: &SpecialValues,
        rounding: crate::formats::Rounding,
    ) -> super::Tensor {
        const DRAW: usize = 1 << 20;
        let n: usize = shape.iter().product();
        let mut data = Vec::with_capacity(n * dtype.size_bytes());
        let mut left = n;
        while left > 0 {
            let take = left.min(DRAW);
            let v = self.values(take, special);
            data.extend_from_slice(
                &super::Tensor::round_values(dtype, vec![take], &v, rounding).data,
            );
            left -= take;
        }
        super::Tensor { dtype, shape, data }
    }

    /// `n` values from the context's distribution; `special` supplies the dtype's special values.
    ///
    /// Where every value takes a fixed number of words (all but [`ValueDist::Special`]), the
    /// words are drawn in stream order first and turned into values on every core: the same
    /// values as one at a time, for any thread count.
    pub fn values(&mut self, n: usize, special: &SpecialValues) -> Vec<f64> {
        let all = Threads::available();
        match self.dist.clone() {
            ValueDist::Uniform { low, high } => {
                let words: Vec<u64> = (0..n).map(|_| self.next_u64()).collect();
                map_elements(&words, all, |&w| low + (high - low) * unit_of(w))
            }
            ValueDist::Normal { mean, std } => {
                let words: Vec<[u64; 2]> =
                    (0..n).map(|_| [self.next_u64(), self.next_u64()]).collect();
                map_elements(&words, all, |&[w1, w2]| mean + std * normal_of(w1, w2))
            }
            ValueDist::CannOutliers {
                fraction,
                outlier_scale,
            } => {
                let words: Vec<[u64; 2]> =
                    (0..n).map(|_| [self.next_u64(), self.next_u64()]).collect();
                map_elements(&words, all, |&[w1, w2]| {
                    let v = 2.0 * unit_of(w1) - 1.0;
                    if unit_of(w2) < fraction {
                        v * outlier_scale
                    } else {
                        v
                    }
                })
            }
            // A variable number of words per value: one at a time.
            ValueDist::Special {
                fraction,
                non_finite,
            } => (0..n)
                .map(|_| self.special_or_uniform(fraction, non_finite, special))
                .collect(),
        }
    }

    /// One value of [`ValueDist::Special`]: a special value with probability `fraction`,
    /// otherwise uniform in (-1, 1).
    fn special_or_uniform(
        &mut self,
        fraction: f64,
        non_finite: bool,
        special: &SpecialValues,
    ) -> f64 {
        if self.unit() < fraction {
            let pool_non_finite = non_finite && !special.non_finite.is_empty();
            let total = special.finite.len()
                + if pool_non_finite {
                    special.non_finite.len()
                } else {
                    0
                };
            if total == 0 {
                0.0
            } else {
                let i = self.below(total as u64) as usize;
                if i < special.finite.len() {
                    special.finite[i]
                } else {
                    special.non_finite[i - special.finite.len()]
                }
            }
        } else {
            2.0 * self.unit() - 1.0
        }
    }
}

/// Uniform in [0, 1) from one word: its top 53 bits.
#[inline]
fn unit_of(w: u64) -> f64 {
    (w >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A standard normal variate from two words (Box-Muller, pure-Rust libm).
#[inline]
fn normal_of(w1: u64, w2: u64) -> f64 {
    let u1 = 1.0 - unit_of(w1); // (0, 1]
    let u2 = unit_of(w2);
    math::sqrt_f64(-2.0 * math::ln_f64(u1)) * libm::cos(2.0 * std::f64::consts::PI * u2)
}

/// The special values of a float dtype: ±0, the smallest subnormal, the largest subnormal, the
/// smallest normal and the largest finite value of each sign; non-finite: ±Inf and NaN.
pub fn special_values(dtype: crate::ops::ElemType) -> SpecialValues {
    use crate::formats::{BFLOAT16, FLOAT16, FLOAT32};
    let format = match dtype {
        crate::ops::ElemType::F16 => FLOAT16,
        crate::ops::ElemType::Bf16 => BFLOAT16,
        _ => FLOAT32,
    };
    let codes = [
        0u64,
        1,
        (1 << format.man_bits) - 1,
        1 << format.man_bits,
        format.max_finite_magnitude(),
    ];
    let sign = 1u64 << (format.bits() - 1);
    let mut finite = Vec::new();
    for c in codes {
        finite.push(format.decode_f64(c));
        finite.push(format.decode_f64(c | sign));
    }
    SpecialValues {
        finite,
        non_finite: vec![f64::INFINITY, f64::NEG_INFINITY, f64::NAN],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The batched draw (words first, values on every core) gives the values, and leaves the
    /// stream where, one value at a time, the scalar draws would: for each distribution with a
    /// fixed number of words per value, across the 2^16-element chunks of the parallel map.
    #[test]
    fn batched_values_equal_the_scalar_draws_and_consume_the_same_words() {
        let n = (1 << 16) * 3 + 5;
        let dists = [
            ValueDist::Uniform {
                low: -3.0,
                high: 5.0,
            },
            ValueDist::Normal {
                mean: 0.5,
                std: 2.0,
            },
            ValueDist::CannOutliers {
                fraction: 0.01,
                outlier_scale: 1000.0,
            },
        ];
        for dist in dists {
            let mut bits_a = counter();
            let mut a = GenContext::new(&mut bits_a, dist.clone());
            let batched = a.values(n, &SpecialValues::default());
            let after_batched = a.next_u64();
            let mut bits_b = counter();
            let mut b = GenContext::new(&mut bits_b, dist.clone());
            let scalar: Vec<f64> = (0..n)
                .map(|_| match dist {
                    ValueDist::Uniform { low, high } => low + (high - low) * b.unit(),
                    ValueDist::Normal { mean, std } => mean + std * b.standard_normal(),
                    ValueDist::CannOutliers {
                        fraction,
                        outlier_scale,
                    } => {
                        let v = 2.0 * b.unit() - 1.0;
                        if b.unit() < fraction {
                            v * outlier_scale
                        } else {
                            v
                        }
                    }
                    ValueDist::Special { .. } => unreachable!(),
                })
                .collect();
            assert_eq!(after_batched, b.next_u64(), "{dist:?}: stream position");
            assert!(
                batched
                    .iter()
                    .zip(&scalar)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "{dist:?}: values"
            );
        }
    }

    fn counter() -> impl FnMut() -> u64 {
        let mut g = crate::splitmix::SplitMix64::new(crate::splitmix::GAMMA);
        move || g.next_u64()
    }

    #[test]
    fn distributions_have_the_right_moments() {
        let mut bits = counter();
        let mut g = GenContext::new(
            &mut bits,
            ValueDist::Normal {
                mean: 1.0,
                std: 2.0,
            },
        );
        let v = g.values(200_000, &SpecialValues::default());
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64;
        approx::assert_abs_diff_eq!(mean, 1.0, epsilon = 0.02);
        approx::assert_abs_diff_eq!(var.sqrt(), 2.0, epsilon = 0.02);
        g.dist = ValueDist::Uniform {
            low: -3.0,
            high: 5.0,
        };
        let u = g.values(100_000, &SpecialValues::default());
        assert!(u.iter().all(|&x| (-3.0..5.0).contains(&x)));
    }

    #[test]
    fn outliers_and_specials_appear_at_the_requested_rate() {
        let mut bits = counter();
        let mut g = GenContext::new(
            &mut bits,
            ValueDist::CannOutliers {
                fraction: 0.01,
                outlier_scale: 1000.0,
            },
        );
        let v = g.values(100_000, &SpecialValues::default());
        let outliers = v.iter().filter(|x| x.abs() > 1.0).count();
        assert!((700..1300).contains(&outliers), "{outliers}");
        g.dist = ValueDist::Special {
            fraction: 0.5,
            non_finite: true,
        };
        let s = g.values(10_000, &special_values(crate::ops::ElemType::Bf16));
        assert!(s.iter().any(|x| x.is_nan()));
        assert!(s.contains(&f64::INFINITY));
        assert!(s.iter().any(|&x| x != 0.0 && x.abs() < 1e-38));
    }

    #[test]
    fn below_and_shuffle_are_permutations() {
        let mut bits = counter();
        let mut g = GenContext::new(&mut bits, ValueDist::default());
        let mut v: Vec<u32> = (0..100).collect();
        g.shuffle(&mut v);
        let mut s = v.clone();
        s.sort();
        assert_eq!(s, (0..100).collect::<Vec<_>>());
        assert_ne!(v, s);
        assert!((0..1000).all(|_| g.below(7) < 7));
    }
}
