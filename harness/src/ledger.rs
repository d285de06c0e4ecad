//! The fidelity ledger (`docs/ascend.md`), compiled into the binary: one row per claim conform
//! makes about a CANN kernel, with its source and a status. `conform explain` and the HTML
//! report read it to say, for a case judged against a recipe that models a CANN kernel, which
//! of the knobs its verdict rests on are only assumed.
//!
//! The file is the one source of truth: `include_str!` takes it at build time, so the binary
//! needs neither the repository's docs folder nor anything else at run time. The knobs come from
//! the code ([`conform_reference::fidelity`] and [`CANN_STANDARD_CLAIMS`]); a test keeps every
//! knob and every row in step.

use crate::verdict::CANN_STANDARD_CLAIMS;
use conform_reference::fidelity::{self, Knob};
use conform_reference::formats::DType;
use conform_reference::variant::Dispatch;
use std::sync::OnceLock;

/// The ledger's text, as committed.
pub const LEDGER_TEXT: &str = include_str!("../../docs/ascend.md");

/// Where the ledger lives in the repository (for messages).
pub const LEDGER_PATH: &str = "docs/ascend.md";

/// The header of a ledger table (other tables in the file are not ledger rows).
const HEADER: &str = "| id | claim | source | status |";

/// A row's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// A public source (CANN documentation or kernel source) says what the knob says.
    Confirmed,
    /// A public source said otherwise; the code now follows the source.
    ContradictedFixed,
    /// A public source says otherwise and the code does not follow it yet.
    ContradictedNotFixed,
    /// No public source says it: the verdict rests on conform's assumption.
    Assumed,
}

impl Status {
    /// Every status, in the ledger's spelling order.
    pub const ALL: [Status; 4] = [
        Status::Confirmed,
        Status::ContradictedFixed,
        Status::ContradictedNotFixed,
        Status::Assumed,
    ];

    /// The ledger's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Status::Confirmed => "confirmed",
            Status::ContradictedFixed => "contradicted (fixed)",
            Status::ContradictedNotFixed => "contradicted (not fixed)",
            Status::Assumed => "assumed",
        }
    }

    /// Parses the ledger's spelling.
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.name() == s)
    }

    /// Whether a verdict resting on this knob rests on something no public source backs.
    pub fn is_weak(self) -> bool {
        matches!(self, Status::Assumed | Status::ContradictedNotFixed)
    }
}

/// One ledger row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The knob's dotted id (without the backticks).
    pub id: String,
    pub claim: String,
    pub source: String,
    pub status: Status,
    /// 1-based line in the file.
    pub line: usize,
}

/// Id prefixes of the rows about the torch_npu worker (`npu.`) and its Atlas CI setup (`ci.`):
/// claims about how conform calls a CANN kernel, not knobs of a reference recipe. They share
/// the ledger's format and statuses; the worker's and the setup script's own tests (the CPU
/// stand-in, the CANN-detection fixtures) keep them honest.
pub const WORKER_CLAIM_PREFIXES: [&str; 2] = ["npu.", "ci."];

impl Row {
    /// Whether the row is a claim of the torch_npu worker or its CI setup rather than a knob.
    pub fn is_worker_claim(&self) -> bool {
        WORKER_CLAIM_PREFIXES.iter().any(|p| self.id.starts_with(p))
    }
}

/// A malformed ledger.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    #[error("{LEDGER_PATH} line {line}: {message}")]
    BadRow { line: usize, message: String },
    #[error("{LEDGER_PATH} line {line}: `{id}` already has a row (line {first})")]
    DuplicateId {
        id: String,
        line: usize,
        first: usize,
    },
}

/// The rows of every ledger table in `text` (tables headed [`HEADER`]).
pub fn parse(text: &str) -> Result<Vec<Row>, LedgerError> {
    let mut rows: Vec<Row> = Vec::new();
    let mut in_table = false;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if !l.starts_with('|') {
            in_table = false;
            continue;
        }
        if l == HEADER {
            in_table = true;
            continue;
        }
        if !in_table || l.starts_with("|--") || l.starts_with("| --") {
            continue;
        }
        let bad = |message: String| LedgerError::BadRow { line, message };
        let inner = l
            .strip_prefix('|')
            .and_then(|r| r.strip_suffix('|'))
            .ok_or_else(|| bad("a row starts and ends with `|`".into()))?;
        let cells: Vec<&str> = inner.split('|').map(str::trim).collect();
        let [id, claim, source, status] = cells[..] else {
            return Err(bad(format!(
                "{} cells; a row has 4 (id, claim, source, status)",
                cells.len()
            )));
        };
        let id = id
            .strip_prefix('`')
            .and_then(|r| r.strip_suffix('`'))
            .filter(|r| is_dotted_id(r))
            .ok_or_else(|| bad(format!("id `{id}` is not a backticked dotted identifier")))?;
        let status = Status::parse(status).ok_or_else(|| {
            bad(format!(
                "status `{status}` is none of {}",
                Status::ALL.map(Status::name).join(", ")
            ))
        })?;
        if claim.is_empty() || source.is_empty() {
            return Err(bad("empty claim or source".into()));
        }
        if let Some(first) = rows.iter().find(|r| r.id == id) {
            return Err(LedgerError::DuplicateId {
                id: id.to_string(),
                line,
                first: first.line,
            });
        }
        rows.push(Row {
            id: id.to_string(),
            claim: claim.to_string(),
            source: source.to_string(),
            status,
            line,
        });
    }
    Ok(rows)
}

