//! The MC2 pipeline: planned tiles on the compute stream (matmul) and the communication
//! stream (all-reduce), with the serial (unsplit) time and the predicted fused time marked.

use super::{render, FONT};
use crate::report::error::ReportError;
use crate::report::mc2_input::Mc2Timeline;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const COMPUTE: [RGBColor; 2] = [RGBColor(9, 105, 218), RGBColor(84, 174, 255)];
const COMM: [RGBColor; 2] = [RGBColor(191, 135, 0), RGBColor(234, 196, 53)];
const SERIAL: RGBColor = RGBColor(207, 34, 46);
const PREDICTED: RGBColor = RGBColor(26, 127, 55);

pub fn svg(t: &Mc2Timeline) -> Result<String, ReportError> {
    let end = t
        .tiles
        .iter()
        .map(|s| s.comm_end_us.max(s.matmul_end_us))
        .fold(t.serial_us.max(t.predicted_us), f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.04;
    render("MC2 timeline", (900, 230), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("planned tiles on two streams (us)", (FONT, 14))
            .margin(10)
            .margin_left(90)
            .x_label_area_size(30)
            .build_cartesian_2d(0f64..end, 0f64..2f64)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.08))
            .disable_y_mesh()
            .disable_y_axis()
            .x_label_formatter(&|x| crate::html::num(*x))
            .label_style((FONT, 11))
            .draw()?;
        // Lane 1 (top): compute; lane 0: communication.
        for (lane, name) in [(1.5f64, "compute"), (0.5, "comm")] {
            let (x, y) = chart.backend_coord(&(0.0, lane));
            root.draw(&Text::new(
                name,
                (x - 8, y),
                (FONT, 13)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Right, VPos::Center)),
            ))?;
        }
        let px_per_us = 780.0 / end;
        for (idx, s) in t.tiles.iter().enumerate() {
            for (lane, x0, x1, colors) in [
                (1.0, s.matmul_start_us, s.matmul_end_us, COMPUTE),
                (0.0, s.comm_start_us, s.comm_end_us, COMM),
            ] {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(x0, lane + 0.15), (x1, lane + 0.85)],
                    colors[idx % 2].filled(),
                )))?;
                if (x1 - x0) * px_per_us > 24.0 {
                    chart.draw_series(std::iter::once(Text::new(
                        format!("{idx}"),
                        ((x0 + x1) / 2.0, lane + 0.5),
                        (FONT, 11)
                            .into_font()
                            .color(&WHITE)
                            .pos(Pos::new(HPos::Center, VPos::Center)),
                    )))?;
                }
            }
        }
        for (x, color, name) in [
            (t.serial_us, SERIAL, "serial (unsplit)"),
            (t.predicted_us, PREDICTED, "predicted fused"),
        ] {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x, 0.0), (x, 2.0)],
                    color.stroke_width(2),
                )))?
                .label(format!("{name}: {} us", crate::html::num(x)))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, 11))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.3))
            .draw()?;
        Ok(())
    })
}
