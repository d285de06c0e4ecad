//! The perf history: every raw sample of every night, per (case, target, hardware), in one
//! SQLite file ([`store`]), the change points of each series, and the gate that compares a new
//! run with the newest segment of its series instead of a hand-kept baseline ([`gate`]).
//! Layout and migrations: [`schema`]. Documented in docs/perf.md.

pub mod backend;
pub mod error;
pub mod gate;
pub mod schema;
pub mod store;

pub use error::HistoryError;
pub use gate::{
    analyse, flagged_runs, gate, judge_night, noise_band, FlaggedRun, HistoryComparison,
    NightJudgement, NoiseBand, SeriesAnalysis,
};
pub use store::{History, Ingested, Night, RunMeta, SeriesKey, SeriesSummary};
