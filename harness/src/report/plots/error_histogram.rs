//! Histogram of per-element error (ULP distance or relative error buckets): one horizontal
//! bar per bucket, smallest error at the top, element counts on a log axis so a handful of
//! badly wrong elements stays visible next to millions of exact ones.

use super::{render, segment_end, FONT};
use crate::report::error::ReportError;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const BAR: RGBColor = RGBColor(9, 105, 218);
const BAR_BAD: RGBColor = RGBColor(207, 34, 46);

/// `buckets`: (label, count) in increasing error order; `bad_from`: index of the first bucket
/// drawn in the failure colour (e.g. beyond the policy's tolerance), if known.
pub fn svg(
    title: &str,
    buckets: &[(String, u64)],
    bad_from: Option<usize>,
) -> Result<String, ReportError> {
    let n = buckets.len().max(1);
    let max = buckets.iter().map(|b| b.1).max().unwrap_or(1).max(1) as f64;
    let height = (70 + 22 * n as u32).clamp(160, 640);
    let longest = buckets.iter().map(|b| b.0.len()).max().unwrap_or(4) as u32;
    render("error histogram", (460, height), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 14))
            .margin(8)
            .x_label_area_size(34)
            .y_label_area_size(16 + 7 * longest)
            .build_cartesian_2d((0.8f64..max * 8.0).log_scale(), (0..n - 1).into_segmented())?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.08))
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(j) => buckets
                    .get(n - 1 - j)
                    .map(|b| b.0.clone())
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .x_desc("elements (log scale)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .label_style((FONT, 11))
            .draw()?;
        // Row j (from the bottom) shows bucket n-1-j, so bucket 0 is the top row.
        chart.draw_series(
            buckets
                .iter()
                .enumerate()
                .filter(|(_, b)| b.1 > 0)
                .map(|(i, b)| {
                    let j = n - 1 - i;
                    let color = if bad_from.is_some_and(|k| i >= k) {
                        BAR_BAD
                    } else {
                        BAR
                    };
                    let mut r = Rectangle::new(
                        [
                            (0.8, SegmentValue::Exact(j)),
                            (b.1 as f64, segment_end(j, n)),
                        ],
                        color.filled(),
                    );
                    r.set_margin(2, 2, 0, 0);
                    r
                }),
        )?;
        chart.draw_series(
            buckets
                .iter()
                .enumerate()
                .filter(|(_, b)| b.1 > 0)
                .map(|(i, b)| {
                    Text::new(
                        format!(" {}", b.1),
                        (b.1 as f64, SegmentValue::CenterOf(n - 1 - i)),
                        (FONT, 11)
                            .into_font()
                            .color(&BLACK)
                            .pos(Pos::new(HPos::Left, VPos::Center)),
                    )
                }),
        )?;
        Ok(())
    })
}
