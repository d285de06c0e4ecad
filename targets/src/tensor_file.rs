//! Tensors on disk: a [`TensorMap`] plus string metadata as one safetensors file.
//!
//! This is the one file format of conform: golden data, worker inputs and worker outputs.
//! Packed FP4 codes and E8M0 scales are stored as `U8` (Python's safetensors cannot read the
//! `F4` / `F8_E8M0` dtypes through numpy); the packing is described in the metadata by the
//! writer. Reading never panics on a malformed file: every problem is a [`TensorFileError`]
//! naming the file (and the tensor where there is one).

use crate::input_file::Limit;
use conform_reference::ops::{ElemType, Tensor, TensorMap};
use safetensors::tensor::{Dtype, SafeTensorError, SafeTensors, View};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// String metadata stored in the file header (`__metadata__`).
pub type Metadata = BTreeMap<String, String>;

/// The contents of one tensor file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TensorFile {
    pub tensors: TensorMap,
    pub metadata: Metadata,
}

/// What went wrong reading or writing a tensor file; every variant names the file.
#[derive(Debug, Error)]
pub enum TensorFileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The header or the data section is malformed or truncated.
    #[error("{path}: corrupt or truncated safetensors file: {message}")]
    Corrupt { path: PathBuf, message: String },
    /// A tensor uses a dtype conform does not exchange (FP4/E8M0 must be stored as U8).
    #[error("{path}: tensor `{tensor}`: unsupported dtype {dtype} (conform exchanges F64, F32, F16, BF16, U8, I8, I32, I64; store FP4 codes and E8M0 scales as U8)")]
    UnknownDtype {
        path: PathBuf,
        tensor: String,
        dtype: String,
    },
    /// A tensor's byte length does not match its dtype and shape.
    #[error("{path}: tensor `{tensor}`: {message}")]
    ShapeMismatch {
        path: PathBuf,
        tensor: String,
        message: String,
    },
}

impl TensorFileError {
    /// The file this error is about.
    pub fn path(&self) -> &Path {
        match self {
            TensorFileError::Io { path, .. }
            | TensorFileError::Corrupt { path, .. }
            | TensorFileError::UnknownDtype { path, .. }
            | TensorFileError::ShapeMismatch { path, .. } => path,
        }
    }
}

fn to_dtype(t: ElemType) -> Dtype {
    match t {
        ElemType::F64 => Dtype::F64,
        ElemType::F32 => Dtype::F32,
        ElemType::F16 => Dtype::F16,
        ElemType::Bf16 => Dtype::BF16,
        ElemType::U8 => Dtype::U8,
        ElemType::I32 => Dtype::I32,
        ElemType::I64 => Dtype::I64,
        ElemType::I8 => Dtype::I8,
    }
}

fn from_dtype(d: Dtype) -> Option<ElemType> {
    Some(match d {
        Dtype::F64 => ElemType::F64,
        Dtype::F32 => ElemType::F32,
        Dtype::F16 => ElemType::F16,
        Dtype::BF16 => ElemType::Bf16,
        Dtype::U8 => ElemType::U8,
        Dtype::I32 => ElemType::I32,
        Dtype::I64 => ElemType::I64,
        Dtype::I8 => ElemType::I8,
        _ => return None,
    })
}

/// A borrowed tensor as safetensors sees it (no copy of the data).
struct Borrowed<'a> {
    dtype: Dtype,
    tensor: &'a Tensor,
}

impl View for Borrowed<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.tensor.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.tensor.data)
    }
    fn data_len(&self) -> usize {
        self.tensor.data.len()
    }
}

/// Checks every tensor's byte length against its dtype and shape before anything is written.
fn check_lengths(path: &Path, tensors: &TensorMap) -> Result<(), TensorFileError> {
    for (name, t) in tensors {
        let expected = t
            .shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .and_then(|n| n.checked_mul(t.dtype.size_bytes()));
        match expected {
            Some(n) if n == t.data.len() => {}
            Some(n) => {
                return Err(TensorFileError::ShapeMismatch {
                    path: path.to_path_buf(),
                    tensor: name.clone(),
                    message: format!(
                        "{} {:?} needs {} bytes, the tensor holds {}",
                        t.dtype.name(),
                        t.shape,
                        n,
                        t.data.len()
                    ),
                })
            }
            None => {
                return Err(TensorFileError::ShapeMismatch {
                    path: path.to_path_buf(),
                    tensor: name.clone(),
                    message: format!("shape {:?} overflows", t.shape),
                })
            }
        }
    }
    Ok(())
}

