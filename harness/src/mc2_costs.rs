//! The MC2 cost file: the matmul and all-reduce cost models a split plan is computed from,
//! optional measured times, planner and timeline parameters. TOML, every table
//! `deny_unknown_fields`; see `docs/mc2.md` and `suites/mc2/costs-seed-example.toml`.
//!
//! Parsing checks the syntax and the field names and types; validation builds the reference's
//! [`PiecewiseCost`] (finite coefficients, increasing breakpoints, monotone) and checks the
//! parameters. Every error names the file and the field.

use std::path::{Path, PathBuf};

use conform_reference::formats::DType;
use conform_reference::mc2::{
    AxisCost, CostAxis, Inflation, Mc2Error, PiecewiseCost, PlannerConfig, Polynomial,
    ShortTileRule, UnsplitTimes,
};
use serde::Deserialize;

/// A segment as written in the file.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SegmentSpec {
    /// `t = slope * x + intercept`.
    Linear { slope: f64, intercept: f64 },
    /// `t = a * x^2 + b * x + c`.
    Quadratic { a: f64, b: f64, c: f64 },
}

/// `[matmul]` and `[communication]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// `rows`, `mib` or `gflop`.
    pub axis: CostAxis,
    /// One fewer than the segments (default: none).
    #[serde(default)]
    pub breakpoints: Vec<f64>,
    pub segments: Vec<SegmentSpec>,
}

/// `[shape]`: the shape the figures were measured for.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ShapeSpec {
    pub m: u64,
    pub k: u64,
    pub n: u64,
    pub dtype: String,
}

/// `[measured]`: unsplit times and, for reports, the measured fused time.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MeasuredSpec {
    pub matmul_us: f64,
    pub comm_us: f64,
    pub fused_us: Option<f64>,
}

/// `[planner]`: all optional, defaults are the seed's.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PlannerSpec {
    pub alignment: Option<u64>,
    pub max_tiles: Option<u64>,
    pub contention: Option<f64>,
    pub short_tile_rule: Option<ShortTileRule>,
}

/// `[timeline]`: per-stream inflation of split tiles (default 1.0).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TimelineSpec {
    pub matmul_inflation: Option<f64>,
    pub comm_inflation: Option<f64>,
}

/// The whole file as written.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CostFileSpec {
    pub shape: Option<ShapeSpec>,
    pub matmul: ModelSpec,
    pub communication: ModelSpec,
    pub measured: Option<MeasuredSpec>,
    #[serde(default)]
    pub planner: PlannerSpec,
    #[serde(default)]
    pub timeline: TimelineSpec,
}

/// The shape the figures were measured for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeasuredShape {
    pub m: u64,
    pub k: u64,
    pub n: u64,
    pub dtype: DType,
}

/// A validated cost file.
#[derive(Clone, Debug)]
pub struct Mc2Costs {
    pub path: PathBuf,
    pub shape: Option<MeasuredShape>,
    pub matmul: AxisCost,
    pub comm: AxisCost,
    pub unsplit: Option<UnsplitTimes>,
    pub measured_fused_us: Option<f64>,
    pub planner: PlannerConfig,
    pub inflation: Inflation,
}

/// Everything that can be wrong with a cost file.
#[derive(Debug, thiserror::Error)]
pub enum Mc2CostsError {
    #[error("cannot read cost file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cost file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("cost file {path}, field `{field}`: {source}")]
    Model {
        path: PathBuf,
        field: &'static str,
        source: Mc2Error,
    },
    #[error("cost file {path}, field `{field}`: {message}")]
    Field {
        path: PathBuf,
        field: &'static str,
        message: String,
    },
}

impl Mc2CostsError {
    fn field(path: &Path, field: &'static str, message: impl Into<String>) -> Mc2CostsError {
        Mc2CostsError::Field {
            path: path.to_path_buf(),
            field,
            message: message.into(),
        }
    }
}

