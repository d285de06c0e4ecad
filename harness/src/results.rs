//! The results file: what `conform run` writes (`--json`) and `conform report` reads. Its
//! types are the stable metadata (`conform-metadata`), re-exported here for the runner.

pub use conform_metadata::results::*;
