//! Median time per case across several perf record files (oldest first).

use super::{render, FONT};
use crate::report::error::ReportError;
use plotters::prelude::*;

/// One line: its legend name and the median (us) in each file (None where absent).
pub struct Series {
    pub name: String,
    pub medians: Vec<Option<f64>>,
}

pub fn svg(labels: &[String], series: &[Series]) -> Result<String, ReportError> {
    let n = labels.len().max(2);
    let values = series
        .iter()
        .flat_map(|s| s.medians.iter().flatten().copied());
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo.is_finite() {
        (lo * 0.9, hi * 1.1 + f64::MIN_POSITIVE)
    } else {
        (0.0, 1.0)
    };
    render("trend", (760, 380), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("median time per run (us)", (FONT, 14))
            .margin(10)
            .x_label_area_size(34)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.25f64..(n - 1) as f64 + 0.25, lo..hi)?;
        chart
            .configure_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y| crate::report::html::num(*y))
            .label_style((FONT, 11))
            .draw()?;
        for (k, s) in series.iter().enumerate() {
            let color = Palette99::pick(k).to_rgba();
            let points: Vec<(f64, f64)> = s
                .medians
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.map(|m| (i as f64, m)))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)).point_size(3))?
                .label(s.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 11))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
        Ok(())
    })
}