fn is_dotted_id(s: &str) -> bool {
    s.split('.').count() >= 2
        && s.split('.').all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
}

/// The compiled-in ledger, parsed once.
pub fn ledger() -> Result<&'static [Row], &'static LedgerError> {
    static LEDGER: OnceLock<Result<Vec<Row>, LedgerError>> = OnceLock::new();
    LEDGER
        .get_or_init(|| parse(LEDGER_TEXT))
        .as_ref()
        .map(Vec::as_slice)
}

/// Every knob id the code defines: the reference's (presets and fixed claims) and the CANN
/// precision standards the verdict policies use.
pub fn knob_ids() -> Vec<String> {
    let mut ids = fidelity::knob_ids();
    ids.extend(CANN_STANDARD_CLAIMS.iter().map(|(id, _)| id.to_string()));
    ids
}

/// One knob of a case, with its ledger row (None when the ledger has no row for it, which the
/// ledger test forbids).
#[derive(Clone, Debug)]
pub struct CaseKnob {
    pub knob: Knob,
    pub row: Option<&'static Row>,
}

impl CaseKnob {
    /// The row's status, or None when the knob has no row.
    pub fn status(&self) -> Option<Status> {
        self.row.map(|r| r.status)
    }
}

/// What a case judged against a recipe that models a CANN kernel rests on: the kernel variant
/// its shape lands on (where the op's dispatch is modelled) and its knobs with their rows.
#[derive(Clone, Debug)]
pub struct CaseModel {
    pub dispatch: Option<Dispatch>,
    /// The preset its bits are computed with.
    pub preset: String,
    pub knobs: Vec<CaseKnob>,
}

fn with_rows(knobs: Vec<Knob>) -> Vec<CaseKnob> {
    let rows = ledger().unwrap_or(&[]);
    knobs
        .into_iter()
        .map(|knob| CaseKnob {
            row: rows.iter().find(|r| r.id == knob.id),
            knob,
        })
        .collect()
}

/// The model a case of `op` with `params` judged against `recipe` rests on; `None` when the
/// recipe does not model a CANN kernel.
pub fn case_model(op: &str, recipe: &str, params: &serde_json::Value) -> Option<CaseModel> {
    let m = fidelity::ascend_model(op, recipe, params)?;
    Some(CaseModel {
        dispatch: m.dispatch,
        preset: m.preset,
        knobs: with_rows(m.knobs),
    })
}

/// The knobs of `op`'s fixed preset `preset` (values for bf16), each with its ledger row;
/// `None` when the preset does not model a CANN kernel. The report, which has a case's
/// variant but not its parameters, reads knobs this way.
pub fn preset_knobs(op: &str, preset: &str) -> Option<Vec<CaseKnob>> {
    fidelity::preset_knobs(op, preset, DType::Bf16).map(with_rows)
}

/// The knobs a case result rests on: its variant's row and preset's knobs when the result names
/// its variant, else the knobs of the recipe it names (a fixed preset); `None` when neither
/// models a CANN kernel.
pub fn result_knobs(r: &crate::results::CaseResult) -> Option<Vec<CaseKnob>> {
    match r.variant.as_ref().filter(|v| !v.preset.is_empty()) {
        Some(v) => {
            let mut k = preset_knobs(&r.op, &v.preset)?;
            let id = fidelity::variant_knob_id(&r.op, &v.preset);
            let row = ledger().unwrap_or(&[]).iter().find(|row| row.id == id);
            let value = format!("{} (tiling key {}, {})", v.kernel, v.key, v.tiling);
            k.insert(
                0,
                CaseKnob {
                    knob: Knob::new(id, value),
                    row,
                },
            );
            Some(k)
        }
        None => preset_knobs(&r.op, &r.recipe),
    }
}

/// How many knobs have each status (`None`: no row), in [`Status::ALL`] order.
pub fn tally(knobs: &[CaseKnob]) -> Vec<(Option<Status>, usize)> {
    let mut out = Vec::new();
    for st in Status::ALL.map(Some).into_iter().chain([None]) {
        let n = knobs.iter().filter(|k| k.status() == st).count();
        if n > 0 {
            out.push((st, n));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_parse_and_malformed_rows_name_their_line() {
        let text = "# t\n\n| id | claim | source | status |\n|---|---|---|---|\n\
                    | `a.b.c` | x | y | assumed |\n| `a.b.d` | x | y | contradicted (fixed) |\n";
        let rows = parse(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].status, Status::ContradictedFixed);
        assert_eq!(rows[0].line, 5);
        let bad = text.replace("| assumed |", "| guessed |");
        assert!(matches!(
            parse(&bad),
            Err(LedgerError::BadRow { line: 5, .. })
        ));
        let bad = text.replace("`a.b.d`", "`a.b.c`");
        assert!(matches!(
            parse(&bad),
            Err(LedgerError::DuplicateId {
                line: 6,
                first: 5,
                ..
            })
        ));
        let bad = text.replace("`a.b.c`", "a.b.c");
        assert!(parse(&bad).unwrap_err().to_string().contains("line 5"));
        // Other tables are not ledger rows.
        assert!(parse("| n | m |\n|---|---|\n| 1 | 2 |\n")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn the_compiled_in_ledger_parses() {
        assert!(!ledger().expect("docs/ascend.md parses").is_empty());
    }
}
