//! A plain in-memory tensor: element type, shape and little-endian bytes. The exchange format
//! between ops, targets and the harness (which stores it as safetensors).

use crate::formats::{bf16, f16, Rounding};
use crate::parallel::{map_elements, Threads};
use std::collections::BTreeMap;
use thiserror::Error;

/// Element types, named as safetensors names them: every type a tensor can be stored as. Their
/// names, the parser and the conversions to the float subsets are in [`crate::dtype`].
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum ElemType {
    F64,
    F32,
    F16,
    #[serde(rename = "BF16")]
    Bf16,
    U8,
    I32,
    I64,
    /// Signed 8-bit integers (`dynamic_quant`'s quantised output and `pa_decode_int8`'s INT8 KV
    /// caches, torch.int8).
    I8,
}

impl ElemType {
    /// Whether the 16-bit pattern `bits` is a nonzero subnormal of this type (f16 when `F16`,
    /// bf16 otherwise: the two 16-bit float outputs).
    pub fn is_half_subnormal(self, bits: u16) -> bool {
        let exp = if self == ElemType::F16 {
            0x7C00
        } else {
            0x7F80
        };
        bits & exp == 0 && bits & 0x7FFF != 0
    }

    /// Every element type, in declaration order (for exhaustive tests and tables).
    pub const ALL: [ElemType; 8] = [
        ElemType::F64,
        ElemType::F32,
        ElemType::F16,
        ElemType::Bf16,
        ElemType::U8,
        ElemType::I32,
        ElemType::I64,
        ElemType::I8,
    ];

    /// Bytes per element.
    pub fn size_bytes(self) -> usize {
        match self {
            ElemType::F64 | ElemType::I64 => 8,
            ElemType::F32 | ElemType::I32 => 4,
            ElemType::F16 | ElemType::Bf16 => 2,
            ElemType::U8 | ElemType::I8 => 1,
        }
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            ElemType::F64 | ElemType::F32 | ElemType::F16 | ElemType::Bf16
        )
    }
}

/// Tensor construction or access errors.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TensorError {
    #[error("tensor has {actual} bytes, {dtype:?} {shape:?} needs {expected}")]
    WrongByteLength {
        dtype: ElemType,
        shape: Vec<usize>,
        expected: usize,
        actual: usize,
    },
    #[error("tensor of {dtype:?} cannot be read as {wanted}")]
    WrongType {
        dtype: ElemType,
        wanted: &'static str,
    },
    #[error("tensor shape {0:?} overflows")]
    ShapeOverflow(Vec<usize>),
}

/// A dense row-major tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tensor {
    pub dtype: ElemType,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

/// Named tensors, in a stable (sorted) order.
pub type TensorMap = BTreeMap<String, Tensor>;

impl Tensor {
    /// A batch's block tables as the int32 `[batch, max_blocks]` tensor PagedAttention takes.
    pub fn block_table(t: &crate::kv::BlockTable) -> Tensor {
        Tensor::from_i32(vec![t.batch, t.max_blocks], &t.entries)
    }

