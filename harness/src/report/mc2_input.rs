//! The MC2 timeline input: what the planner/simulator writes (`conform mc2 plan --json`).
//! Keys: `tiles: [{index?, rows, matmul_start_us, matmul_end_us, comm_start_us, comm_end_us}]`,
//! `serial_us`, and the predicted fused time as `makespan_us` (the simulator's name) or
//! `predicted_us`. A wrapper object with the timeline under `timeline` is accepted too. Each
//! tile is the simulator's own type ([`TileSpan`]); tiles are numbered by their position.

use super::error::ReportError;
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

pub use conform_reference::mc2::TileSpan;

#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Mc2Timeline {
    pub tiles: Vec<TileSpan>,
    pub serial_us: f64,
    #[serde(alias = "makespan_us")]
    pub predicted_us: f64,
}

/// Parses and checks a timeline: finite, ordered spans.
pub fn timeline(v: &Value, path: &Path) -> Result<Mc2Timeline, ReportError> {
    let inner = v.get("timeline").unwrap_or(v);
    let t: Mc2Timeline =
        serde_json::from_value(inner.clone()).map_err(|source| ReportError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
    let bad = |i: usize, reason: &str| ReportError::Field {
        path: path.to_path_buf(),
        field: format!("tiles[{i}]"),
        reason: reason.to_string(),
    };
    if t.tiles.is_empty() {
        return Err(ReportError::Field {
            path: path.to_path_buf(),
            field: "tiles".into(),
            reason: "no tiles".into(),
        });
    }
    for (i, s) in t.tiles.iter().enumerate() {
        let all = [
            s.matmul_start_us,
            s.matmul_end_us,
            s.comm_start_us,
            s.comm_end_us,
        ];
        if all.iter().any(|x| !x.is_finite() || *x < 0.0) {
            return Err(bad(i, "times must be finite and >= 0"));
        }
        if s.matmul_end_us < s.matmul_start_us || s.comm_end_us < s.comm_start_us {
            return Err(bad(i, "a span ends before it starts"));
        }
    }
    if !(t.serial_us.is_finite() && t.predicted_us.is_finite()) {
        return Err(ReportError::Field {
            path: path.to_path_buf(),
            field: "serial_us/predicted_us".into(),
            reason: "must be finite".into(),
        });
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn span(a: f64, b: f64, c: f64, d: f64) -> Value {
        json!({"rows": 512, "matmul_start_us": a, "matmul_end_us": b, "comm_start_us": c, "comm_end_us": d})
    }

    #[test]
    fn accepts_simulator_names_and_a_wrapper() {
        let v = json!({"tiles": [span(0.0, 10.0, 10.0, 18.0), span(10.0, 20.0, 20.0, 28.0)],
                       "serial_us": 36.0, "makespan_us": 28.0, "gain_us": 8.0});
        let t = timeline(&v, Path::new("t.json")).unwrap();
        assert_eq!(t.predicted_us, 28.0);
        assert_eq!(t.tiles[1].matmul_start_us, 10.0);
        let wrapped = json!({"timeline": v});
        assert_eq!(timeline(&wrapped, Path::new("t.json")).unwrap(), t);
    }

    #[test]
    fn refuses_backward_spans() {
        let v =
            json!({"tiles": [span(0.0, 10.0, 12.0, 11.0)], "serial_us": 1.0, "predicted_us": 1.0});
        let e = timeline(&v, Path::new("t.json")).unwrap_err().to_string();
        assert!(e.contains("tiles[0]"), "{e}");
    }
}
