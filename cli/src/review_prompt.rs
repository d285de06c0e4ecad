//! The interactive prompt of `conform golden review`: each pending case on the terminal, one
//! answer a line. Only the asking lives here (as insta keeps its review UI in its CLI); what a
//! decision does to the store is the library's ([`Review::decide`]).
//!
//! [`Review::decide`]: conform_harness::golden::review::Review::decide

use conform_harness::golden::review::{Decision, Pending, ReviewError, Tally};
use conform_harness::golden::GoldenError;
use std::io::{BufRead, Write};

/// The question after each case.
const PROMPT: &str = "  accept (a), reject (r), skip (s), accept all remaining (A), reject all remaining (R), quit (q)? ";

/// What one answer asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// This case.
    One(Decision),
    /// This case and every remaining one.
    All(Decision),
    /// Stop; the rest stay pending.
    Quit,
}

impl Answer {
    /// The answer a line means, or None for one that is none of the keys.
    fn parse(line: &str) -> Option<Answer> {
        Some(match line {
            "a" => Answer::One(Decision::Accept),
            "r" => Answer::One(Decision::Reject),
            "s" => Answer::One(Decision::Skip),
            "A" => Answer::All(Decision::Accept),
            "R" => Answer::All(Decision::Reject),
            "q" => Answer::Quit,
            _ => return None,
        })
    }
}

/// Asks about each of `pending` on `out`, reading one answer a line from `input`: `a` accept,
/// `r` reject, `s` skip, `A` / `R` accept / reject this and every remaining case, `q` (or the
/// end of the input) quit leaving the rest pending. Anything else asks again. Each decision is
/// carried out by `decide` (the review's [`Review::decide`]) before the next case is shown.
///
/// [`Review::decide`]: conform_harness::golden::review::Review::decide
pub fn interactive(
    pending: &[Pending],
    input: &mut impl BufRead,
    out: &mut impl Write,
    mut decide: impl FnMut(&str, Decision) -> Result<(), GoldenError>,
) -> Result<Tally, ReviewError> {
    let n = pending.len();
    let mut tally = Tally::default();
    let mut all: Option<Decision> = None;
    for (i, p) in pending.iter().enumerate() {
        let decision = match all {
            Some(d) => d,
            None => {
                writeln!(out, "[{}/{n}] {p}", i + 1)?;
                match ask(input, out)? {
                    Answer::One(d) => d,
                    Answer::All(d) => {
                        all = Some(d);
                        d
                    }
                    Answer::Quit => break,
                }
            }
        };
        decide(&p.id, decision)?;
        match decision {
            Decision::Accept => tally.accepted.push(p.id.clone()),
            Decision::Reject => tally.rejected.push(p.id.clone()),
            Decision::Skip => tally.skipped.push(p.id.clone()),
        }
    }
    Ok(tally)
}

/// One answer: the prompt, then lines until one is an answer (the end of the input quits).
fn ask(input: &mut impl BufRead, out: &mut impl Write) -> Result<Answer, ReviewError> {
    loop {
        write!(out, "{PROMPT}")?;
        out.flush()?;
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            writeln!(out)?;
            return Ok(Answer::Quit);
        }
        match Answer::parse(line.trim()) {
            Some(a) => return Ok(a),
            None => writeln!(
                out,
                "  `{}` is not an answer: type a, r, s, A, R or q and press Enter",
                line.trim()
            )?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conform_harness::golden::bless::BlessChange;

    fn pending() -> Vec<Pending> {
        ["s/x1", "s/x2", "s/x3"]
            .iter()
            .map(|id| Pending {
                id: id.to_string(),
                change: BlessChange::Changed(vec!["out.y: new or changed digest".into()]),
            })
            .collect()
    }

    /// The tally, what was printed and the decisions carried out, in order.
    fn run(script: &str) -> (Tally, String, Vec<(String, Decision)>) {
        let mut out = Vec::new();
        let mut done = Vec::new();
        let tally = interactive(
            &pending(),
            &mut std::io::Cursor::new(script.as_bytes()),
            &mut out,
            |id, d| {
                done.push((id.to_string(), d));
                Ok(())
            },
        )
        .unwrap();
        (tally, String::from_utf8(out).unwrap(), done)
    }

    #[test]
    fn accept_reject_and_skip_each_act_on_their_case_only() {
        let (tally, out, done) = run("a\nr\ns\n");
        assert_eq!(tally.accepted, ["s/x1"]);
        assert_eq!(tally.rejected, ["s/x2"]);
        assert_eq!(tally.skipped, ["s/x3"]);
        assert_eq!(
            done,
            [
                ("s/x1".to_string(), Decision::Accept),
                ("s/x2".to_string(), Decision::Reject),
                ("s/x3".to_string(), Decision::Skip)
            ]
        );
        assert!(
            out.contains("[1/3] changed    s/x1: out.y: new or changed digest"),
            "{out}"
        );
        assert!(out.contains("[3/3]"), "{out}");
        assert_eq!(out.matches(PROMPT).count(), 3, "{out}");
    }

    #[test]
    fn capital_a_and_r_decide_every_remaining_case_without_asking() {
        let (tally, out, done) = run("s\nA\n");
        assert_eq!(tally.skipped, ["s/x1"]);
        assert_eq!(tally.accepted, ["s/x2", "s/x3"]);
        assert_eq!(done.len(), 3);
        assert!(!out.contains("[3/3]"), "A asks no more: {out}");
        let (tally, out, _) = run("R\n");
        assert_eq!(tally.rejected, ["s/x1", "s/x2", "s/x3"]);
        assert_eq!(out.matches(PROMPT).count(), 1, "{out}");
    }

    #[test]
    fn q_and_the_end_of_input_leave_the_rest_pending_and_unknown_keys_ask_again() {
        let (tally, out, done) = run("x\nq\n");
        assert_eq!(tally, Tally::default());
        assert!(done.is_empty());
        assert!(out.contains("`x` is not an answer"), "{out}");
        assert_eq!(out.matches(PROMPT).count(), 2, "{out}");
        let (tally, _, done) = run("a\n");
        assert_eq!(tally.accepted, ["s/x1"]);
        assert_eq!(done.len(), 1, "the end of the input quits");
    }

    #[test]
    fn a_decision_that_fails_stops_the_review_with_its_error() {
        let mut out = Vec::new();
        let e = interactive(
            &pending(),
            &mut std::io::Cursor::new(b"a\na\n".as_slice()),
            &mut out,
            |id, _| {
                Err(GoldenError::Io {
                    path: id.into(),
                    source: std::io::Error::other("disk full"),
                })
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("disk full"), "{e}");
        assert!(!String::from_utf8(out).unwrap().contains("[2/3]"));
    }
}
