//! Heatmap of error over two logical axes (for attention: query position x head). A masking
//! or tiling bug shows as a triangle, a band or a block at a glance.

use super::{colormap, render, FONT};
use crate::report::error::ReportError;
use crate::results::Heatmap;
use plotters::prelude::*;

/// Cells are drawn at logical coordinates: column c spans heads `c*col_bucket ..
/// (c+1)*col_bucket`; row r spans positions `r*row_bucket .. (r+1)*row_bucket`, position 0 at
/// the top (a reversed y axis).
pub fn svg(title: &str, h: &Heatmap) -> Result<String, ReportError> {
    let (rows, cols) = (h.rows.max(1), h.cols.max(1));
    let (rb, cb) = (h.row_bucket.max(1) as f64, h.col_bucket.max(1) as f64);
    let (height, width) = (rows as f64 * rb, cols as f64 * cb);
    let vmax = h
        .values
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    // Cells the grid has but the values lack are drawn (and counted) as non-finite.
    let non_finite = (0..rows * cols)
        .filter(|&i| !h.values.get(i).is_some_and(|v| v.is_finite()))
        .count();
    let caption = if non_finite > 0 {
        format!("{title} ({non_finite} non-finite cells, purple)")
    } else {
        title.to_string()
    };
    render("heatmap", (580, 420), |root| {
        let (main, legend) = root.split_horizontally(480);
        let mut chart = ChartBuilder::on(&main)
            .caption(caption, (FONT, 14))
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..width, height..0f64)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.08))
            .disable_mesh()
            .x_desc(h.col_axis.as_str())
            .y_desc(h.row_axis.as_str())
            .y_label_formatter(&|y| format!("{y:.0}"))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .label_style((FONT, 11))
            .draw()?;
        chart.draw_series((0..rows).flat_map(|r| {
            (0..cols).map(move |c| {
                let v = h.values.get(r * cols + c).copied().unwrap_or(f64::NAN);
                let t = if !v.is_finite() {
                    f64::NAN
                } else if vmax > 0.0 {
                    v / vmax
                } else {
                    0.0
                };
                let (x0, y0) = (c as f64 * cb, r as f64 * rb);
                Rectangle::new([(x0, y0), (x0 + cb, y0 + rb)], colormap::color(t).filled())
            })
        }))?;
        let mut scale = ChartBuilder::on(&legend)
            .margin_top(34)
            .margin_bottom(44)
            .margin_right(8)
            .y_label_area_size(62)
            .build_cartesian_2d(0f64..1f64, 0f64..vmax.max(f64::MIN_POSITIVE))?;
        scale
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.08))
            .disable_mesh()
            .disable_x_axis()
            .y_labels(6)
            .y_label_formatter(&|y| crate::html::num(*y))
            .label_style((FONT, 11))
            .draw()?;
        let steps = 64;
        scale.draw_series((0..steps).map(|i| {
            let (a, b) = (i as f64 / steps as f64, (i + 1) as f64 / steps as f64);
            let top = vmax.max(f64::MIN_POSITIVE);
            Rectangle::new(
                [(0.0, a * top), (1.0, b * top)],
                colormap::color((a + b) / 2.0).filled(),
            )
        }))?;
        Ok(())
    })
}
