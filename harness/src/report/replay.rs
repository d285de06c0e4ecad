//! The command that replays one case: `conform run --filter '<exact id>' --seed <seed>
//! --target <target>`, quoted for a POSIX shell.

use crate::results::{CaseResult, RunResults};

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

/// The replay line of `c` (see `messages::replay_command`): a worker given by path is named by
/// its declaration, so the line runs when pasted.
pub fn command(c: &CaseResult, results: &RunResults) -> String {
    let which = match crate::messages::worker_declaration(results, &c.target) {
        Some(decl) => format!("--worker {}", shell_quote(decl)),
        None => format!("--target {}", shell_quote(&c.target)),
    };
    format!(
        "conform run --tier all --filter {} --seed {} {which}",
        shell_quote(&format!("^{}$", regex_literal(&c.id))),
        c.seed,
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
