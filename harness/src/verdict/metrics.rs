//! The filling of [`OutputMetrics`] from the figures of a comparison's passes (the passes
//! themselves, over fixed chunks combined in order, are `kernel::chunks`).

use super::heatmap::HeatGeometry;
use super::histogram::{labelled, rel_label, ulp_label};
use super::index::format_index;
use crate::results::{OutputMetrics, WorstElement};

pub(crate) use super::pass::{sat, ElementRule, PassConfig, PassStats};
pub use super::pass::{CANN_EPS, FLASHINFER_EPS};

/// Fills the figures every verdict records (policy, pass/fail and reason are the caller's).
pub(crate) fn fill_metrics(
    mut st: PassStats,
    shape: &[usize],
    axes: &[String],
    ulp_computed: bool,
    heat: Option<HeatGeometry>,
) -> OutputMetrics {
    let numel = st.numel;
    let mut m = OutputMetrics {
        numel,
        max_abs_err: st.max_abs,
        max_rel_err: st.max_rel_plain,
        mere: st.mere(),
        mare: st.max_rel,
        rmse: st.rmse(),
        max_ulp: ulp_computed.then_some(st.max_ulp),
        mismatches: st.mismatches,
        mismatch_ratio: if numel == 0 {
            0.0
        } else {
            st.mismatches as f64 / numel as f64
        },
        non_finite: st.non_finite,
        unwritten: st.unwritten,
        ..OutputMetrics::default()
    };
    if ulp_computed {
        m.ulp_histogram = labelled(&st.ulp_hist, ulp_label);
        if st.ulp_nan_mismatch > 0 {
            m.ulp_histogram
                .push(("nan_vs_number".to_string(), st.ulp_nan_mismatch));
        }
    }
    m.rel_err_histogram = labelled(&st.rel_hist, rel_label);
    m.extra.insert("mean_abs_err".to_string(), st.mean_abs());
    m.extra
        .insert("non_comparable".to_string(), st.non_comparable as f64);
    let heat_values = std::mem::take(&mut st.heat);
    m.heatmap = heat.map(|g| g.into_heatmap(heat_values));
    m.worst = st
        .worst
        .into_vec()
        .into_iter()
        .map(|c| WorstElement {
            index: format_index(c.flat, shape, axes),
            actual: c.actual,
            expected: c.golden,
            abs_err: c.abs_err,
            rel_err: c.rel_err,
            ulp: c.ulp,
        })
        .collect();
    m
}
