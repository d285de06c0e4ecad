//! The paged KV cache: layouts, the block manager, scatter (reshape-and-cache) and gather.

pub mod layout;

pub use layout::{CacheGeometry, KvCacheLayout, KvLayoutError};
