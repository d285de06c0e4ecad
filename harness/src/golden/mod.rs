//! The golden store (`golden/`): the reference's inputs and outputs for every quick-tier case
//! as safetensors files, and BLAKE3 digests of every case's tensors in `MANIFEST.toml`.

pub mod bless;
pub mod diff;
pub mod error;
pub mod format;
pub mod manifest;
pub mod review;
pub mod store;
pub mod text;
pub mod verify;

pub use error::GoldenError;
pub use store::GoldenStore;
