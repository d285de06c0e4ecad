//! Median time per case across several perf record files (oldest first), each case relative
//! to its first recorded median so cases of very different durations share one axis.

use super::{render, FONT};
use crate::report::error::ReportError;
use plotters::prelude::*;

/// One line: its legend name and the median (us) in each file (None where absent).
pub struct Series {
    pub name: String,
    pub medians: Vec<Option<f64>>,
}

/// The series' points: (file index, median / first finite positive median).
pub fn relative(s: &Series) -> Vec<(f64, f64)> {
    let first = s
        .medians
        .iter()
        .flatten()
        .copied()
        .find(|m| m.is_finite() && *m > 0.0);
    match first {
        None => Vec::new(),
        Some(f) => s
            .medians
            .iter()
            .enumerate()
            .filter_map(|(i, m)| m.filter(|m| m.is_finite()).map(|m| (i as f64, m / f)))
            .collect(),
    }
}

pub fn svg(labels: &[String], series: &[Series]) -> Result<String, ReportError> {
    let n = labels.len().max(2);
    let lines: Vec<Vec<(f64, f64)>> = series.iter().map(relative).collect();
    let (lo, hi) = lines
        .iter()
        .flatten()
        .fold((1f64, 1f64), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    let pad = ((hi - lo) * 0.15).max(0.02);
    let (lo, hi) = (lo - pad, hi + pad);
    render("trend", (760, 380), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("median time relative to the first run", (FONT, 14))
            .margin(10)
            .x_label_area_size(34)
            .y_label_area_size(64)
            .build_cartesian_2d(-0.25f64..(n - 1) as f64 + 0.25, lo..hi)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.08))
            .x_labels(n)
            .x_label_formatter(&|x| super::index_label(labels, *x))
            .y_label_formatter(&|y| format!("{:+.0}%", (y - 1.0) * 100.0))
            .label_style((FONT, 11))
            .draw()?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(-0.25, 1.0), ((n - 1) as f64 + 0.25, 1.0)],
            BLACK.mix(0.5).stroke_width(1),
        )))?;
        for (k, (s, points)) in series.iter().zip(lines).enumerate() {
            let color = Palette99::pick(k).to_rgba();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)).point_size(3))?
                .label(s.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerLeft)
            .label_font((FONT, 11))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_to_first_present_median() {
        let s = Series {
            name: "a".into(),
            medians: vec![None, Some(200.0), Some(220.0), None],
        };
        assert_eq!(relative(&s), vec![(1.0, 1.0), (2.0, 1.1)]);
        let none = Series {
            name: "b".into(),
            medians: vec![None, Some(0.0)],
        };
        assert!(relative(&none).is_empty());
    }
}
