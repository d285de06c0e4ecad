//! Two-stream pipeline simulator for MatmulAllReduce.
//!
//! Stream 1 runs the matmuls of tiles `0, 1, ...` back to back. Stream 2 runs the all-reduce of
//! tile `i` as soon as matmul `i` and all-reduce `i - 1` are both done:
//! `mm_start[i] = mm_end[i-1]`, `comm_start[i] = max(mm_end[i], comm_end[i-1])`.
//! The makespan is the end of the last all-reduce. The serial time is the unsplit matmul plus
//! the unsplit all-reduce (measured figures when given); the predicted gain is
//! `serial - makespan` (negative when splitting is predicted to lose).
//!
//! Splitting inflates tasks (the seed's "expansion": small tiles run less efficiently, more
//! tiles cost more scheduling, the streams contend for L2 and memory bandwidth). [`Inflation`]
//! multiplies every tile's matmul and all-reduce time when the operator is split into more
//! than one tile; an unsplit operator is never inflated.

use super::cost_model::AxisCost;
use super::error::Mc2Error;
use super::planner::UnsplitTimes;

/// Per-stream time factors applied to every tile of a split operator (1.0 = none).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Inflation {
    pub matmul: f64,
    pub comm: f64,
}

impl Default for Inflation {
    fn default() -> Self {
        Inflation {
            matmul: 1.0,
            comm: 1.0,
        }
    }
}

/// One tile's spans on both streams (us).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TileSpan {
    pub rows: u64,
    pub matmul_start_us: f64,
    pub matmul_end_us: f64,
    pub comm_start_us: f64,
    pub comm_end_us: f64,
}

/// The simulated schedule.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Timeline {
    pub tiles: Vec<TileSpan>,
    /// End of the last all-reduce: the predicted fused time.
    pub makespan_us: f64,
    /// Unsplit matmul + unsplit all-reduce.
    pub serial_us: f64,
    /// `serial_us - makespan_us`.
    pub gain_us: f64,
    /// `gain_us / serial_us` (0 when the serial time is 0).
    pub gain_fraction: f64,
}

/// Simulates the two streams from explicit per-tile durations.
pub fn simulate(
    rows: &[u64],
    matmul_us: &[f64],
    comm_us: &[f64],
    serial_us: f64,
) -> Result<Timeline, Mc2Error> {
    if rows.is_empty() {
        return Err(Mc2Error::ZeroDimension { name: "tile count" });
    }
    for (name, v) in [("matmul_us", matmul_us), ("comm_us", comm_us)] {
        if v.len() != rows.len() {
            return Err(Mc2Error::ShapeMismatch {
                tensor: name.into(),
                expected: rows.len(),
                actual: v.len(),
            });
        }
        if let Some(bad) = v.iter().find(|t| !(t.is_finite() && **t >= 0.0)) {
            return Err(Mc2Error::InvalidParameter {
                name,
                value: bad.to_string(),
                reason: "tile durations must be finite and >= 0",
            });
        }
    }
    if !serial_us.is_finite() {
        return Err(Mc2Error::InvalidParameter {
            name: "serial_us",
            value: serial_us.to_string(),
            reason: "must be finite",
        });
    }
    let mut spans = Vec::with_capacity(rows.len());
    let (mut mm_end, mut comm_end) = (0.0f64, 0.0f64);
    for i in 0..rows.len() {
        let mm_start = mm_end;
        mm_end = mm_start + matmul_us[i];
        let comm_start = mm_end.max(comm_end);
        comm_end = comm_start + comm_us[i];
        spans.push(TileSpan {
            rows: rows[i],
            matmul_start_us: mm_start,
            matmul_end_us: mm_end,
            comm_start_us: comm_start,
            comm_end_us: comm_end,
        });
    }
    let gain = serial_us - comm_end;
    Ok(Timeline {
        tiles: spans,
        makespan_us: comm_end,
        serial_us,
        gain_us: gain,
        gain_fraction: if serial_us > 0.0 {
            gain / serial_us
        } else {
            0.0
        },
    })
}

/// Simulates a tiling with per-tile times from the cost models, `inflation` applied when
/// `tiles.len() > 1`. The serial time is `unsplit` when given (measured), else the models at
/// `M = sum(tiles)`.
#[allow(clippy::too_many_arguments)]
pub fn simulate_tiles(
    tiles: &[u64],
    k: u64,
    n: u64,
    element_bytes: u64,
    matmul: &AxisCost,
    comm: &AxisCost,
    inflation: Inflation,
    unsplit: Option<UnsplitTimes>,
) -> Result<Timeline, Mc2Error> {
    for (name, f) in [
        ("matmul inflation", inflation.matmul),
        ("comm inflation", inflation.comm),
    ] {
        if !(f.is_finite() && f > 0.0) {
            return Err(Mc2Error::InvalidParameter {
                name,
                value: f.to_string(),
                reason: "must be a finite factor > 0",
            });
        }
    }
    let m: u64 = tiles.iter().sum();
    if m == 0 {
        return Err(Mc2Error::ZeroDimension { name: "M" });
    }
    let (fm, fc) = if tiles.len() > 1 {
        (inflation.matmul, inflation.comm)
    } else {
        (1.0, 1.0)
    };
    let mm: Vec<f64> = tiles
        .iter()
        .map(|&r| matmul.time_us(r as f64, k, n, element_bytes) * fm)
        .collect();
    let cm: Vec<f64> = tiles
        .iter()
        .map(|&r| comm.time_us(r as f64, k, n, element_bytes) * fc)
        .collect();
    let serial = unsplit
        .unwrap_or(UnsplitTimes {
            matmul_us: matmul.time_us(m as f64, k, n, element_bytes),
            comm_us: comm.time_us(m as f64, k, n, element_bytes),
        })
        .serial_us();
    simulate(tiles, &mm, &cm, serial)
}
