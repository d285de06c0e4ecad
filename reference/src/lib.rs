//! # conform-reference
//!
//! A bit-accurate, deterministic CPU reference for the kernels LLM inference runs on Ascend
//! NPUs: low-precision formats and FP4 dequantisation, W4A16 matmul, FlashAttention and
//! PagedAttention over a paged KV cache, and MC2 (matmul + all-reduce).
//!
//! Rules every module follows (why, and the sources: `docs/numerics.md`):
//! - every rounding point names a [`formats::Rounding`] and rounds once;
//! - transcendentals come from [`math`] (pure-Rust libm), never the platform;
//! - reductions have a fixed, documented order ([`dot`]); parallel work has a fixed
//!   decomposition and an ordered combine ([`parallel`]), so the bits never depend on the
//!   thread count or the CPU.
//!
//! This crate knows nothing of files, processes or command lines.

pub mod attention;
pub mod cancel;
pub mod cpu;
pub mod dequant;
pub mod dot;
pub mod dtype;
pub mod faults;
pub mod fidelity;
pub mod formats;
pub mod gemm;
pub mod knob;
pub mod knob_flips;
pub mod kv;
pub mod math;
pub mod matmul;
pub mod mc2;
pub mod ops;
pub mod parallel;
pub mod recipe_edit;
pub mod splitmix;
pub mod variant;
