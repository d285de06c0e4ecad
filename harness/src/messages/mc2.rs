//! User-facing text of `conform mc2`: the plan report and the error messages.

use conform_reference::mc2::{Plan, Timeline};

/// Where the unsplit times came from.
pub fn unsplit_source(measured: bool) -> &'static str {
    if measured {
        "measured"
    } else {
        "from the cost models"
    }
}

/// Everything the text report shows.
pub struct PlanReport<'a> {
    pub m: u64,
    pub k: u64,
    pub n: u64,
    pub dtype: &'a str,
    pub costs_path: &'a str,
    pub plan: &'a Plan,
    pub timeline: &'a Timeline,
    pub measured_unsplit: bool,
    pub measured_fused_us: Option<f64>,
}

/// The human-readable plan report.
impl std::fmt::Display for PlanReport<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (r, p, t) = (self, self.plan, self.timeline);
        writeln!(
            f,
            "MC2 MatmulAllReduce plan: M={} K={} N={} dtype={} (costs: {})",
            r.m, r.k, r.n, r.dtype, r.costs_path
        )?;
        writeln!(
            f,
            "bound: {} (unsplit matmul {:.1} us, all-reduce {:.1} us, {})",
            p.bound.name(),
            p.unsplit.matmul_us,
            p.unsplit.comm_us,
            unsplit_source(r.measured_unsplit)
        )?;
        let tiles: Vec<String> = p.tiles.iter().map(u64::to_string).collect();
        writeln!(f, "tiles: [{}]", tiles.join(", "))?;
        if p.split {
            let position = match p.bound {
                conform_reference::mc2::Bound::Communication => "first",
                conform_reference::mc2::Bound::Compute => "last",
            };
            writeln!(
                f,
                "  short tile {} ({position}), {} long tile(s) of {} rows; bounds a={} b={} c={}, \
                 long-tile budget {:.2} us",
                p.short_tile,
                p.long_count,
                p.long_tile,
                p.short_tile_bounds.a,
                p.short_tile_bounds.b,
                p.short_tile_bounds.c,
                p.long_tile_budget_us
            )?;
        } else if let Some(why) = &p.no_split_reason {
            writeln!(f, "  not split: {why}")?;
        }
        writeln!(f, "serial: {:.1} us", t.serial_us)?;
        writeln!(
            f,
            "predicted fused: {:.1} us (gain {:.1} us, {:.1}%)",
            t.makespan_us,
            t.gain_us,
            100.0 * t.gain_fraction
        )?;
        if let Some(fused) = r.measured_fused_us {
            writeln!(
                f,
                "measured fused: {fused:.1} us (predicted - measured = {:+.1} us)",
                t.makespan_us - fused
            )?;
        }
        Ok(())
    }
}

/// `--dtype` is not an MC2 dtype.
pub fn unknown_dtype(given: &str) -> String {
    format!("unknown dtype `{given}` for --dtype (expected f16 or bf16)")
}

/// The cost file's rows-axis model was measured for another K/N/dtype.
pub fn shape_mismatch(path: &str, measured: (u64, u64, &str), asked: (u64, u64, &str)) -> String {
    format!(
        "cost file {path}: its [shape] is K={} N={} dtype={} and a model on axis \"rows\" only \
         holds for that shape, but the plan asks for K={} N={} dtype={}",
        measured.0, measured.1, measured.2, asked.0, asked.1, asked.2
    )
}

/// A dimension beyond anything a kernel interface can express.
pub fn dimension_too_large(name: &str, value: u64, limit: u64) -> String {
    format!("--{name} {value} is larger than the limit {limit} (2^31 - 1, the int32 extent of a kernel dimension)")
}
