//! conform-targets: implementations under test.
//!
//! - [`tensor_file`]: tensors on disk (safetensors), the one exchange format.
//! - [`poison`]: the pattern output buffers hold before a kernel runs.

pub mod poison;
pub mod tensor_file;
