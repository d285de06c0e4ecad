//! The `mc2_add_ties` and `order_witnesses` regimes of MatmulAllReduce: on every seed and every
//! kernel recipe, each fault they are there for (the x3 add's and the all-reduce's tie rule,
//! x3 added before the rank's rounding, each other reduction order) differs from the recipe
//! in at least 8 output elements, measured by running the reference both ways; shapes that
//! cannot hold them are errors naming the regime.

use conform_reference::faults::{self, FaultRun};
use conform_reference::ops::{self, GenContext, Regime, TensorMap, ValueDist};
use conform_reference::parallel::Threads;
use conform_reference::splitmix::SplitMix64;
use serde_json::{json, Value};

const OP: &str = "mc2_matmul_allreduce";
const BOTH: [Regime; 2] = [Regime::Mc2AddTies, Regime::OrderWitnesses];

fn generate(params: &Value, regimes: &[Regime], seed: u64) -> TensorMap {
    let mut g = SplitMix64::new(seed ^ 0x3C2);
    let mut bits = move || g.next_u64();
    let mut ctx = GenContext::new(
        &mut bits,
        ValueDist::Uniform {
            low: -1.0,
            high: 1.0,
        },
    );
    ops::find(OP)
        .unwrap()
        .generate_with_regimes(params, regimes, &mut ctx)
        .unwrap_or_else(|e| panic!("{params} seed {seed}: {e}"))
}

fn differing(fault: &str, params: &Value, recipe: &str, inputs: &TensorMap) -> usize {
    let family = ops::find(OP).unwrap();
    let base = family.run(params, recipe, inputs, Threads::ONE).unwrap();
    let FaultRun::Outputs(o) = faults::run(
        faults::find(fault).unwrap(),
        family,
        params,
        recipe,
        inputs,
        Threads::ONE,
    )
    .unwrap() else {
        panic!("{fault} {recipe}: not applicable");
    };
    base["out"]
        .data
        .chunks(2)
        .zip(o["out"].data.chunks(2))
        .filter(|(x, y)| x != y)
        .count()
}

#[test]
fn every_fault_of_the_regimes_differs_in_8_or_more_elements_on_every_seed() {
    let shapes = [
        json!({ "dtype": "bf16", "ranks": 4, "m": 6, "k": 5, "n": 24, "bias": true, "x3": true }),
        json!({ "dtype": "bf16", "ranks": 8, "m": 9, "k": 7, "n": 40, "x3": true, "tiles": [5, 4] }),
        json!({ "dtype": "f16", "ranks": 8, "m": 5, "k": 6, "n": 17, "bias": true, "x3": true }),
        json!({ "dtype": "f16", "ranks": 4, "m": 7, "k": 9, "n": 33, "x3": true }),
    ];
    let faults = [
        "mc2-x3-add-ties-away",
        "mc2-reduce-ties-away",
        "mc2-x3-before-rounding",
        "mc2-reduce-order-changed",
        "mc2-reduce-order-changed-back",
    ];
    for params in &shapes {
        for seed in 0..16u64 {
            let inputs = generate(params, &BOTH, seed);
            for recipe in ["kernel_rank_order", "kernel_ring", "kernel_binary_tree"] {
                for fault in faults {
                    let n = differing(fault, params, recipe, &inputs);
                    assert!(
                        n >= 8,
                        "{fault} {params} {recipe} seed {seed}: {n} elements differ"
                    );
                }
            }
        }
    }
    // Each regime alone holds its own faults.
    let p = &shapes[0];
    for seed in 0..4u64 {
        let ties = generate(p, &[Regime::Mc2AddTies], seed);
        for fault in ["mc2-x3-add-ties-away", "mc2-reduce-ties-away"] {
            assert!(
                differing(fault, p, "kernel_rank_order", &ties) >= 8,
                "{fault}"
            );
        }
        let order = generate(p, &[Regime::OrderWitnesses], seed);
        for fault in ["mc2-x3-before-rounding", "mc2-reduce-order-changed-back"] {
            assert!(
                differing(fault, p, "kernel_rank_order", &order) >= 8,
                "{fault}"
            );
        }
    }
}

#[test]
fn shapes_that_cannot_hold_the_regimes_are_errors_naming_them() {
    let family = ops::find(OP).unwrap();
    let refused = [
        (
            json!({ "dtype": "f16", "ranks": 4, "m": 6, "k": 8, "n": 16 }),
            Regime::Mc2AddTies,
            "x3",
        ),
        (
            json!({ "dtype": "f16", "ranks": 2, "m": 6, "k": 8, "n": 16, "x3": true }),
            Regime::OrderWitnesses,
            "4 or more ranks",
        ),
        (
            json!({ "dtype": "f16", "ranks": 1, "m": 6, "k": 8, "n": 16, "x3": true }),
            Regime::Mc2AddTies,
            "2 or more ranks",
        ),
        (
            json!({ "dtype": "f16", "ranks": 4, "m": 6, "k": 8, "n": 7, "x3": true }),
            Regime::Mc2AddTies,
            "n >= 8",
        ),
        (
            json!({ "dtype": "f16", "ranks": 4, "m": 1, "k": 8, "n": 16, "x3": true }),
            Regime::Mc2AddTies,
            "m >= 2",
        ),
        (
            json!({ "dtype": "f16", "ranks": 4, "m": 4, "k": 2, "n": 16, "x3": true }),
            Regime::OrderWitnesses,
            "k >= 3",
        ),
    ];
    for (params, regime, says) in refused {
        let e = family
            .check_regimes(&params, &[regime])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(regime.name()) && e.contains(says),
            "{params}: {e}"
        );
    }
    let e = family
        .check_regimes(
            &json!({ "dtype": "f16", "ranks": 4, "m": 8, "k": 8, "n": 16, "x3": true }),
            &[Regime::Mc2AddTies, Regime::RoundingTies],
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mc2_add_ties") && e.contains("rounding_ties"),
        "{e}"
    );
}
