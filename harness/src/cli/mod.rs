//! Command-line front ends (the lead's cli/mod.rs replaces this file when merging).

pub mod perf;