fn views<'a>(tensors: &'a TensorMap) -> Vec<(&'a str, Borrowed<'a>)> {
    tensors
        .iter()
        .map(|(name, t)| {
            (
                name.as_str(),
                Borrowed {
                    dtype: to_dtype(t.dtype),
                    tensor: t,
                },
            )
        })
        .collect()
}

fn header_metadata(metadata: &Metadata) -> Option<HashMap<String, String>> {
    if metadata.is_empty() {
        None
    } else {
        Some(
            metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    }
}

fn write_error(path: &Path, e: SafeTensorError) -> TensorFileError {
    match e {
        SafeTensorError::IoError(source) => TensorFileError::Io {
            path: path.to_path_buf(),
            source,
        },
        other => TensorFileError::Corrupt {
            path: path.to_path_buf(),
            message: format!("cannot serialise: {other}"),
        },
    }
}

/// Serialises tensors and metadata to safetensors bytes. `path` only names the destination in
/// errors.
pub fn to_bytes(
    path: &Path,
    tensors: &TensorMap,
    metadata: &Metadata,
) -> Result<Vec<u8>, TensorFileError> {
    check_lengths(path, tensors)?;
    safetensors::tensor::serialize(views(tensors), header_metadata(metadata))
        .map_err(|e| write_error(path, e))
}

/// Writes tensors and metadata to `path` (through a sibling temporary file and a rename, so a
/// reader never sees a half-written file).
pub fn write(path: &Path, tensors: &TensorMap, metadata: &Metadata) -> Result<(), TensorFileError> {
    check_lengths(path, tensors)?;
    safetensors::tensor::serialize_to_file(views(tensors), header_metadata(metadata), path)
        .map_err(|e| write_error(path, e))
}

/// Parses safetensors bytes. `path` only names the source in errors.
pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<TensorFile, TensorFileError> {
    parse(path, bytes, |data| data.to_vec())
}

/// Parses a file's bytes, taking ownership so the largest tensor can reuse the buffer (one
/// allocation and one copy less for big single-tensor files).
fn from_owned(path: &Path, mut bytes: Vec<u8>) -> Result<TensorFile, TensorFileError> {
    let mut file = parse(path, &bytes, |_| Vec::new())?;
    // Every tensor was checked (dtype, shape, offsets) by `parse`; now fill in the data.
    let (n, header) = SafeTensors::read_metadata(&bytes).map_err(|e| TensorFileError::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let base = 8 + n;
    let mut spans: Vec<(String, usize, usize)> = header
        .tensors()
        .into_iter()
        .map(|(name, info)| (name, base + info.data_offsets.0, base + info.data_offsets.1))
        .collect();
    spans.sort_by_key(|(_, s, e)| std::cmp::Reverse(e - s));
    let largest = spans.first().cloned();
    for (name, s, e) in spans.iter().skip(1) {
        if let Some(t) = file.tensors.get_mut(name) {
            t.data = bytes[*s..*e].to_vec();
        }
    }
    if let Some((name, s, e)) = largest {
        bytes.copy_within(s..e, 0);
        bytes.truncate(e - s);
        bytes.shrink_to_fit();
        if let Some(t) = file.tensors.get_mut(&name) {
            t.data = bytes;
        }
    }
    Ok(file)
}

/// Header checks shared by both readers; `data` makes each tensor's bytes.
fn parse(
    path: &Path,
    bytes: &[u8],
    data: impl Fn(&[u8]) -> Vec<u8>,
) -> Result<TensorFile, TensorFileError> {
    let corrupt = |message: String| TensorFileError::Corrupt {
        path: path.to_path_buf(),
        message,
    };
    let (_, header) = SafeTensors::read_metadata(bytes).map_err(|e| corrupt(e.to_string()))?;
    let file = SafeTensors::deserialize(bytes).map_err(|e| corrupt(e.to_string()))?;
    let mut tensors = TensorMap::new();
    for (name, view) in file.iter() {
        let dtype = from_dtype(view.dtype()).ok_or_else(|| TensorFileError::UnknownDtype {
            path: path.to_path_buf(),
            tensor: name.to_string(),
            dtype: format!("{:?}", view.dtype()),
        })?;
        let expected = view
            .shape()
            .iter()
            .try_fold(dtype.size_bytes(), |a, &d| a.checked_mul(d));
        if expected != Some(view.data().len()) {
            return Err(TensorFileError::ShapeMismatch {
                path: path.to_path_buf(),
                tensor: name.to_string(),
                message: format!(
                    "{} {:?} does not match its {} data bytes",
                    dtype.name(),
                    view.shape(),
                    view.data().len()
                ),
            });
        }
        tensors.insert(
            name.to_string(),
            Tensor {
                dtype,
                shape: view.shape().to_vec(),
                data: data(view.data()),
            },
        );
    }
    let metadata = header
        .metadata()
        .as_ref()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    Ok(TensorFile { tensors, metadata })
}

/// Writes a file whose tensors (`(name, dtype, shape)`) hold `pattern(dtype)` repeated, without
/// materialising them in memory (poisoned output files).
pub fn write_filled(
    path: &Path,
    specs: &[(String, ElemType, Vec<usize>)],
    pattern: impl Fn(ElemType) -> Vec<u8>,
    metadata: &Metadata,
) -> Result<(), TensorFileError> {
    use std::io::Write;
    let io = |source: std::io::Error| TensorFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut header = serde_json::Map::new();
    if !metadata.is_empty() {
        header.insert("__metadata__".into(), serde_json::json!(metadata));
    }
    let mut offset = 0usize;
    let mut sizes = Vec::with_capacity(specs.len());
    for (name, dtype, shape) in specs {
        let size = shape
            .iter()
            .try_fold(dtype.size_bytes(), |a, &d| a.checked_mul(d))
            .ok_or_else(|| TensorFileError::ShapeMismatch {
                path: path.to_path_buf(),
                tensor: name.clone(),
                message: format!("shape {shape:?} overflows"),
            })?;
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": dtype.name(), "shape": shape,
                               "data_offsets": [offset, offset + size]}),
        );
        offset += size;
        sizes.push(size);
    }
    let mut h = serde_json::to_vec(&header).map_err(|e| TensorFileError::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    h.resize(h.len().next_multiple_of(8), b' ');
    let f = std::fs::File::create(path).map_err(io)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    w.write_all(&(h.len() as u64).to_le_bytes()).map_err(io)?;
    w.write_all(&h).map_err(io)?;
    for ((_, dtype, _), size) in specs.iter().zip(sizes) {
        let pat = pattern(*dtype);
        let chunk = pat.repeat((1 << 16) / pat.len().max(1));
        let mut left = size;
        while left > 0 {
            let k = left.min(chunk.len());
            w.write_all(&chunk[..k]).map_err(io)?;
            left -= k;
        }
    }
    w.flush().map_err(io)
}