    /// Builds a tensor, checking the byte length against dtype and shape.
    pub fn new(dtype: ElemType, shape: Vec<usize>, data: Vec<u8>) -> Result<Tensor, TensorError> {
        let n = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .and_then(|n| n.checked_mul(dtype.size_bytes()))
            .ok_or_else(|| TensorError::ShapeOverflow(shape.clone()))?;
        if n != data.len() {
            return Err(TensorError::WrongByteLength {
                dtype,
                shape,
                expected: n,
                actual: data.len(),
            });
        }
        Ok(Tensor { dtype, shape, data })
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// An f32 tensor.
    pub fn from_f32(shape: Vec<usize>, values: &[f32]) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), values.len());
        Tensor {
            dtype: ElemType::F32,
            shape,
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    /// An f64 tensor.
    pub fn of_f64(shape: Vec<usize>, values: &[f64]) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), values.len());
        Tensor {
            dtype: ElemType::F64,
            shape,
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    /// A 16-bit float tensor (F16 or BF16) from raw bit patterns.
    pub fn from_bits16(dtype: ElemType, shape: Vec<usize>, bits: &[u16]) -> Tensor {
        debug_assert!(matches!(dtype, ElemType::F16 | ElemType::Bf16));
        debug_assert_eq!(shape.iter().product::<usize>(), bits.len());
        Tensor {
            dtype,
            shape,
            data: bits.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    /// A U8 tensor.
    pub fn from_u8(shape: Vec<usize>, bytes: Vec<u8>) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), bytes.len());
        Tensor {
            dtype: ElemType::U8,
            shape,
            data: bytes,
        }
    }

    /// An I8 tensor.
    pub fn from_i8(shape: Vec<usize>, values: &[i8]) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), values.len());
        Tensor {
            dtype: ElemType::I8,
            shape,
            data: values.iter().map(|&v| v as u8).collect(),
        }
    }

    /// An I32 tensor.
    pub fn from_i32(shape: Vec<usize>, values: &[i32]) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), values.len());
        Tensor {
            dtype: ElemType::I32,
            shape,
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    /// A floating tensor of `dtype` holding `values` rounded ONCE from f64 with `rounding`.
    pub fn round_values(
        dtype: ElemType,
        shape: Vec<usize>,
        values: &[f64],
        rounding: Rounding,
    ) -> Tensor {
        match dtype {
            ElemType::F64 => Tensor::of_f64(shape, values),
            // Element-wise, on every core (the bits never depend on the thread count).
            ElemType::F32 => {
                let v = map_elements(values, Threads::available(), |&x| {
                    crate::formats::f32::f64_to_f32(x, rounding)
                });
                Tensor::from_f32(shape, &v)
            }
            ElemType::F16 => {
                let v = map_elements(values, Threads::available(), |&x| {
                    f16::f64_to_f16(x, rounding)
                });
                Tensor::from_bits16(ElemType::F16, shape, &v)
            }
            ElemType::Bf16 => {
                let v = map_elements(values, Threads::available(), |&x| {
                    bf16::f64_to_bf16(x, rounding)
                });
                Tensor::from_bits16(ElemType::Bf16, shape, &v)
            }
            ElemType::I8 => {
                // Saturating to int8 (callers hold exact integers here, the oracle's outputs).
                let v: Vec<i8> = values
                    .iter()
                    .map(|&x| x.clamp(i8::MIN as f64, i8::MAX as f64) as i8)
                    .collect();
                Tensor::from_i8(shape, &v)
            }
            ElemType::U8 | ElemType::I32 | ElemType::I64 => {
                // Integers: round to nearest with the given mode's tie rule is not meaningful;
                // callers build integer tensors with the typed constructors.
                let v: Vec<i32> = values.iter().map(|&x| x as i32).collect();
                Tensor::from_i32(shape, &v)
            }
        }
    }

    /// Raw 16-bit patterns of an F16 or BF16 tensor.
    pub fn bits16(&self) -> Result<Vec<u16>, TensorError> {
        match self.dtype {
            ElemType::F16 | ElemType::Bf16 => Ok(self
                .data
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect()),
            dtype => Err(TensorError::WrongType {
                dtype,
                wanted: "16-bit float bits",
            }),
        }
    }

    /// Every element decoded exactly to f64 (floats; integers converted exactly).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self.dtype {
            ElemType::F64 => self
                .data
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            ElemType::F32 => self
                .data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect(),
            ElemType::F16 => self
                .data
                .chunks_exact(2)
                .map(|c| f16::f16_to_f64(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
            ElemType::Bf16 => self
                .data
                .chunks_exact(2)
                .map(|c| bf16::bf16_to_f64(u16::from_le_bytes([c[0], c[1]])))
                .collect(),
            ElemType::U8 => self.data.iter().map(|&b| b as f64).collect(),
            ElemType::I8 => self.data.iter().map(|&b| b as i8 as f64).collect(),
            ElemType::I32 => self
                .data
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect(),
            ElemType::I64 => self
                .data
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect(),
        }
    }

    /// Every element of a floating tensor of at most 32 bits, exactly as f32.
    pub fn to_f32_vec(&self) -> Result<Vec<f32>, TensorError> {
        match self.dtype {
            ElemType::F32 => Ok(self
                .data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect()),
            ElemType::F16 => Ok(self
                .data
                .chunks_exact(2)
                .map(|c| f16::f16_to_f32(u16::from_le_bytes([c[0], c[1]])))
                .collect()),
            ElemType::Bf16 => Ok(self
                .data
                .chunks_exact(2)
                .map(|c| bf16::bf16_to_f32(u16::from_le_bytes([c[0], c[1]])))
                .collect()),
            dtype => Err(TensorError::WrongType {
                dtype,
                wanted: "f32",
            }),
        }
    }

    /// Elements of an I32 or I64 tensor as i64.
    pub fn to_i64_vec(&self) -> Result<Vec<i64>, TensorError> {
        match self.dtype {
            ElemType::I32 => Ok(self
                .data
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as i64)
                .collect()),
            ElemType::I64 => Ok(self
                .data
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect()),
            dtype => Err(TensorError::WrongType {
                dtype,
                wanted: "integer",
            }),
        }
    }
}
