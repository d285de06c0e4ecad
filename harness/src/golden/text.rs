//! User-facing strings of the golden commands: `verify`, `bless`, `accept` and `review`.
//! They live beside the golden store whose outcomes they describe (the interactive review in
//! [`super::review`] prints some of them), so the messages layer never reaches into `golden`.

use super::review::{Pending, Tally};
use super::verify::VerifyReport;

/// One pending case, as `--list` prints it and the interactive review shows it.
pub fn pending_line(p: &Pending) -> String {
    change_line(&p.id, &p.change)
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

pub fn verify_summary(r: &VerifyReport) -> String {
    let mut s = String::new();
    for f in &r.errors {
        s.push_str(&format!("ERROR  {}: {}\n", f.subject, f.message));
    }
    for f in &r.drift {
        s.push_str(&format!("DRIFT  {}: {}\n", f.subject, f.message));
    }
    s.push_str(&format!(
        "golden verify: {} cases checked, {} drifted, {} store errors",
        r.checked,
        r.drift.len(),
        r.errors.len()
    ));
    s
}

pub fn bless_review(r: &super::bless::BlessReview) -> String {
    use super::bless::BlessChange;
    let mut s = String::new();
    let mut unchanged = 0;
    for (id, c) in &r.changes {
        match c {
            BlessChange::Unchanged => unchanged += 1,
            c => {
                s.push_str(&change_line(id, c));
                s.push('\n');
            }
        }
    }
    s.push_str(&format!(
        "{unchanged} unchanged, {} to review\n",
        r.changed_count()
    ));
    if r.written.is_empty() {
        s.push_str("nothing staged: the golden store is up to date");
    } else {
        s.push_str(&format!(
            "staged {} file(s) as .new next to the golden data; review them, then run `conform golden review` (case by case) or `conform golden accept` (all)",
            r.written.len()
        ));
    }
    s
}

/// One case of a bless review (and of `golden review`): `new`, `changed` with what
/// changed, `removed`; `Unchanged` is a data file staged again for an unchanged entry.
pub fn change_line(id: &str, c: &super::bless::BlessChange) -> String {
    use super::bless::BlessChange;
    match c {
        BlessChange::New => format!("new        {id}"),
        BlessChange::Removed => format!("removed    {id}"),
        BlessChange::Changed(what) => format!("changed    {id}: {}", what.join("; ")),
        BlessChange::Unchanged => {
            format!("restaged   {id}: its data file was missing from the store")
        }
    }
}

pub fn verify_progress(i: usize, n: usize, id: &str) -> String {
    format!("[{i}/{n}] {id}")
}

pub fn accept_done(moved: usize, removed: usize) -> String {
    format!("accepted: {moved} file(s) moved into golden/, {removed} removed")
}

pub fn nothing_to_accept() -> String {
    "nothing to accept: no staged MANIFEST.toml.new (run `conform golden bless` first)".to_string()
}
