//! User-facing strings of `conform golden review`.

use crate::golden::review::{Pending, Tally};

/// One pending case, as `--list` prints it and the interactive review shows it.
pub fn pending_line(p: &Pending) -> String {
    super::golden::change_line(&p.id, &p.change)
}

/// The pending cases, one a line, and their count.
pub fn pending_list(pending: &[Pending]) -> String {
    let mut s = String::new();
    for p in pending {
        s.push_str(&pending_line(p));
        s.push('\n');
    }
    s.push_str(&format!("{} case(s) pending review", pending.len()));
    s
}

/// The interactive review's heading for case `i` of `n`.
pub fn case_header(i: usize, n: usize, p: &Pending) -> String {
    format!("[{i}/{n}] {}", pending_line(p))
}

/// The question after each case.
pub fn prompt() -> &'static str {
    "  accept (a), reject (r), skip (s), accept all remaining (A), reject all remaining (R), quit (q)? "
}

/// An answer that is none of the keys.
pub fn unknown_answer(answer: &str) -> String {
    format!("  `{answer}` is not an answer: type a, r, s, A, R or q and press Enter")
}

/// After a review: what was decided and what is left.
pub fn summary(t: &Tally, left: usize) -> String {
    let mut s = format!(
        "golden review: {} accepted, {} rejected, {} skipped; {left} still pending",
        t.accepted.len(),
        t.rejected.len(),
        t.skipped.len()
    );
    if left > 0 {
        s.push_str(" (run `conform golden review` again, or `conform golden accept` for all)");
    }
    s
}

/// Nothing is staged.
pub fn nothing_to_review() -> &'static str {
    "nothing to review: no staged changes (run `conform golden bless` first)"
}

/// Stdin is not a terminal and no decision was given on the command line.
pub fn needs_terminal_or_flags() -> &'static str {
    "golden review asks about each case on a terminal, and stdin is not one: decide with \
     `--accept ID_OR_REGEX` and `--reject ID_OR_REGEX` (each repeatable; cases matched by \
     neither stay pending), or list the pending cases with `--list`"
}
