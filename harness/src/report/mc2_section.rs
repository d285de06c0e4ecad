//! MC2: the planned tiles on the compute and communication streams, the serial time and the
//! predicted fused time.

use super::error::ReportError;
use super::html::num;
use super::mc2_input::Mc2Timeline;
use super::plots::timeline;
use crate::messages::report as msg;
use std::fmt::Write;

/// Rows of the per-tile table shown before it is cut.
pub const MAX_TILE_ROWS: usize = 64;

pub fn section(t: &Mc2Timeline) -> Result<String, ReportError> {
    let gain = t.serial_us - t.predicted_us;
    let frac = if t.serial_us > 0.0 {
        gain / t.serial_us
    } else {
        0.0
    };
    let mut s = format!(
        "<section id=\"mc2\"><h2>{}</h2>\n<p>{} tiles &middot; serial {} us &middot; \
         predicted fused {} us &middot; predicted gain {} us ({}%)</p>\n\
         <div class=\"plots\"><div class=\"plot\">{}</div></div>\n",
        msg::H_MC2,
        t.tiles.len(),
        num(t.serial_us),
        num(t.predicted_us),
        num(gain),
        num(frac * 100.0),
        timeline::svg(t)?
    );
    s.push_str(
        "<table class=\"tiles\"><thead><tr><th>tile</th><th>rows</th><th>matmul start</th>\
         <th>matmul end</th><th>comm start</th><th>comm end</th><th>comm wait</th></tr></thead><tbody>\n",
    );
    for (i, tile) in t.tiles.iter().take(MAX_TILE_ROWS).enumerate() {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            i,
            tile.rows,
            num(tile.matmul_start_us),
            num(tile.matmul_end_us),
            num(tile.comm_start_us),
            num(tile.comm_end_us),
            num(tile.comm_start_us - tile.matmul_end_us)
        );
    }
    s.push_str("</tbody></table>\n");
    if t.tiles.len() > MAX_TILE_ROWS {
        let _ = writeln!(
            s,
            "<p class=\"note\">first {MAX_TILE_ROWS} of {} tiles listed</p>",
            t.tiles.len()
        );
    }
    s.push_str("</section>\n");
    Ok(s)
}
