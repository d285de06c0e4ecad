//! Which explicit vector forms run: a CPU feature is used when the CPU has it and the process
//! has not switched it off. `CONFORM_NO_SIMD=1` switches off every explicit vector form
//! (AVX-512, AVX2, SSSE3), leaving the portable forms the compiler vectorises on any target —
//! the code paths an aarch64 (Atlas) host takes — so an x86 machine can check that they give
//! the same bits; `CONFORM_NO_AVX512=1` switches off AVX-512 only (the AVX2 forms then run).
//! The answers are read once per process. Results never depend on them (tested on every form).

use std::sync::OnceLock;

fn switched_off(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty() && v != "0")
}

fn no_simd() -> bool {
    static OFF: OnceLock<bool> = OnceLock::new();
    *OFF.get_or_init(|| switched_off("CONFORM_NO_SIMD"))
}

/// Whether the AVX-512F forms run.
#[cfg(target_arch = "x86_64")]
pub fn avx512() -> bool {
    static USE: OnceLock<bool> = OnceLock::new();
    *USE.get_or_init(|| {
        std::is_x86_feature_detected!("avx512f") && !no_simd() && !switched_off("CONFORM_NO_AVX512")
    })
}

/// Whether the AVX2 forms run.
#[cfg(target_arch = "x86_64")]
pub fn avx2() -> bool {
    static USE: OnceLock<bool> = OnceLock::new();
    *USE.get_or_init(|| std::is_x86_feature_detected!("avx2") && !no_simd())
}

/// Whether the SSSE3 forms run.
#[cfg(target_arch = "x86_64")]
pub fn ssse3() -> bool {
    static USE: OnceLock<bool> = OnceLock::new();
    *USE.get_or_init(|| std::is_x86_feature_detected!("ssse3") && !no_simd())
}

/// The vector forms in use, in words (for benchmarks and reports).
pub fn description() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512() {
            return "AVX-512";
        }
        if avx2() {
            return "AVX2";
        }
    }
    "portable"
}
