//! Transcendental functions for the reference, all from the pure-Rust `libm` crate.
//!
//! The platform libm differs between glibc versions and between x86_64 and aarch64 (Atlas hosts
//! are Kunpeng aarch64); these do not. Nothing in the reference calls `f32::exp` & co.

/// e^x in f32 (libm `expf`).
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    libm::expf(x)
}

/// 2^x in f32 (libm `exp2f`).
#[inline(always)]
pub fn exp2_f32(x: f32) -> f32 {
    libm::exp2f(x)
}

/// Natural logarithm in f32 (libm `logf`).
#[inline(always)]
pub fn ln_f32(x: f32) -> f32 {
    libm::logf(x)
}

/// e^x in f64 (libm `exp`).
#[inline(always)]
pub fn exp_f64(x: f64) -> f64 {
    libm::exp(x)
}

/// Natural logarithm in f64 (libm `log`).
#[inline(always)]
pub fn ln_f64(x: f64) -> f64 {
    libm::log(x)
}

/// 2^x in f64 (libm `exp2`).
#[inline(always)]
pub fn exp2_f64(x: f64) -> f64 {
    libm::exp2(x)
}

/// Square root in f64 (correctly rounded by IEEE 754 on every platform; via libm for symmetry).
#[inline(always)]
pub fn sqrt_f64(x: f64) -> f64 {
    libm::sqrt(x)
}

/// Base-2 logarithm in f32 (libm `log2f`).
#[inline(always)]
pub fn log2_f32(x: f32) -> f32 {
    libm::log2f(x)
}

/// Fused multiply-add `a * b + c` in f32 with one rounding (libm `fmaf`, exact on every
/// platform), for recipes that model a kernel's FMA.
#[inline(always)]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    libm::fmaf(a, b, c)
}

/// log2(e) as the f32 nearest to it, the constant kernels fold into an exp2 scale.
pub const LOG2_E_F32: f32 = std::f32::consts::LOG2_E;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_log_are_inverse_on_representative_points() {
        for &x in &[-20.0f64, -1.5, -1e-9, 0.0, 0.5, 1.0, 10.0, 700.0] {
            let y = ln_f64(exp_f64(x));
            approx::assert_abs_diff_eq!(y, x, epsilon = 1e-15 * x.abs().max(1.0));
        }
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp2_f32(3.0), 8.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert!(ln_f32(0.0).is_infinite());
    }
}