/// Reads a tensor file of at most `limit` bytes ([`crate::input_file`]: a larger regular file
/// is refused from its size). The file is read as its header says, never beyond: the 8-byte
/// header length, the header (at most [`MAX_HEADER_BYTES`]), then exactly the data the
/// header's offsets span; anything after that is an error. So a stream (`/dev/zero`, a FIFO)
/// costs no more than a file of the size its header claims, within the limit.
pub fn read(path: &Path, limit: Limit) -> Result<TensorFile, TensorFileError> {
    use std::io::Read;
    let io = |source: std::io::Error| TensorFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let corrupt = |message: String| TensorFileError::Corrupt {
        path: path.to_path_buf(),
        message,
    };
    let mut r = crate::input_file::open(path, limit).map_err(io)?;
    let mut len = [0u8; 8];
    r.read_exact(&mut len)
        .map_err(|e| corrupt(format!("no 8-byte header length: {e}")))?;
    let n = u64::from_le_bytes(len);
    if n > MAX_HEADER_BYTES {
        return Err(corrupt(format!(
            "a header of {n} bytes (at most {MAX_HEADER_BYTES})"
        )));
    }
    let mut header = vec![0u8; n as usize];
    r.read_exact(&mut header)
        .map_err(|e| corrupt(format!("the header's {n} bytes: {e}")))?;
    let data = data_len(&header).map_err(|e| corrupt(e.to_string()))?;
    let total = 8 + n + data;
    if total > limit.bytes {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "its header asks for {} of data, more than the {} {} may hold",
                crate::input_file::human(total),
                crate::input_file::human(limit.bytes),
                limit.what
            ),
        )));
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(total as usize)
        .map_err(|e| corrupt(format!("cannot allocate {total} bytes: {e}")))?;
    bytes.extend_from_slice(&len);
    bytes.extend_from_slice(&header);
    (&mut r).take(data).read_to_end(&mut bytes).map_err(io)?;
    if (bytes.len() as u64) < total {
        return Err(corrupt(format!(
            "{} bytes of data, the header's offsets span {data}",
            bytes.len() as u64 - 8 - n
        )));
    }
    if r.read(&mut [0u8; 1]).map_err(io)? != 0 {
        return Err(corrupt(format!(
            "bytes after the {data} of data the header's offsets span"
        )));
    }
    from_owned(path, bytes)
}

