//! conform-targets: implementations under test.
pub mod poison;
pub mod reference_target;
pub mod target;
pub mod tensor_file;