/// Reads, parses and validates a cost file.
pub fn load_costs(path: &Path) -> Result<Mc2Costs, Mc2CostsError> {
    let text =
        crate::input_file::read_text(path, crate::input_file::Limit::CONFIG).map_err(|source| {
            Mc2CostsError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
    parse_costs(&text, path)
}

/// Parses and validates cost-file text; `path` is only used in messages.
pub fn parse_costs(text: &str, path: &Path) -> Result<Mc2Costs, Mc2CostsError> {
    let spec: CostFileSpec = toml::from_str(text).map_err(|e| Mc2CostsError::Parse {
        path: path.to_path_buf(),
        message: e.to_string().trim_end().to_string(),
    })?;
    validate(spec, path)
}

fn model(spec: &ModelSpec, name: &'static str, path: &Path) -> Result<AxisCost, Mc2CostsError> {
    let segments = spec
        .segments
        .iter()
        .map(|s| match *s {
            SegmentSpec::Linear { slope, intercept } => Polynomial::Linear { slope, intercept },
            SegmentSpec::Quadratic { a, b, c } => Polynomial::Quadratic { a, b, c },
        })
        .collect();
    let cost = PiecewiseCost::new(name, segments, spec.breakpoints.clone()).map_err(|source| {
        Mc2CostsError::Model {
            path: path.to_path_buf(),
            field: name,
            source,
        }
    })?;
    Ok(AxisCost::new(spec.axis, cost))
}

fn positive_finite(
    v: f64,
    path: &Path,
    field: &'static str,
    allow_zero: bool,
) -> Result<f64, Mc2CostsError> {
    if v.is_finite() && (v > 0.0 || (allow_zero && v == 0.0)) {
        Ok(v)
    } else {
        Err(Mc2CostsError::field(
            path,
            field,
            format!(
                "{v} must be a finite number {}",
                if allow_zero { ">= 0" } else { "> 0" }
            ),
        ))
    }
}

fn validate(spec: CostFileSpec, path: &Path) -> Result<Mc2Costs, Mc2CostsError> {
    let shape = match &spec.shape {
        Some(s) => {
            let dtype = s.dtype.parse::<DType>().map_err(|_| {
                Mc2CostsError::field(
                    path,
                    "shape.dtype",
                    format!("unknown dtype `{}` (expected f16 or bf16)", s.dtype),
                )
            })?;
            Some(MeasuredShape {
                m: s.m,
                k: s.k,
                n: s.n,
                dtype,
            })
        }
        None => None,
    };
    if shape.is_none()
        && (spec.matmul.axis == CostAxis::Rows || spec.communication.axis == CostAxis::Rows)
    {
        return Err(Mc2CostsError::field(
            path,
            "shape",
            "a model on axis \"rows\" is only valid for the K, N and dtype it was measured \
             for: add a [shape] table with m, k, n and dtype",
        ));
    }
    let matmul = model(&spec.matmul, "matmul", path)?;
    let comm = model(&spec.communication, "communication", path)?;
    let (unsplit, measured_fused_us) = match &spec.measured {
        Some(_) if shape.is_none() => {
            return Err(Mc2CostsError::field(
                path,
                "measured",
                "measured times need the [shape] (m, k, n, dtype) they were measured for",
            ))
        }
        Some(m) => {
            let u = UnsplitTimes {
                matmul_us: positive_finite(m.matmul_us, path, "measured.matmul_us", true)?,
                comm_us: positive_finite(m.comm_us, path, "measured.comm_us", true)?,
            };
            let fused = m
                .fused_us
                .map(|f| positive_finite(f, path, "measured.fused_us", true))
                .transpose()?;
            (Some(u), fused)
        }
        None => (None, None),
    };
    let mut planner = PlannerConfig::default();
    if let Some(a) = spec.planner.alignment {
        if a == 0 {
            return Err(Mc2CostsError::field(
                path,
                "planner.alignment",
                "must be >= 1",
            ));
        }
        planner.alignment = a;
    }
    if let Some(t) = spec.planner.max_tiles {
        if t == 0 {
            return Err(Mc2CostsError::field(
                path,
                "planner.max_tiles",
                "must be >= 1",
            ));
        }
        planner.max_tiles = t;
    }
    if let Some(c) = spec.planner.contention {
        planner.contention = positive_finite(c, path, "planner.contention", false)?;
    }
    if let Some(r) = spec.planner.short_tile_rule {
        planner.short_tile_rule = r;
    }
    let mut inflation = Inflation::default();
    if let Some(f) = spec.timeline.matmul_inflation {
        inflation.matmul = positive_finite(f, path, "timeline.matmul_inflation", false)?;
    }
    if let Some(f) = spec.timeline.comm_inflation {
        inflation.comm = positive_finite(f, path, "timeline.comm_inflation", false)?;
    }
    Ok(Mc2Costs {
        path: path.to_path_buf(),
        shape,
        matmul,
        comm,
        unsplit,
        measured_fused_us,
        planner,
        inflation,
    })
}
