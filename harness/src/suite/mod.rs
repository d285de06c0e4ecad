//! Suites: TOML files under `suites/`, one per op family, expanded into cases.

pub mod case;
pub mod checks;
#[cfg(test)]
mod checks_at_load;
pub mod error;
pub mod load;
pub mod recipe_hardware;
pub mod schema;
pub mod select;
pub mod values;

pub use case::Case;
pub use error::SuiteError;
pub use schema::{Tier, TierChoice};
