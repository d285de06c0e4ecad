//! Blocked matmul kernels with the exact bits of the scalar definitions:
//! [`lanes16`] for the recipes' fixed-order f32 products ([`crate::dot::dot_f32`] per element)
//! and [`sequential_f64`] for the oracle's f64 sums ([`crate::dot::dot_f64`] per element).

pub mod lanes16;
pub mod sequential_f64;

pub use lanes16::matmul_lanes16;
pub use sequential_f64::{matmul_sequential_f64, BLayout, OracleElem};
