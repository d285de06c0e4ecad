//! HTML building blocks of the report and the kill matrix page: escaping of every user
//! string, the page skeleton and its inline CSS, and writing a page as `DIR/index.html`.
//! The page carries a Content-Security-Policy that forbids every network load and every
//! script, so a report can never phone home when opened.

use std::fmt::Write;

/// Escapes text for element content and quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A stable, attribute-safe anchor for a case: `case-` + the first 16 hex digits of BLAKE3
/// over `key`.
pub fn anchor(key: &str) -> String {
    format!("case-{}", &blake3::hash(key.as_bytes()).to_hex()[..16])
}

/// Number formatting for tables: 4 significant digits, scientific outside [1e-3, 1e6).
pub fn num(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return "0".into();
    }
    let a = x.abs();
    if (1e-3..1e6).contains(&a) {
        let digits = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
        format!("{x:.digits$}")
    } else {
        format!("{x:.3e}")
    }
}

pub const CSS: &str = include_str!("report/style.css");

/// The Content-Security-Policy of the page: inline styles and inline SVG only.
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

/// Wraps `body` into a complete document titled `title`.
pub fn page(title: &str, body: &str) -> String {
    let mut s = String::with_capacity(body.len() + CSS.len() + 512);
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    let _ = writeln!(
        s,
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
    );
    s.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(s, "<title>{}</title>", escape(title));
    let _ = writeln!(s, "<style>\n{CSS}</style>\n</head>\n<body>");
    s.push_str(body);
    s.push_str("</body>\n</html>\n");
    s
}

/// A status badge (`passed`, `failed`, ...; also perf verdicts).
pub fn badge(text: &str, class: &str) -> String {
    format!(
        "<span class=\"badge {}\">{}</span>",
        escape(class),
        escape(text)
    )
}

/// Writes `DIR/index.html` (creating DIR) and returns its path; or the path that could not be
/// written, with why.
pub fn write_index(
    dir: &std::path::Path,
    page: &str,
) -> Result<std::path::PathBuf, (std::path::PathBuf, std::io::Error)> {
    std::fs::create_dir_all(dir).map_err(|e| (dir.to_path_buf(), e))?;
    let path = dir.join("index.html");
    crate::atomic_file::write(&path, page.as_bytes()).map_err(|e| (path.clone(), e))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("fa_prefill/bf16"), "fa_prefill/bf16");
    }

    #[test]
    fn anchors_are_stable_and_safe() {
        let a = anchor("x<y>\"");
        assert_eq!(a, anchor("x<y>\""));
        assert_ne!(a, anchor("x<y>'"));
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(1.5), "1.500");
        assert_eq!(num(1262.0), "1262");
        assert_eq!(num(3.0e-6), "3.000e-6");
        assert_eq!(num(f64::NAN), "NaN");
        assert_eq!(num(f64::NEG_INFINITY), "-inf");
    }
}
