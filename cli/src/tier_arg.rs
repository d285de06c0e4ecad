//! `--tier quick|full|all` as an argument: the library's [`TierChoice`] is plain data; this is
//! its command-line spelling.

use conform_harness::suite::TierChoice;

/// The tiers a command selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TierArg {
    Quick,
    Full,
    All,
}

impl From<TierArg> for TierChoice {
    fn from(t: TierArg) -> TierChoice {
        match t {
            TierArg::Quick => TierChoice::Quick,
            TierArg::Full => TierChoice::Full,
            TierArg::All => TierChoice::All,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn each_spelling_is_the_library_tier_of_that_name() {
        for arg in TierArg::value_variants() {
            let spelled = arg.to_possible_value().unwrap();
            assert_eq!(spelled.get_name(), TierChoice::from(*arg).name());
        }
        assert_eq!(TierArg::value_variants().len(), 3);
    }
}