/// The largest safetensors header conform reads (the format's own bound).
pub const MAX_HEADER_BYTES: u64 = 100 << 20;

/// Why a safetensors header does not say how many data bytes follow it.
#[derive(Debug, thiserror::Error)]
enum HeaderError {
    #[error("header is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("header is not a JSON object")]
    NotAnObject,
    #[error("tensor `{0}` has no data_offsets")]
    NoDataOffsets(String),
}

/// How many data bytes a safetensors header's offsets span (the largest end offset).
fn data_len(header: &[u8]) -> Result<u64, HeaderError> {
    let v: serde_json::Value = serde_json::from_slice(header).map_err(HeaderError::NotJson)?;
    let entries = v.as_object().ok_or(HeaderError::NotAnObject)?;
    let mut end = 0u64;
    for (name, e) in entries {
        if name == "__metadata__" {
            continue;
        }
        let off = e
            .get("data_offsets")
            .and_then(|o| o.as_array())
            .and_then(|o| o.get(1))
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| HeaderError::NoDataOffsets(name.clone()))?;
        end = end.max(off);
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (TensorMap, Metadata) {
        let mut t = TensorMap::new();
        t.insert(
            "q".into(),
            Tensor::from_f32(vec![2, 3], &[1.0, -2.0, 3.5, f32::NAN, 0.0, -0.0]),
        );
        t.insert(
            "k".into(),
            Tensor::from_bits16(ElemType::Bf16, vec![3], &[0x3F80, 0x7FA5, 0x8000]),
        );
        t.insert(
            "codes".into(),
            Tensor::from_u8(vec![4], vec![0, 1, 0xA5, 255]),
        );
        t.insert("bt".into(), Tensor::from_i32(vec![1, 2], &[7, -1]));
        t.insert("empty".into(), Tensor::from_f32(vec![0, 4], &[]));
        let mut m = Metadata::new();
        m.insert("packing".into(), "fp4_e2m1 low nibble first".into());
        (t, m)
    }

    #[test]
    fn round_trip_is_bit_exact() {
        let (t, m) = sample();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.safetensors");
        write(&p, &t, &m).unwrap();
        let back = read(&p, Limit::GOLDEN_TENSORS).unwrap();
        assert_eq!(back.tensors, t);
        assert_eq!(back.metadata, m);
        let bytes = to_bytes(&p, &t, &m).unwrap();
        assert_eq!(from_bytes(&p, &bytes).unwrap(), back);
    }

    /// A file is read as far as its header says and no further: `/dev/zero` (a header of 0
    /// bytes) fails at once, as do a header longer than the limit allows, a short data section
    /// and bytes after the data.
    #[test]
    fn reading_stops_where_the_header_says() {
        let (t, m) = sample();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.safetensors");
        write(&p, &t, &m).unwrap();
        let good = std::fs::read(&p).unwrap();
        let small = Limit {
            what: "a test file",
            bytes: 64,
        };
        let e = read(&p, small).unwrap_err().to_string();
        assert!(
            e.contains("more than the 64 bytes a test file may hold"),
            "{e}"
        );
        let mut longer = good.clone();
        longer.extend_from_slice(b"junk");
        std::fs::write(&p, &longer).unwrap();
        let e = read(&p, Limit::GOLDEN_TENSORS).unwrap_err().to_string();
        assert!(e.contains("bytes after"), "{e}");
        std::fs::write(&p, &good[..good.len() - 3]).unwrap();
        let e = read(&p, Limit::GOLDEN_TENSORS).unwrap_err().to_string();
        assert!(e.contains("the header's offsets span"), "{e}");
        #[cfg(unix)]
        {
            let t = std::time::Instant::now();
            let e = read(Path::new("/dev/zero"), Limit::GOLDEN_TENSORS)
                .unwrap_err()
                .to_string();
            assert!(e.contains("corrupt"), "{e}");
            assert!(t.elapsed() < std::time::Duration::from_secs(1));
        }
    }

    #[test]
    fn filled_files_read_back_with_the_pattern() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o.safetensors");
        let specs = vec![
            ("a".to_string(), ElemType::F32, vec![3, 2]),
            ("b".to_string(), ElemType::Bf16, vec![100_000]),
            ("c".to_string(), ElemType::U8, vec![0]),
        ];
        let mut m = Metadata::new();
        m.insert("poisoned".into(), "true".into());
        write_filled(&p, &specs, crate::poison::pattern_bytes, &m).unwrap();
        let f = read(&p, Limit::GOLDEN_TENSORS).unwrap();
        assert_eq!(f.metadata, m);
        for (name, dt, shape) in &specs {
            let t = &f.tensors[name];
            assert_eq!((&t.dtype, &t.shape), (dt, shape));
            assert_eq!(crate::poison::count_unwritten(t), t.numel());
        }
    }

    #[test]
    fn write_rejects_wrong_length_naming_the_tensor() {
        let mut t = TensorMap::new();
        t.insert(
            "bad".into(),
            Tensor {
                dtype: ElemType::F32,
                shape: vec![2],
                data: vec![0; 7],
            },
        );
        let e = to_bytes(Path::new("out.safetensors"), &t, &Metadata::new()).unwrap_err();
        let s = e.to_string();
        assert!(matches!(e, TensorFileError::ShapeMismatch { .. }), "{s}");
        assert!(s.contains("`bad`") && s.contains("out.safetensors"), "{s}");
    }

    #[test]
    fn unknown_dtype_names_tensor_and_file() {
        let data = [0u8; 2];
        let view = safetensors::tensor::TensorView::new(Dtype::U16, vec![1], &data).unwrap();
        let bytes = safetensors::tensor::serialize([("odd", view)], None).unwrap();
        let e = from_bytes(Path::new("w.safetensors"), &bytes).unwrap_err();
        let s = e.to_string();
        assert!(matches!(e, TensorFileError::UnknownDtype { .. }), "{s}");
        assert!(s.contains("`odd`") && s.contains("w.safetensors") && s.contains("U16"));
    }

    #[test]
    fn missing_file_is_io_error_naming_it() {
        let e = read(
            Path::new("/nonexistent/dir/f.safetensors"),
            Limit::GOLDEN_TENSORS,
        )
        .unwrap_err();
        assert!(matches!(e, TensorFileError::Io { .. }));
        assert!(e.to_string().contains("/nonexistent/dir/f.safetensors"));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let (t, m) = sample();
        let p = Path::new("t.safetensors");
        let bytes = to_bytes(p, &t, &m).unwrap();
        for cut in 0..bytes.len() {
            let e = from_bytes(p, &bytes[..cut]).unwrap_err();
            assert!(
                matches!(e, TensorFileError::Corrupt { .. }),
                "cut {cut}: {e}"
            );
        }
        // Trailing garbage is also rejected.
        let mut long = bytes.clone();
        long.push(0);
        assert!(from_bytes(p, &long).is_err());
    }

    #[test]
    fn random_bytes_and_bit_flips_never_panic() {
        // A small xorshift so the test is deterministic without an RNG dependency.
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let p = Path::new("r.safetensors");
        for _ in 0..2000 {
            let n = (next() % 300) as usize;
            let v: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            let _ = from_bytes(p, &v);
        }
        let (t, m) = sample();
        let good = to_bytes(p, &t, &m).unwrap();
        for _ in 0..5000 {
            let mut v = good.clone();
            for _ in 0..1 + next() % 4 {
                let i = (next() as usize) % v.len();
                v[i] ^= 1 << (next() % 8);
            }
            if let Ok(f) = from_bytes(p, &v) {
                for t in f.tensors.values() {
                    assert_eq!(t.data.len(), t.numel() * t.dtype.size_bytes());
                }
            }
        }
        // A header length pointing far beyond the file.
        let mut v = good.clone();
        v[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(from_bytes(p, &v).is_err());
    }
}
