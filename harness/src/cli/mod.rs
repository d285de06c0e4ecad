//! Command-line commands, one file per command area.

pub mod mc2;
