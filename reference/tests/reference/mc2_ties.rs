//! The `rounding_ties` regime of MatmulAllReduce pins the output tie rule with a margin: on
//! every seed, every kernel recipe and the ties-away fault differ in at least 8 output
//! elements, measured by running the reference both ways.

use conform_reference::faults::{self, FaultRun};
use conform_reference::ops::{self, GenContext, Regime, ValueDist};
use conform_reference::parallel::Threads;
use conform_reference::splitmix::SplitMix64;
use serde_json::json;

const OP: &str = "mc2_matmul_allreduce";

#[test]
fn the_output_tie_rule_differs_in_8_or_more_elements_on_every_seed() {
    let family = ops::find(OP).unwrap();
    let fault = faults::find("mc2-output-rounding-ties-swapped").unwrap();
    let shapes = [
        json!({ "dtype": "f16", "ranks": 8, "m": 20, "k": 64, "n": 32, "bias": true }),
        json!({ "dtype": "bf16", "ranks": 4, "m": 16, "k": 32, "n": 64, "bias": true, "x3": true }),
        json!({ "dtype": "f16", "ranks": 1, "m": 4, "k": 8, "n": 8, "bias": true, "x3": true }),
        json!({ "dtype": "bf16", "ranks": 2, "m": 3, "k": 2, "n": 8 }),
    ];
    for params in &shapes {
        for recipe in [
            "kernel_rank_order",
            "kernel_ring",
            "kernel_binary_tree",
            "high_precision_golden",
        ] {
            for seed in 0..12u64 {
                let mut g = SplitMix64::new(seed ^ 0xC2);
                let mut bits = move || g.next_u64();
                let mut ctx = GenContext::new(
                    &mut bits,
                    ValueDist::Normal {
                        mean: 0.0,
                        std: 1.0,
                    },
                );
                let inputs = family
                    .generate_with_regimes(params, &[Regime::RoundingTies], &mut ctx)
                    .unwrap_or_else(|e| panic!("{params} seed {seed}: {e}"));
                let base = family.run(params, recipe, &inputs, Threads::ONE).unwrap();
                let FaultRun::Outputs(o) =
                    faults::run(fault, family, params, recipe, &inputs, Threads::ONE).unwrap()
                else {
                    panic!("{recipe}: not applicable");
                };
                let (a, b) = (&base["out"], &o["out"]);
                let differ = a
                    .data
                    .chunks(2)
                    .zip(b.data.chunks(2))
                    .filter(|(x, y)| x != y)
                    .count();
                assert!(
                    differ >= 8,
                    "{params} {recipe} seed {seed}: {differ} elements differ"
                );
            }
        }
    }
}

#[test]
fn a_shape_too_small_for_8_ties_is_an_error_naming_the_regime() {
    let family = ops::find(OP).unwrap();
    for params in [
        json!({ "dtype": "f16", "ranks": 2, "m": 1, "k": 8, "n": 4 }),
        json!({ "dtype": "f16", "ranks": 2, "m": 4, "k": 1, "n": 8 }),
        json!({ "dtype": "f16", "ranks": 2, "m": 4, "k": 2, "n": 4 }),
    ] {
        let e = family
            .check_regimes(&params, &[Regime::RoundingTies])
            .unwrap_err()
            .to_string();
        assert!(e.contains("rounding_ties"), "{e}");
    }
    let e = family
        .check_regimes(
            &json!({ "dtype": "f16", "ranks": 2, "m": 4, "k": 8, "n": 8 }),
            &[Regime::LargeLogits],
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("large_logits") && e.contains("does not apply"),
        "{e}"
    );
}
