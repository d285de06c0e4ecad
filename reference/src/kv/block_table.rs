//! The block table PagedAttention takes (as a tensor: `ops::Tensor::block_table`, int32
//! `[B, max_blocks]`), row `b`
//! listing the physical blocks of sequence `b` in logical order, padded with [`PAD_BLOCK`] (or a
//! caller's pad value) after its `ceil(seq_len / block_size)` used entries.

/// The default pad value of unused block table entries: `-1`, never a valid block, so a reader
/// that looks past a sequence's used entries fails loudly in the reference (the readers here
/// validate exactly the entries a length needs). Hardware kernels do not validate block ids;
/// for them pad with a valid block id instead (vLLM pads with 0; vLLM v1 reserves block 0 as a
/// null block for that purpose) and fill that block with NaN.
pub const PAD_BLOCK: i32 = -1;

/// A batch's block tables, row-major `[batch, max_blocks]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockTable {
    pub batch: usize,
    pub max_blocks: usize,
    /// The value of unused entries.
    pub pad: i32,
    pub entries: Vec<i32>,
}

impl BlockTable {
    /// Row `b` (`max_blocks` entries), `None` past the last row.
    pub fn row(&self, b: usize) -> Option<&[i32]> {
        if b >= self.batch {
            return None;
        }
        self.entries
            .get(b * self.max_blocks..(b + 1) * self.max_blocks)
    }
}
