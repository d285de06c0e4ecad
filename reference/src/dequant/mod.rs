//! FP4 -> BF16/F16 dequantisation: packing layouts, MXFP4 and NVFP4 scaling, the seed 002
//! bit-placement conversion, and named recipes of real kernels.
//!
//! Entry points the harness calls:
//! - [`mxfp4::dequantize`] / [`mxfp4::dequantize_into`],
//! - [`nvfp4::dequantize`] / [`nvfp4::dequantize_into`],
//! - [`packing::pack`] / [`packing::unpack`],
//! - [`Fp4DequantRecipe::preset`] with [`PRESET_NAMES`].
//!
//! Every function checks its shapes and returns a [`DequantError`] naming the parameter; none
//! panics on bad input.

pub mod bit_placement;
pub mod decode;
pub mod error;
mod kernel;
pub mod mxfp4;
pub mod nvfp4;
pub mod packing;
pub mod recipe;

pub use error::DequantError;
pub use packing::{NibbleOrder, PackingLayout, TilePermutation};
pub use recipe::{
    Fp4DequantRecipe, Fp4Element, HalfType, ScaleDecode, ScaleOrder, W4a16Accumulation,
    PRESET_NAMES,
};
