//! User-facing strings of the golden commands: `verify`, `bless`, `accept` and `review`.
//! They live beside the golden store whose outcomes they describe, so the messages layer never
//! reaches into `golden`; they read the outcomes (`review`, `bless`, `verify`), which never
//! read them (the interactive prompt of `golden review` is the CLI's).

use super::bless::{BlessChange, BlessReview};
use super::review::{Pending, Tally};
use super::verify::VerifyReport;
use std::fmt;

/// One pending case, as `--list` prints it and the interactive review shows it.
impl fmt::Display for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&change_line(&self.id, &self.change))
    }
}

/// The pending cases, one a line, and their count.
pub fn pending_list(pending: &[Pending]) -> String {
    let mut s = String::new();
    for p in pending {
        s.push_str(&p.to_string());
        s.push('\n');
    }
    s.push_str(&format!("{} case(s) pending review", pending.len()));
    s
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

/// `golden verify`'s findings, one a line, and the totals.
impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.errors {
            writeln!(f, "ERROR  {}: {}", e.subject, e.message)?;
        }
        for d in &self.drift {
            writeln!(f, "DRIFT  {}: {}", d.subject, d.message)?;
        }
        write!(
            f,
            "golden verify: {} cases checked, {} drifted, {} store errors",
            self.checked,
            self.drift.len(),
            self.errors.len()
        )
    }
}

/// What `golden bless` found and staged: each change, one a line, then the totals.
impl fmt::Display for BlessReview {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut unchanged = 0;
        for (id, c) in &self.changes {
            match c {
                BlessChange::Unchanged => unchanged += 1,
                c => writeln!(f, "{}", change_line(id, c))?,
            }
        }
        writeln!(
            f,
            "{unchanged} unchanged, {} to review",
            self.changed_count()
        )?;
        if self.written.is_empty() {
            f.write_str("nothing staged: the golden store is up to date")
        } else {
            write!(
                f,
                "staged {} file(s) as .new next to the golden data; review them, then run `conform golden review` (case by case) or `conform golden accept` (all)",
                self.written.len()
            )
        }
    }
}

/// One case of a bless review (and of `golden review`): `new`, `changed` with what
/// changed, `removed`; `Unchanged` is a data file staged again for an unchanged entry.
fn change_line(id: &str, c: &BlessChange) -> String {
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
