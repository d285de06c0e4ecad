//! Physical layouts of a paged KV cache, as index arithmetic.
//!
//! A cache holds `num_blocks` blocks of `block_size` token slots; each slot holds `kv_heads`
//! heads of `head_dim` values. Layouts differ only in where element (block, slot, head, d)
//! lives, so every layout is one [`KvCacheLayout::offset`] function and conversions between
//! layouts are exact element moves.

use thiserror::Error;

/// Where element (block, slot, head, d) of a paged cache lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvCacheLayout {
    /// Ascend `BnBsH`: `[num_blocks, block_size, kv_heads * head_dim]`.
    #[serde(rename = "BnBsH")]
    BnBsH,
    /// Ascend `BnNBsD`: `[num_blocks, kv_heads, block_size, head_dim]`.
    #[serde(rename = "BnNBsD")]
    BnNBsD,
    /// vLLM key cache: `[num_blocks, kv_heads, head_dim / x, block_size, x]`, `x` elements of
    /// 16 bytes (8 for f16/bf16).
    VllmKey { x: usize },
    /// vLLM value cache: `[num_blocks, kv_heads, head_dim, block_size]`.
    VllmValue,
}

/// The logical size of a paged cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CacheGeometry {
    pub num_blocks: usize,
    pub block_size: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

/// A layout that does not fit a geometry, or a buffer of the wrong size.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum KvLayoutError {
    #[error("kv cache: {name} must be positive")]
    ZeroDimension { name: &'static str },
    #[error("kv cache: head_dim {head_dim} is not a multiple of the vLLM key packing x = {x}")]
    HeadDimNotMultipleOfX { head_dim: usize, x: usize },
    #[error("kv cache: buffer holds {actual} elements, layout {layout:?} needs {expected}")]
    WrongLength {
        layout: KvCacheLayout,
        expected: usize,
        actual: usize,
    },
    #[error("kv cache: size {0:?} overflows usize")]
    Overflow(CacheGeometry),
}

impl CacheGeometry {
    /// Number of token slots (`num_blocks * block_size`); slot `s` is offset `s % block_size`
    /// of block `s / block_size`.
    pub fn num_slots(&self) -> usize {
        self.num_blocks * self.block_size
    }

    /// Elements of one token row (`kv_heads * head_dim`).
    pub fn row_len(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Elements of one block (`block_size * kv_heads * head_dim`). In every layout the block is
    /// the outermost axis, so block `b` occupies `[b * block_len, (b + 1) * block_len)`.
    pub fn block_len(&self) -> usize {
        self.block_size * self.kv_heads * self.head_dim
    }

    /// Total number of elements.
    pub fn len(&self) -> usize {
        self.num_blocks * self.block_size * self.kv_heads * self.head_dim
    }

    /// Whether the cache holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks every dimension is positive and the total fits in memory arithmetic.
    pub fn validate(&self) -> Result<(), KvLayoutError> {
        for (name, v) in [
            ("num_blocks", self.num_blocks),
            ("block_size", self.block_size),
            ("kv_heads", self.kv_heads),
            ("head_dim", self.head_dim),
        ] {
            if v == 0 {
                return Err(KvLayoutError::ZeroDimension { name });
            }
        }
        self.num_blocks
            .checked_mul(self.block_size)
            .and_then(|v| v.checked_mul(self.kv_heads))
            .and_then(|v| v.checked_mul(self.head_dim))
            .map(|_| ())
            .ok_or(KvLayoutError::Overflow(*self))
    }
}

impl KvCacheLayout {
    /// Checks that this layout can describe `g`.
    pub fn validate(&self, g: &CacheGeometry) -> Result<(), KvLayoutError> {
        g.validate()?;
        if let KvCacheLayout::VllmKey { x } = *self
            && (x == 0 || !g.head_dim.is_multiple_of(x))
        {
            return Err(KvLayoutError::HeadDimNotMultipleOfX {
                head_dim: g.head_dim,
                x,
            });
        }
        Ok(())
    }

    /// Checks a buffer length against the layout and geometry.
    pub fn validate_buffer(&self, g: &CacheGeometry, len: usize) -> Result<(), KvLayoutError> {
        self.validate(g)?;
        if len != g.len() {
            return Err(KvLayoutError::WrongLength {
                layout: *self,
                expected: g.len(),
                actual: len,
            });
        }
        Ok(())
    }

