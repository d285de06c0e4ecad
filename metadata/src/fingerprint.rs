//! The fingerprint of a target: for each knob of conform's model of a kernel, which of the
//! knob's values the target's output bits match, with evidence, as `conform fingerprint --json`
//! writes it (format `conform-fingerprint-v1`, described in docs/fingerprint.md; JSON Schema
//! docs/schemas/fingerprint.schema.json).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The format tag of the JSON document.
pub const FORMAT: &str = "conform-fingerprint-v1";

/// How NaN outputs compare, in words (the document repeats it so no reader has to guess).
pub const NAN_RULE: &str = "bits are compared exactly, except that any NaN equals any NaN (the NaN payload and sign are not compared)";

/// A fingerprint of one target over a selection of cases.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Fingerprint {
    /// [`FORMAT`].
    pub format: String,
    pub target: String,
    /// The selection, in words (`--suite quant_matmul`, `--op fa_prefill`).
    pub selection: String,
    /// The input seed of the knob-by-knob pass (every case draws its inputs from it).
    pub seed: u64,
    /// The NaN rule ([`NAN_RULE`]).
    pub nan_rule: String,
    /// Every selected case and what became of it.
    pub cases: Vec<CaseNote>,
    /// One per knob some fingerprinted case has an alternative for, sorted by id.
    pub knobs: Vec<KnobFingerprint>,
    /// Recipe faults of the catalogue for the selected ops that change no knob, with why.
    pub unmapped_faults: Vec<UnmappedFault>,
    /// The combination the knobs were found at, re-checked on fresh inputs.
    pub recheck: Recheck,
}

/// One selected case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CaseNote {
    pub case: String,
    pub op: String,
    /// The case's recipe (what the knobs' claimed values are).
    pub recipe: String,
    /// Whether the target declares the case's recipe (so it was asked to compute it); when
    /// not, the target ran its own arithmetic and the knobs say how far that is from the model.
    pub target_declares_recipe: bool,
    #[serde(flatten)]
    pub outcome: CaseOutcome,
}

/// Whether a case was fingerprinted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CaseOutcome {
    /// The target ran it; `preset` is the preset its knobs belong to.
    Fingerprinted { preset: String, alternatives: usize },
    /// Not fingerprinted, and why (the target does not support it, its recipe models no
    /// kernel, the target failed on it).
    Skipped { reason: String },
}

/// One candidate value of a knob.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Candidate {
    pub value: String,
    /// Whether it is the case recipe's own value.
    pub claimed: bool,
    /// Where the alternative comes from: `flip` (the knob-flip table) and/or `fault:<name>`.
    pub sources: Vec<String>,
    /// Witness elements (elements where some value of the knob changes the bits) on which the
    /// target's bits equal this value's.
    pub agreeing: u64,
    /// Witness elements this value's bits are known on (every witness for the claimed value;
    /// for an alternative, those of the cases it applies to).
    pub of: u64,
    /// The largest distance, in units in the last place of the output's type (integers: the
    /// difference), between the target and this value over the witness elements; absent when a
    /// witness is NaN on one side only.
    pub max_ulp: Option<u64>,
}

/// One witness element.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Witness {
    pub case: String,
    pub output: String,
    /// Flat (row-major) element index.
    pub element: u64,
    /// The target's bits, hexadecimal.
    pub target: String,
    /// Each candidate's bits, in the order of [`KnobFingerprint::candidates`].
    pub candidates: Vec<String>,
}

/// What a knob's bits match.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum KnobVerdict {
    /// The target's bits equal this value's on every witness element.
    Matches {
        value: String,
        claimed: bool,
        /// Other values whose bits are the same as this one's on every witness element.
        indistinguishable_from: Vec<String>,
        /// Set when the match holds only with another knob at the value found for it (the
        /// target deviates there, and that deviation moves this knob's witnesses too).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        given: Option<String>,
    },
    /// No value's bits equal the target's on every witness element.
    MatchesNone {
        /// The candidate agreeing on the most witness elements.
        closest: String,
        agreeing: u64,
        of: u64,
        max_ulp: Option<u64>,
    },
    /// No case has an element whose bits a value of this knob changes.
    NotDiscriminated,
}

/// The fingerprint of one knob.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KnobFingerprint {
    /// The ledger id (docs/ascend.md).
    pub knob: String,
    pub claimed: String,
    /// The ledger row's status, when it has one.
    pub ledger_status: Option<String>,
    pub verdict: KnobVerdict,
    /// Elements (summed over cases) where some value of the knob changes the bits.
    pub witness_elements: u64,
    /// The cases holding them.
    pub cases: Vec<String>,
    /// The claimed value first.
    pub candidates: Vec<Candidate>,
    /// A few witness elements (the first of each case, up to a handful).
    pub witnesses: Vec<Witness>,
}

/// A recipe fault that maps to no knob.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UnmappedFault {
    pub fault: String,
    pub reason: String,
}

/// The found combination, re-checked on fresh inputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Recheck {
    pub seed: u64,
    /// The non-claimed values applied (`knob = value`); empty: the claimed recipe.
    pub combination: Vec<String>,
    #[serde(flatten)]
    pub outcome: RecheckOutcome,
}

/// Whether the found combination reproduces the target's bits on fresh inputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RecheckOutcome {
    /// Every element of every re-checked case equal.
    Reproduced { cases: usize, elements: u64 },
    /// Some case's bits still differ: the first such case, how many of its elements, and one.
    Differs {
        case: String,
        output: String,
        differing: u64,
        of: u64,
        element: u64,
        target: String,
        expected: String,
    },
    /// The combination could not be re-checked, and why.
    NotRun { reason: String },
}
