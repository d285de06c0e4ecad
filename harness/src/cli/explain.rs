//! `conform explain <case>`: parameters, tensor shapes, recipe, checks and golden file.

use super::paths::Paths;
use crate::exit_code;
use crate::golden::compute::definition_digest;
use crate::messages;
use crate::suite::select::load_all;
use clap::Args;
use conform_reference::ops;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The case id (as `conform list` prints it).
    pub case: String,
}

pub fn run(paths: &Paths, args: ExplainArgs) -> anyhow::Result<i32> {
    let cases = match load_all(&paths.suites) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{}", messages::error_line(&e));
            return Ok(exit_code::USAGE);
        }
    };
    let Some(case) = cases.iter().find(|c| c.id == args.case) else {
        eprintln!(
            "{}",
            messages::error_line(&messages::unknown_case(&args.case))
        );
        return Ok(exit_code::USAGE);
    };
    let family = ops::find(&case.op)?;
    let desc = family.describe(&case.params)?;
    println!(
        "{}",
        messages::explain(case, &desc, &paths.golden, &definition_digest(case))
    );
    Ok(exit_code::SUCCESS)
}
