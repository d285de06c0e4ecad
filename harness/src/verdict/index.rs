//! Logical element positions: a flat row-major index written with the tensor's axis names,
//! e.g. `b=0 n=3 s=17 d=5`.

use std::fmt::Write;

/// Formats flat index `flat` of a row-major tensor of `shape` with axis names `axes`. When the
/// names do not match the rank, the axes are called `d0`, `d1`, ...
pub fn format_index(flat: usize, shape: &[usize], axes: &[String]) -> String {
    let mut coords = vec![0usize; shape.len()];
    let mut rest = flat;
    for (c, &dim) in coords.iter_mut().zip(shape).rev() {
        if dim == 0 {
            break;
        }
        *c = rest % dim;
        rest /= dim;
    }
    let named = axes.len() == shape.len();
    let mut out = String::new();
    for (k, c) in coords.iter().enumerate() {
        if k > 0 {
            out.push(' ');
        }
        if named {
            let _ = write!(out, "{}={c}", axes[k]);
        } else {
            let _ = write!(out, "d{k}={c}");
        }
    }
    if shape.is_empty() {
        out.push_str("scalar");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flat_index_is_written_with_axis_names() {
        let shape = [2, 4, 32, 8];
        let axes = names(&["b", "n", "s", "d"]);
        let flat = (3 * 32 + 17) * 8 + 5;
        assert_eq!(format_index(flat, &shape, &axes), "b=0 n=3 s=17 d=5");
        let flat = ((4 + 2) * 32 + 31) * 8 + 7;
        assert_eq!(format_index(flat, &shape, &axes), "b=1 n=2 s=31 d=7");
        assert_eq!(format_index(0, &shape, &axes), "b=0 n=0 s=0 d=0");
    }

    #[test]
    fn missing_or_mismatched_axis_names_fall_back_to_positions() {
        assert_eq!(format_index(5, &[2, 3], &[]), "d0=1 d1=2");
        assert_eq!(format_index(5, &[2, 3], &names(&["x"])), "d0=1 d1=2");
        assert_eq!(format_index(0, &[], &[]), "scalar");
    }
}
