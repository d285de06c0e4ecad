//! conform-harness library.
