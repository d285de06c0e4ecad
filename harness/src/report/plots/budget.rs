//! Measured time as a fraction of the budget, one horizontal bar per case (numbered as in
//! the performance table), with the budget line at 1.

use super::{render, segment_end, FONT};
use crate::report::error::ReportError;
use plotters::prelude::*;

const WITHIN: RGBColor = RGBColor(26, 127, 55);
const OVER: RGBColor = RGBColor(207, 34, 46);

/// `rows`: (table number, measured / budget).
pub fn svg(rows: &[(usize, f64)]) -> Result<String, ReportError> {
    let n = rows.len().max(1);
    let xmax = rows
        .iter()
        .map(|r| r.1)
        .filter(|x| x.is_finite())
        .fold(1.25f64, |a, b| a.max(b * 1.1));
    let height = (80 + 20 * n as u32).clamp(150, 900);
    render("budget", (520, height), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("measured median / budget", (FONT, 14))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(40)
            .build_cartesian_2d(0f64..xmax, (0..n - 1).into_segmented())?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.08))
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(j) => rows
                    .get(n - 1 - j)
                    .map(|r| format!("#{}", r.0))
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .label_style((FONT, 11))
            .draw()?;
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            let j = n - 1 - i;
            let v = if r.1.is_finite() { r.1 } else { xmax };
            let color = if r.1 <= 1.0 { WITHIN } else { OVER };
            let mut rect = Rectangle::new(
                [(0.0, SegmentValue::Exact(j)), (v, segment_end(j, n))],
                color.mix(0.85).filled(),
            );
            rect.set_margin(3, 3, 0, 0);
            rect
        }))?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(1.0, SegmentValue::Exact(0)), (1.0, SegmentValue::Last)],
            BLACK.stroke_width(2),
        )))?;
        Ok(())
    })
}
