//! Attention: the exact f64 oracle and kernel-emulating recipes (FlashAttention-2 online
//! softmax, vLLM two-pass, split-KV) over contiguous or paged K/V.
//!
//! - [`params`]: configuration (torch_npu names) and its validation into a [`Geometry`];
//! - [`mask`]: sparse modes, explicit masks, valid lengths;
//! - [`oracle`]: exact attention in f64, rounded once by the caller;
//! - [`recipe`]: every numerically relevant kernel choice, and the presets;
//! - [`online`], [`two_pass`], [`split_kv`]: the recipe algorithms; [`kernel`]: the tile
//!   products with fixed reduction orders;
//! - [`flash`]: contiguous inputs in any layout; [`paged`]: K/V through a block table.
//!
//! Every entry point is deterministic: parallel over fixed (batch, head, query-row) chunks,
//! results written in a fixed order, so the bits do not depend on the thread count.

pub mod ascend_knobs;
pub mod error;
pub mod flash;
pub mod ifa_tiling;
pub mod kernel;
pub mod mask;
pub mod mla;
pub mod online;
pub mod oracle;
pub mod paged;
pub mod params;
pub mod pfa_tiling;
pub mod recipe;
mod row_sink;
pub mod rows;
pub mod split_kv;
#[cfg(target_arch = "x86_64")]
pub(crate) mod tile_avx512;
pub mod two_pass;
pub mod vexp;

pub use error::AttentionError;
pub use flash::{attention, AttentionInputs, AttentionOutput};
pub use oracle::{oracle, OracleOutput};
pub use paged::{gather_contiguous, paged_attention, CacheData, PagedKv};
pub use params::{AttentionConfig, Geometry, InputLayout, SparseMode};
pub use recipe::{Recipe, PRESETS};
