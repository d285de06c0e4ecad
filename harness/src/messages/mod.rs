//! User-facing messages, one file per command area.

pub mod mc2;
