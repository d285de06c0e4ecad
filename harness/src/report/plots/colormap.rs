//! A sequential colour scale for errors (pale for zero, dark red for the maximum) and a
//! distinct colour for non-finite values.

use plotters::style::RGBColor;

const STOPS: [(u8, u8, u8); 5] = [
    (255, 251, 230),
    (254, 217, 118),
    (253, 141, 60),
    (227, 26, 28),
    (128, 0, 38),
];

/// Colour for non-finite values (never part of the scale).
pub const NON_FINITE: RGBColor = RGBColor(118, 42, 131);

/// Colour of `t` in [0, 1] (clamped); NaN gets [`NON_FINITE`].
pub fn color(t: f64) -> RGBColor {
    if t.is_nan() {
        return NON_FINITE;
    }
    let t = t.clamp(0.0, 1.0) * (STOPS.len() - 1) as f64;
    let i = (t.floor() as usize).min(STOPS.len() - 2);
    let f = t - i as f64;
    let lerp = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    RGBColor(lerp(a.0, b.0), lerp(a.1, b.1), lerp(a.2, b.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_and_clamping() {
        assert_eq!(color(0.0), RGBColor(255, 251, 230));
        assert_eq!(color(1.0), RGBColor(128, 0, 38));
        assert_eq!(color(7.0), color(1.0));
        assert_eq!(color(-1.0), color(0.0));
        assert_eq!(color(f64::NAN), NON_FINITE);
    }
}
