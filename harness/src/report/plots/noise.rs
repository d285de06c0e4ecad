//! One history series over its newest runs: each run's location (fenced mean), the learned
//! night-to-night band each run was judged against (shaded), the runs judged environment drift
//! (orange rings) and the runs the gate flagged (red squares).

use super::{render, FONT};
use crate::report::error::ReportError;
use crate::report::history_input::NoiseSeries;
use plotters::prelude::*;

const DRIFT: RGBColor = RGBColor(230, 140, 20);
const FLAGGED: RGBColor = RGBColor(200, 30, 30);

pub fn svg(s: &NoiseSeries) -> Result<String, ReportError> {
    let n = s.locations.len().max(2);
    let values = s
        .locations
        .iter()
        .copied()
        .chain(s.bands.iter().flatten().flat_map(|(lo, hi)| [*lo, *hi]))
        .filter(|v| v.is_finite());
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    let (lo, hi) = if lo.is_finite() && hi > lo {
        let pad = (hi - lo) * 0.1;
        (lo - pad, hi + pad)
    } else if lo.is_finite() {
        (lo * 0.9, lo * 1.1 + 1e-9)
    } else {
        (0.0, 1.0)
    };
    render("noise", (760, 260), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(s.series.as_str(), (FONT, 13))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..(n - 1) as f64 + 0.5, lo..hi)?;
        let labels = &s.labels;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.08))
            .x_labels(n.min(16))
            .x_label_formatter(&|x| super::index_label(labels, *x))
            .y_desc("location us")
            .y_label_formatter(&|y| format!("{y:.1}"))
            .label_style((FONT, 10))
            .draw()?;
        // The band of each judged run, as a shaded bar around the run.
        chart.draw_series(s.bands.iter().enumerate().filter_map(|(i, b)| {
            b.map(|(lo, hi)| {
                Rectangle::new(
                    [(i as f64 - 0.4, lo), (i as f64 + 0.4, hi)],
                    BLUE.mix(0.15).filled(),
                )
            })
        }))?;
        let points: Vec<(f64, f64)> = s
            .locations
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(i, v)| (i as f64, *v))
            .collect();
        chart.draw_series(LineSeries::new(points.clone(), BLACK.stroke_width(1)).point_size(2))?;
        chart.draw_series(
            s.drift
                .iter()
                .filter_map(|&i| points.get(i))
                .map(|&p| Circle::new(p, 6, DRIFT.stroke_width(2))),
        )?;
        chart.draw_series(
            s.flagged
                .iter()
                .filter_map(|&i| points.get(i))
                .map(|&(x, y)| {
                    Rectangle::new([(x - 0.15, y), (x + 0.15, y)], FLAGGED.stroke_width(6))
                }),
        )?;
        Ok(())
    })
}
