//! The report's plots, drawn with plotters' SVG backend into strings that are inlined in the
//! page. Text is emitted as SVG `<text>` elements rendered by the browser, so no font files
//! are needed at build or view time.

pub mod budget;
pub mod colormap;
pub mod error_histogram;
pub mod heatmap;
pub mod noise;
pub mod timeline;
pub mod trend;

use super::error::ReportError;
use plotters::coord::Shift;
use plotters::prelude::*;

/// The drawing error of the SVG backend.
pub type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// The font family of every plot label (resolved by the viewer's browser).
pub const FONT: &str = "sans-serif";

/// Renders a `width x height` SVG with `draw`, returning the `<svg>` element.
pub fn render<F>(plot: &'static str, size: (u32, u32), draw: F) -> Result<String, ReportError>
where
    F: FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult,
{
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        root.fill(&WHITE).map_err(ReportError::plot(plot))?;
        draw(&root).map_err(ReportError::plot(plot))?;
        root.present().map_err(ReportError::plot(plot))?;
    }
    Ok(buf)
}

/// For a segmented axis over `0..=n-1`: the far edge of segment `j`.
pub fn segment_end(j: usize, n: usize) -> SegmentValue<usize> {
    if j + 1 >= n {
        SegmentValue::Last
    } else {
        SegmentValue::Exact(j + 1)
    }
}

/// The tick label at `x` on an axis whose points are the indices of `labels`: the label of the
/// index `x` falls on, and nothing between indices.
pub fn index_label(labels: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() < 1e-6 && i >= 0.0 {
        labels.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}
