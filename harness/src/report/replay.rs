//! The command that replays one case of a results file: `conform run --filter '<exact id>'
//! --seed <seed> --target <target>` (or `--worker <declaration>`), quoted for a POSIX shell
//! ([`crate::messages::replay_command`], the same line the CLI prints).

use crate::messages::{replay_command, worker_declaration};
use crate::results::{CaseResult, RunResults};

/// The replay line of `c`: a worker given by path is named by its declaration, so the line
/// runs when pasted.
pub fn command(c: &CaseResult, results: &RunResults) -> String {
    replay_command(
        &c.id,
        c.seed,
        &c.target,
        worker_declaration(results, &c.target),
        results.root.as_deref(),
    )
}

#[cfg(test)]
mod tests {
    use crate::messages::{regex_escape, replay_command, shell_quote};

    #[test]
    fn quotes_and_anchors() {
        assert_eq!(shell_quote("reference"), "reference");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(
            regex_escape("fa_prefill/bf16/b2-s1.5"),
            "fa_prefill/bf16/b2-s1\\.5"
        );
        assert_eq!(
            replay_command("a/it's", 7, "reference", None, None),
            "conform run --tier all --filter '^a/it'\\''s$' --seed 7 --target reference"
        );
        assert_eq!(
            replay_command("a", 7, "reference", None, Some("/my project")),
            "conform run --tier all --filter '^a$' --seed 7 --target reference --root '/my project'"
        );
    }
}
