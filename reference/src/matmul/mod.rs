//! Matrix multiplications of the reference.

pub mod w4a16;