    /// The tensor shape of a cache in this layout.
    pub fn shape(&self, g: &CacheGeometry) -> Vec<usize> {
        match *self {
            KvCacheLayout::BnBsH => vec![g.num_blocks, g.block_size, g.kv_heads * g.head_dim],
            KvCacheLayout::BnNBsD => vec![g.num_blocks, g.kv_heads, g.block_size, g.head_dim],
            KvCacheLayout::VllmKey { x } => {
                vec![g.num_blocks, g.kv_heads, g.head_dim / x, g.block_size, x]
            }
            KvCacheLayout::VllmValue => vec![g.num_blocks, g.kv_heads, g.head_dim, g.block_size],
        }
    }

    /// The linear offset of element (block, slot, head, d). Callers validate indices against
    /// the geometry first (the cache readers in this crate do).
    #[inline(always)]
    pub fn offset(
        &self,
        g: &CacheGeometry,
        block: usize,
        slot: usize,
        head: usize,
        d: usize,
    ) -> usize {
        match *self {
            KvCacheLayout::BnBsH => {
                ((block * g.block_size + slot) * g.kv_heads + head) * g.head_dim + d
            }
            KvCacheLayout::BnNBsD => {
                ((block * g.kv_heads + head) * g.block_size + slot) * g.head_dim + d
            }
            KvCacheLayout::VllmKey { x } => {
                ((((block * g.kv_heads + head) * (g.head_dim / x) + d / x) * g.block_size + slot)
                    * x)
                    + d % x
            }
            KvCacheLayout::VllmValue => {
                ((block * g.kv_heads + head) * g.head_dim + d) * g.block_size + slot
            }
        }
    }

    /// vLLM's key layout for elements of `elem_bytes` bytes: `x` packs 16 bytes (8 for
    /// f16/bf16, 4 for f32).
    pub fn vllm_key_for(elem_bytes: usize) -> KvCacheLayout {
        KvCacheLayout::VllmKey {
            x: (16 / elem_bytes.max(1)).max(1),
        }
    }

    /// Every layout, with vLLM's key packing `x` for elements of `elem_bytes` bytes.
    pub fn all(elem_bytes: usize) -> [KvCacheLayout; 4] {
        [
            KvCacheLayout::BnBsH,
            KvCacheLayout::BnNBsD,
            KvCacheLayout::vllm_key_for(elem_bytes),
            KvCacheLayout::VllmValue,
        ]
    }

    /// Logical axis names of [`KvCacheLayout::shape`], for reporting element positions.
    pub fn axes(&self) -> &'static [&'static str] {
        match self {
            KvCacheLayout::BnBsH => &["block", "slot", "hd"],
            KvCacheLayout::BnNBsD => &["block", "n", "slot", "d"],
            KvCacheLayout::VllmKey { .. } => &["block", "n", "d_hi", "slot", "x"],
            KvCacheLayout::VllmValue => &["block", "n", "d", "slot"],
        }
    }

    /// Whether the `head_dim` values of one (block, slot, head) are contiguous.
    pub fn rows_contiguous(&self) -> bool {
        matches!(self, KvCacheLayout::BnBsH | KvCacheLayout::BnNBsD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_is_a_bijection_onto_the_buffer() {
        let g = CacheGeometry {
            num_blocks: 3,
            block_size: 4,
            kv_heads: 2,
            head_dim: 16,
        };
        for layout in [
            KvCacheLayout::BnBsH,
            KvCacheLayout::BnNBsD,
            KvCacheLayout::VllmKey { x: 8 },
            KvCacheLayout::VllmValue,
        ] {
            layout.validate(&g).unwrap();
            let mut seen = vec![false; g.len()];
            for b in 0..g.num_blocks {
                for s in 0..g.block_size {
                    for h in 0..g.kv_heads {
                        for d in 0..g.head_dim {
                            let o = layout.offset(&g, b, s, h, d);
                            assert!(!seen[o], "{layout:?} maps two elements to {o}");
                            seen[o] = true;
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&x| x));
            assert_eq!(layout.shape(&g).iter().product::<usize>(), g.len());
        }
    }

    #[test]
    fn bad_geometry_is_a_typed_error() {
        let g = CacheGeometry {
            num_blocks: 1,
            block_size: 16,
            kv_heads: 1,
            head_dim: 12,
        };
        assert_eq!(
            KvCacheLayout::VllmKey { x: 8 }.validate(&g),
            Err(KvLayoutError::HeadDimNotMultipleOfX { head_dim: 12, x: 8 })
        );
        let z = CacheGeometry { num_blocks: 0, ..g };
        assert_eq!(
            KvCacheLayout::BnBsH.validate(&z),
            Err(KvLayoutError::ZeroDimension { name: "num_blocks" })
        );
        assert!(matches!(
            KvCacheLayout::BnBsH.validate_buffer(&g, 5),
            Err(KvLayoutError::WrongLength {
                expected: 192,
                actual: 5,
                ..
            })
        ));
    }
}
