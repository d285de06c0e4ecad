//! Resource admission: a case's memory is estimated from its op description (shapes and dtypes
//! only, nothing allocated) before any input is generated, so a case too large for the machine
//! ends as `error` naming its estimate and the limit, and the run goes on. Without it a typo'd
//! shape (`q_seq = 10^9`) aborts the whole process in the allocator and loses every result.

use conform_reference::ops::{OpDescription, TensorSpec};

/// The figures of one estimate, in bytes (f64: a product of absurd dimensions must not wrap).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryEstimate {
    /// The generated inputs, plus the copy handed to the target.
    pub inputs: f64,
    /// The target's outputs, the expectation, and the comparison's working copy.
    pub outputs: f64,
    /// The f64 oracle outputs plus an f64 working copy of the largest tensor.
    pub oracle_and_scratch: f64,
}

impl MemoryEstimate {
    pub fn total(&self) -> f64 {
        self.inputs + self.outputs + self.oracle_and_scratch
    }
}

fn bytes(t: &TensorSpec) -> f64 {
    elements(t) * t.dtype.size_bytes() as f64
}

fn elements(t: &TensorSpec) -> f64 {
    t.shape.iter().map(|&d| d as f64).product()
}

/// An upper-side estimate of what running `desc` holds at once. It counts every tensor the
/// runner and the reference materialise: inputs twice (generated, and the target's copy),
/// outputs three times (target, expectation, comparison), the oracle in f64 when a policy
/// needs it, and an f64 working copy of the largest tensor for the reference's own scratch.
pub fn estimate(desc: &OpDescription, oracle: bool) -> MemoryEstimate {
    let inputs: f64 = desc.inputs.iter().map(bytes).sum();
    let outputs: f64 = desc.outputs.iter().map(bytes).sum();
    let out_elements: f64 = desc.outputs.iter().map(elements).sum();
    let largest = desc
        .inputs
        .iter()
        .chain(&desc.outputs)
        .map(elements)
        .fold(0.0, f64::max);
    MemoryEstimate {
        inputs: 2.0 * inputs,
        outputs: 3.0 * outputs,
        oracle_and_scratch: if oracle { 8.0 * out_elements } else { 0.0 } + 8.0 * largest,
    }
}

/// The default limit: half of the memory the kernel reports available when the run starts
/// (`MemAvailable`), or 8 GiB where that cannot be read.
pub fn default_limit() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kib| kib * 1024 / 2)
        .unwrap_or(8 << 30)
}

/// Why a `--max-memory` value is not a size: each names the value as given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("`{0}`: unknown size suffix (use K, M, G or T)")]
    UnknownSuffix(String),
    #[error("`{0}` is not a size (e.g. 4G, 512M, 1073741824)")]
    NotANumber(String),
    #[error("`{0}`: a memory limit must be positive")]
    NotPositive(String),
    #[error("`{0}`: a memory limit of less than one byte")]
    BelowOneByte(String),
}

/// Parses a size for `--max-memory`: bytes, or a number with K, M, G or T (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(SizeError::UnknownSuffix(s.to_string())),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| SizeError::NotANumber(s.to_string()))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(SizeError::NotPositive(s.to_string()));
    }
    // Saturates at u64::MAX for absurdly large values; below one byte is refused.
    let bytes = (v * mult as f64) as u64;
    if bytes == 0 {
        return Err(SizeError::BelowOneByte(s.to_string()));
    }
    Ok(bytes)
}

/// A case refused by resource admission, before anything was allocated: what it needs and
/// the limit. `Display` is the case's message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OverMemoryLimit {
    pub need: MemoryEstimate,
    /// The limit in bytes.
    pub limit: u64,
}

impl std::fmt::Display for OverMemoryLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const GIB: f64 = (1u64 << 30) as f64;
        let e = &self.need;
        write!(
            f,
            "not run: needs about {:.3} GiB (inputs {:.3}, outputs {:.3}, oracle and scratch \
             {:.3}), over the memory limit of {:.3} GiB (--max-memory; default half the \
             available memory)",
            e.total() / GIB,
            e.inputs / GIB,
            e.outputs / GIB,
            e.oracle_and_scratch / GIB,
            self.limit as f64 / GIB
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conform_reference::ops::{ElemType, OpCost};

    #[test]
    fn sizes_parse_with_binary_suffixes_and_reject_nonsense() {
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert!(parse_size("-1G").is_err());
        assert!(parse_size("4X").is_err());
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn absurd_shapes_estimate_without_overflow() {
        let huge = TensorSpec::new("q", ElemType::Bf16, vec![1 << 40, 1 << 40], &["a", "b"]);
        let desc = OpDescription {
            inputs: vec![huge.clone()],
            outputs: vec![huge],
            cost: OpCost {
                flops: 0.0,
                bytes: 0.0,
                compute: ElemType::Bf16,
            },
        };
        let e = estimate(&desc, true);
        assert!(e.total().is_finite() && e.total() > 1e24);
        assert!(default_limit() > 0);
    }
}
