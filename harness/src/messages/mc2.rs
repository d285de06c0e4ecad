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
pub fn plan_report(r: &PlanReport<'_>) -> String {
    let p = r.plan;
    let t = r.timeline;
    let mut s = String::new();
    s.push_str(&format!(
        "MC2 MatmulAllReduce plan: M={} K={} N={} dtype={} (costs: {})\n",
        r.m, r.k, r.n, r.dtype, r.costs_path
    ));
    s.push_str(&format!(
        "bound: {} (unsplit matmul {:.1} us, all-reduce {:.1} us, {})\n",
        p.bound.name(),
        p.unsplit.matmul_us,
        p.unsplit.comm_us,
        unsplit_source(r.measured_unsplit)
    ));
    let tiles: Vec<String> = p.tiles.iter().map(u64::to_string).collect();
    s.push_str(&format!("tiles: [{}]\n", tiles.join(", ")));
    if p.split {
        let position = match p.bound {
            conform_reference::mc2::Bound::Communication => "first",
            conform_reference::mc2::Bound::Compute => "last",
        };
        s.push_str(&format!(
            "  short tile {} ({position}), {} long tile(s) of {} rows; bounds a={} b={} c={}, \
             long-tile budget {:.2} us\n",
            p.short_tile,
            p.long_count,
            p.long_tile,
            p.short_tile_bounds.a,
            p.short_tile_bounds.b,
            p.short_tile_bounds.c,
            p.long_tile_budget_us
        ));
    } else if let Some(why) = &p.no_split_reason {
        s.push_str(&format!("  not split: {why}\n"));
    }
    s.push_str(&format!("serial: {:.1} us\n", t.serial_us));
    s.push_str(&format!(
        "predicted fused: {:.1} us (gain {:.1} us, {:.1}%)\n",
        t.makespan_us,
        t.gain_us,
        100.0 * t.gain_fraction
    ));
    if let Some(f) = r.measured_fused_us {
        s.push_str(&format!(
            "measured fused: {f:.1} us (predicted - measured = {:+.1} us)\n",
            t.makespan_us - f
        ));
    }
    s
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
