//! Fixed-order f32 dot products.
//!
//! Every reduction in the reference has a documented order that does not depend on the thread
//! count or the CPU's vector width. [`dot_f32`] keeps [`LANES`] independent accumulators:
//! element `j` is multiplied (one f32 rounding) and added (one f32 rounding) into lane `j % 16`
//! in increasing `j`; the lanes are then combined by a fixed pairwise tree
//! `l[i] += l[i + 8]`, then `+4`, `+2`, `+1`. No FMA is used (Rust never contracts on its own).
//! Plain arrays let the compiler vectorise this on AVX2, AVX-512 and NEON with the same bits.

/// Number of independent accumulators in [`dot_f32`].
pub const LANES: usize = 16;

/// Combines 16 lane accumulators with the fixed tree described in the module docs.
#[inline(always)]
pub fn combine_lanes(mut acc: [f32; LANES]) -> f32 {
    for i in 0..8 {
        acc[i] += acc[i + 8];
    }
    for i in 0..4 {
        acc[i] += acc[i + 4];
    }
    for i in 0..2 {
        acc[i] += acc[i + 2];
    }
    acc[0] + acc[1]
}

/// The 16-lane fixed-order dot product of `a` and `b` (the shorter length is used).
#[inline]
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let mut ca = a.chunks_exact(LANES);
    let mut cb = b.chunks_exact(LANES);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    for (i, (x, y)) in ca.remainder().iter().zip(cb.remainder()).enumerate() {
        acc[i] += x * y;
    }
    combine_lanes(acc)
}

/// Strictly sequential f32 dot product: `((a0*b0 + a1*b1) + a2*b2) + ...`, for recipes that
/// model a scalar accumulation order.
#[inline]
pub fn dot_f32_sequential(a: &[f32], b: &[f32]) -> f32 {
    let mut s = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        s += x * y;
    }
    s
}

/// Exact-enough f64 dot product for oracles: f64 products of f32/bf16/f16 values are exact, and
/// the sum is accumulated in f64 sequentially.
#[inline]
pub fn dot_f64(a: &[f64], b: &[f64]) -> f64 {
    let mut s = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        s += x * y;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_order_is_the_documented_one() {
        // Values chosen so that a different association gives a different f32 result.
        let a: Vec<f32> = (0..37).map(|i| 1.0 + (i as f32) * 1e-3).collect();
        let b: Vec<f32> = (0..37)
            .map(|i| if i % 3 == 0 { 1e7 } else { -0.3 })
            .collect();
        let mut lanes = [0.0f32; LANES];
        for j in 0..37 {
            lanes[j % LANES] += a[j] * b[j];
        }
        let expected = combine_lanes(lanes);
        assert_eq!(dot_f32(&a, &b).to_bits(), expected.to_bits());
    }

    #[test]
    fn short_inputs_and_empty() {
        assert_eq!(dot_f32(&[], &[]), 0.0);
        assert_eq!(dot_f32(&[2.0], &[3.0]), 6.0);
        assert_eq!(dot_f32_sequential(&[1.0, 2.0], &[3.0, 4.0]), 11.0);
    }
}
