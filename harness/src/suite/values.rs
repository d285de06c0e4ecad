//! The numbers a suite writes that no type checks: the `inputs` distribution's bounds and
//! scales, and every numeric parameter. A NaN or infinite bound gives NaN inputs that pass
//! every check (NaN matches NaN by class), `low >= high` or a `std` at or below zero an
//! input set that is not what the case says; a NaN parameter would reach the op as JSON `null`
//! ("invalid type: null", which the user never wrote). Each error quotes what the file says.

use conform_reference::ops::ValueDist;

/// A number as TOML writes it (`nan`, `inf`, `-inf`, `1.0`), so a message quotes the file.
fn toml_number(x: f64) -> String {
    toml::Value::Float(x).to_string()
}

/// A bound or scale of `inputs` as the file writes it: `low = nan`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quoted(pub &'static str, pub f64);

impl std::fmt::Display for Quoted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{} = {}`", self.0, toml_number(self.1))
    }
}

/// Why `inputs` cannot describe an input set; each quotes what the file says.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum InputsError {
    #[error("`inputs`: {0} is not a finite number")]
    NotFinite(Quoted),
    #[error("`inputs`: {0} is not a fraction in [0, 1]")]
    NotAFraction(Quoted),
    #[error("`inputs`: {0} is not below {1}: a uniform distribution needs low < high")]
    NotBelow(Quoted, Quoted),
    #[error(
        "`inputs`: {0} and {1} are further apart than the largest f64: the values would be \
         infinite"
    )]
    TooFarApart(Quoted, Quoted),
    #[error("`inputs`: {0} is not a standard deviation above 0")]
    NotAStd(Quoted),
    #[error("`inputs`: {0} is not a scale above 0")]
    NotAScale(Quoted),
}

/// Why `inputs` cannot describe an input set, or Ok.
pub fn check_inputs(dist: &ValueDist) -> Result<(), InputsError> {
    let finite = |name: &'static str, x: f64| {
        if x.is_finite() {
            Ok(())
        } else {
            Err(InputsError::NotFinite(Quoted(name, x)))
        }
    };
    let fraction = |x: f64| {
        if (0.0..=1.0).contains(&x) {
            Ok(())
        } else {
            Err(InputsError::NotAFraction(Quoted("fraction", x)))
        }
    };
    match *dist {
        ValueDist::Uniform { low, high } => {
            finite("low", low)?;
            finite("high", high)?;
            if low >= high {
                return Err(InputsError::NotBelow(
                    Quoted("low", low),
                    Quoted("high", high),
                ));
            }
            if !(high - low).is_finite() {
                return Err(InputsError::TooFarApart(
                    Quoted("low", low),
                    Quoted("high", high),
                ));
            }
        }
        ValueDist::Normal { mean, std } => {
            finite("mean", mean)?;
            finite("std", std)?;
            if std <= 0.0 {
                return Err(InputsError::NotAStd(Quoted("std", std)));
            }
        }
        ValueDist::CannOutliers {
            fraction: f,
            outlier_scale,
        } => {
            fraction(f)?;
            finite("outlier_scale", outlier_scale)?;
            if outlier_scale <= 0.0 {
                return Err(InputsError::NotAScale(Quoted(
                    "outlier_scale",
                    outlier_scale,
                )));
            }
        }
        ValueDist::Special { fraction: f, .. } => fraction(f)?,
    }
    Ok(())
}

/// The first parameter holding a NaN or an infinity (in an array or table too), as the file
/// writes it: `scale = nan`.
pub fn non_finite_param(params: &toml::Table) -> Option<String> {
    fn has_non_finite(v: &toml::Value) -> bool {
        match v {
            toml::Value::Float(x) => !x.is_finite(),
            toml::Value::Array(a) => a.iter().any(has_non_finite),
            toml::Value::Table(t) => t.values().any(has_non_finite),
            _ => false,
        }
    }
    params
        .iter()
        .find(|(_, v)| has_non_finite(v))
        .map(|(k, v)| format!("`{k} = {v}`: parameters are finite numbers (nan and inf are not)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(t: &str) -> ValueDist {
        toml::from_str::<toml::Table>(&format!("d = {t}")).unwrap()["d"]
            .clone()
            .try_into()
            .unwrap()
    }

    #[test]
    fn bounds_and_scales_that_check_nothing_are_refused_quoting_the_file() {
        for (t, msg) in [
            (
                r#"{ kind = "uniform", low = nan, high = inf }"#,
                "`low = nan` is not a finite number",
            ),
            (
                r#"{ kind = "uniform", low = -1.0, high = inf }"#,
                "`high = inf` is not a finite number",
            ),
            (
                r#"{ kind = "uniform", low = 2.0, high = 1.0 }"#,
                "`low = 2.0` is not below `high = 1.0`",
            ),
            (
                r#"{ kind = "uniform", low = 1.0, high = 1.0 }"#,
                "`low = 1.0` is not below `high = 1.0`",
            ),
            (
                r#"{ kind = "uniform", low = -1.7e308, high = 1.7e308 }"#,
                "further apart",
            ),
            (
                r#"{ kind = "normal", mean = 0.0, std = -1.0 }"#,
                "`std = -1.0` is not a standard deviation above 0",
            ),
            (
                r#"{ kind = "normal", mean = 0.0, std = 0.0 }"#,
                "`std = 0.0`",
            ),
            (
                r#"{ kind = "normal", mean = nan, std = 1.0 }"#,
                "`mean = nan`",
            ),
            (
                r#"{ kind = "cann_outliers", outlier_scale = nan }"#,
                "`outlier_scale = nan` is not a finite number",
            ),
            (
                r#"{ kind = "cann_outliers", outlier_scale = -5.0 }"#,
                "`outlier_scale = -5.0` is not a scale above 0",
            ),
            (
                r#"{ kind = "cann_outliers", fraction = 2.0 }"#,
                "`fraction = 2.0` is not a fraction",
            ),
            (
                r#"{ kind = "special", fraction = nan }"#,
                "`fraction = nan` is not a fraction",
            ),
        ] {
            let e = check_inputs(&dist(t)).unwrap_err().to_string();
            assert!(e.contains(msg), "{t}: {e}");
        }
        for ok in [
            r#"{ kind = "uniform", low = -1.0, high = 1.0 }"#,
            r#"{ kind = "normal", mean = 0.0, std = 0.5 }"#,
            r#"{ kind = "cann_outliers" }"#,
            r#"{ kind = "special", fraction = 1.0, non_finite = true }"#,
        ] {
            assert_eq!(check_inputs(&dist(ok)), Ok(()), "{ok}");
        }
    }

    #[test]
    fn a_non_finite_parameter_is_quoted_as_written() {
        let t: toml::Table = toml::from_str("m = 4\nscale = nan\n").unwrap();
        assert_eq!(
            non_finite_param(&t).unwrap(),
            "`scale = nan`: parameters are finite numbers (nan and inf are not)"
        );
        let t: toml::Table = toml::from_str("lens = [1.0, -inf]\n").unwrap();
        assert!(non_finite_param(&t)
            .unwrap()
            .starts_with("`lens = [1.0, -inf]`"));
        let t: toml::Table = toml::from_str("scale = 0.5\nx = [1, 2]\n").unwrap();
        assert_eq!(non_finite_param(&t), None);
    }
}
