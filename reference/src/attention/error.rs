//! Typed errors of the attention reference. Every variant names the parameter, tensor or
//! recipe field at fault, so a bad case is reported, never a panic or an out-of-bounds read.

use thiserror::Error;

/// Why an attention configuration, its inputs or a recipe were rejected.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AttentionError {
    /// A configuration parameter (torch_npu name) is out of its domain.
    #[error("parameter `{param}`: {message}")]
    InvalidParam { param: String, message: String },
    /// An input tensor does not have the size the configuration implies.
    #[error("tensor `{tensor}`: expected {expected} elements ({shape:?}), got {actual}")]
    WrongInputSize {
        tensor: String,
        shape: Vec<usize>,
        expected: usize,
        actual: usize,
    },
    /// A block-table entry is negative or beyond the cache.
    #[error(
        "parameter `block_table`: entry [{batch}][{index}] = {value} is outside 0..{num_blocks}"
    )]
    BlockOutOfRange {
        batch: usize,
        index: usize,
        value: i64,
        num_blocks: usize,
    },
    /// A recipe field combination that no kernel uses or that cannot be evaluated.
    #[error("recipe `{recipe}`: field `{field}`: {message}")]
    InvalidRecipe {
        recipe: String,
        field: &'static str,
        message: String,
    },
}

impl AttentionError {
    /// Shorthand for [`AttentionError::InvalidParam`].
    pub fn param(param: impl Into<String>, message: impl Into<String>) -> AttentionError {
        AttentionError::InvalidParam {
            param: param.into(),
            message: message.into(),
        }
    }

    /// The parameter or tensor this error names.
    pub fn subject(&self) -> &str {
        match self {
            AttentionError::InvalidParam { param, .. } => param,
            AttentionError::WrongInputSize { tensor, .. } => tensor,
            AttentionError::BlockOutOfRange { .. } => "block_table",
            AttentionError::InvalidRecipe { field, .. } => field,
        }
    }
}
