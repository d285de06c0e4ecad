//! docs/perf.md says what the same-night control does, in the figures the code uses: its
//! rounds and its samples a side (the nightly report once showed 24 control samples a side
//! where docs/perf.md said 30). The sentence is
//! `**R rounds** of **S samples a side** (T a side in all)` in the section "The same-night
//! control"; this test reads it and holds it to `conform_harness::runner::ab` and the suites'
//! default iterations.

use crate::repo::repo;
use conform_harness::runner::ab::{samples_per_round, DEFAULT_ROUNDS};
use conform_harness::suite::schema::PerfSettings;

#[test]
fn docs_give_the_controls_rounds_and_samples_the_code_uses() {
    let text = std::fs::read_to_string(repo().join("docs/perf.md")).unwrap();
    let re = regex::Regex::new(
        r"\*\*(\d+) rounds\*\* of \*\*(\d+) samples a side\*\* \((\d+) a side in all\)",
    )
    .unwrap();
    let found: Vec<(u32, u32, u32)> = re
        .captures_iter(&text)
        .map(|c| {
            (
                c[1].parse().unwrap(),
                c[2].parse().unwrap(),
                c[3].parse().unwrap(),
            )
        })
        .collect();
    assert!(
        !found.is_empty(),
        "docs/perf.md does not state the control's rounds and samples as \
         `**R rounds** of **S samples a side** (T a side in all)`"
    );
    let per_round = samples_per_round(PerfSettings::default().iterations, DEFAULT_ROUNDS);
    for (rounds, samples, total) in found {
        assert_eq!(
            (rounds, samples, total),
            (DEFAULT_ROUNDS, per_round, DEFAULT_ROUNDS * per_round),
            "docs/perf.md states the control differently from the code"
        );
    }
}
