//! The command that replays one case: `conform run --filter '<exact id>' --seed <seed>
//! --target <target>`, quoted for a POSIX shell.

use crate::results::CaseResult;

/// Escapes regex metacharacters so the filter matches the id literally.
pub fn regex_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Single-quotes `s` for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-=:,".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

pub fn command(c: &CaseResult) -> String {
    format!(
        "conform run --filter {} --seed {} --target {}",
        shell_quote(&format!("^{}$", regex_literal(&c.id))),
        c.seed,
        shell_quote(&c.target)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_anchors() {
        assert_eq!(shell_quote("reference"), "reference");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(
            regex_literal("fa_prefill/bf16/b2-s1.5"),
            "fa_prefill/bf16/b2-s1\\.5"
        );
    }
}
