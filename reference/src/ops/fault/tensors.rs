//! Byte-level tensor edits shared by the faults: reshaping without moving data, integer
//! tensors read and written back, quiet NaNs, and moving rows.

use crate::ops::{ElemType, OpError, Tensor, TensorMap};

/// Gives `t` the shape `shape` when it has the same number of elements (a layout read with
/// another layout's shape; the bytes stay where they are).
pub(crate) fn reinterpret(t: &mut Tensor, shape: &[usize]) {
    if t.shape != shape && shape.iter().product::<usize>() == t.numel() {
        t.shape = shape.to_vec();
    }
}

/// A quiet NaN of `dtype`, little-endian, or `None` for integer types.
pub(crate) fn nan_bytes(dtype: ElemType) -> Option<Vec<u8>> {
    Some(match dtype {
        ElemType::Bf16 => 0x7FC0u16.to_le_bytes().to_vec(),
        ElemType::F16 => 0x7E00u16.to_le_bytes().to_vec(),
        ElemType::F32 => 0x7FC0_0000u32.to_le_bytes().to_vec(),
        ElemType::F64 => 0x7FF8_0000_0000_0000u64.to_le_bytes().to_vec(),
        _ => return None,
    })
}

/// Writes `bytes` (one element) at element index `i`.
pub(crate) fn set_element(t: &mut Tensor, i: usize, bytes: &[u8]) {
    let w = t.dtype.size_bytes();
    t.data[i * w..(i + 1) * w].copy_from_slice(bytes);
}

/// An integer tensor's values.
pub(crate) fn ints(op: &str, name: &str, t: &Tensor) -> Result<Vec<i64>, OpError> {
    t.to_i64_vec().map_err(|e| OpError::InvalidInput {
        op: op.to_string(),
        input: name.to_string(),
        message: e.to_string(),
    })
}

/// Writes integer values back into an I32 or I64 tensor.
pub(crate) fn set_ints(t: &mut Tensor, values: &[i64]) {
    t.data = match t.dtype {
        ElemType::I32 => values
            .iter()
            .flat_map(|&v| (v as i32).to_le_bytes())
            .collect(),
        _ => values.iter().flat_map(|&v| v.to_le_bytes()).collect(),
    };
}

/// Moves row `src` of `from` to row `dst` of `to` (rows of `len` elements, same dtype).
pub(crate) fn copy_row(from: &Tensor, src: usize, to: &mut Tensor, dst: usize, len: usize) {
    let w = from.dtype.size_bytes() * len;
    to.data[dst * w..(dst + 1) * w].copy_from_slice(&from.data[src * w..(src + 1) * w]);
}

/// The named tensor, or an error naming it.
pub(crate) fn get_mut<'a>(
    op: &str,
    map: &'a mut TensorMap,
    name: &str,
) -> Result<&'a mut Tensor, OpError> {
    map.get_mut(name).ok_or_else(|| OpError::MissingInput {
        op: op.to_string(),
        input: name.to_string(),
    })
}

/// Reads a parameter as an unsigned integer.
pub(crate) fn param_usize(params: &serde_json::Value, key: &str) -> Option<usize> {
    params.get(key).and_then(|v| v.as_u64()).map(|v| v as usize)
}
