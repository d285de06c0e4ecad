//! Every user-facing string of the CLI, one file per subcommand.

pub mod report;
