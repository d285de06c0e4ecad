//! Parameter paths: behaviours of an op family's kernels that some values of a case's
//! parameters reach and others do not — a branch (an offset input, group indices, several new
//! tokens per sequence) or a stride-bearing size that is not a multiple of 2, 4 and 8 (an odd
//! head count, an odd number of scale groups per row), where a kernel that pads, aligns or
//! takes a stride from the wrong axis goes wrong while every power-of-two shape hides it.
//!
//! Each family names its paths ([`super::OpFamily::paths`]); `conform adequacy` counts the
//! quick-tier cases that reach each and gates on two, so that no path rests on one case.

/// One parameter path of an op family, and whether a case's parameters reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamPath {
    /// A stable name, unique within the family (`group_index`, `odd_heads`).
    pub name: &'static str,
    /// What the path is and which bug it exposes, in one line.
    pub description: &'static str,
    /// Whether the case's parameters reach it.
    pub reached: bool,
}

impl ParamPath {
    pub fn new(name: &'static str, description: &'static str, reached: bool) -> ParamPath {
        ParamPath {
            name,
            description,
            reached,
        }
    }
}

/// Whether a stride-bearing size hides nothing behind a power-of-two factor: odd and above 1
/// (so no multiple of 2, 4 or 8; a size of 1 has no stride to get wrong).
pub fn odd_above_one(n: usize) -> bool {
    n > 1 && n % 2 == 1
}

/// The attention families' `odd_heads` path: an odd query or KV head count above 1.
pub fn odd_heads(num_heads: usize, num_key_value_heads: usize) -> ParamPath {
    ParamPath::new(
        "odd_heads",
        "an odd query or KV head count above 1: head strides that no power of two hides",
        odd_above_one(num_heads) || odd_above_one(num_key_value_heads),
    )
}

/// The paged families' `partial_last_block` path: some context length is not a multiple of
/// `block_size`.
pub fn partial_last_block(lengths: &[i64], block_size: usize) -> ParamPath {
    let bs = block_size.max(1) as i64;
    ParamPath::new(
        "partial_last_block",
        "a context length that is not a multiple of block_size: the last block's unused slots must not be read",
        lengths.iter().any(|&l| l > 0 && l % bs != 0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_sizes_above_one_are_the_stride_paths() {
        assert!(!odd_above_one(0) && !odd_above_one(1) && !odd_above_one(8));
        assert!(odd_above_one(3) && odd_above_one(49));
    }
}
