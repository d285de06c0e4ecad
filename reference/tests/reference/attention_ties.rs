//! The `rounding_ties` regime pins the rounding knobs of every attention recipe with a margin:
//! on every seed, the recipe's outputs and the outputs of the same recipe with its P cast or
//! its output cast breaking ties the other way (the catalogue's faults) differ in at least 8
//! output elements. Measured here by running the reference both ways, independently of the
//! construction's own bookkeeping.

use conform_reference::faults::{self, FaultRun};
use conform_reference::ops::{self, GenContext, OpError, Regime, TensorMap, ValueDist};
use conform_reference::parallel::Threads;
use conform_reference::splitmix::SplitMix64;
use serde_json::{json, Value};

const SEEDS: u64 = 12;
const MARGIN: usize = 8;
const P: &str = "attn-p-rounding-swapped";
const O: &str = "attn-output-rounding-swapped";
const C: &str = "pa-v2-combine-swapped";

fn generate(op: &str, params: &Value, recipe: &str, seed: u64) -> Result<TensorMap, OpError> {
    let mut g = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x71E5);
    let mut bits = move || g.next_u64();
    let mut ctx = GenContext::new(
        &mut bits,
        ValueDist::Normal {
            mean: 0.0,
            std: 1.0,
        },
    )
    .with_recipe(recipe);
    ops::find(op)?.generate_with_regimes(params, &[Regime::RoundingTies], &mut ctx)
}

/// Output elements whose bits differ between the recipe and the recipe under `fault`
/// (`None`: the fault does not apply to this recipe).
fn margin(
    op: &str,
    params: &Value,
    recipe: &str,
    fault: &str,
    inputs: &TensorMap,
) -> Option<usize> {
    let family = ops::find(op).unwrap();
    let base = family.run(params, recipe, inputs, Threads::ONE).unwrap();
    let f = faults::find(fault).unwrap();
    match faults::run(f, family, params, recipe, inputs, Threads::ONE).unwrap() {
        FaultRun::NotApplicable(_) => None,
        FaultRun::Outputs(o) => {
            let (a, b) = (&base["attention_out"], &o["attention_out"]);
            let es = a.dtype.size_bytes();
            Some(
                a.data
                    .chunks(es)
                    .zip(b.data.chunks(es))
                    .filter(|(x, y)| x != y)
                    .count(),
            )
        }
    }
}

struct Case {
    op: &'static str,
    params: Value,
    recipe: &'static str,
    /// Faults whose margin must hold (the rounding points the recipe has).
    pinned: &'static [&'static str],
}

fn cases() -> Vec<Case> {
    let fa = |dtype: &str, mode: i64, kv: usize| json!({ "dtype": dtype, "batch": 1, "q_seq": 16, "kv_seq": kv, "num_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "sparse_mode": mode });
    let pa = |dtype: &str, ctx: [i64; 2]| json!({ "dtype": dtype, "batch": 2, "num_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "block_size": 16, "actual_seq_lengths_kv": ctx, "vector_cores": crate::attention_common::VECTOR_CORES });
    vec![
        Case {
            op: "fa_prefill",
            params: fa("bf16", 0, 200),
            recipe: "ascend_pfa_bf16",
            pinned: &[P, O],
        },
        Case {
            op: "fa_prefill",
            params: fa("f16", 3, 200),
            recipe: "ascend_pfa_bf16",
            pinned: &[P, O],
        },
        Case {
            op: "fa_prefill",
            params: fa("bf16", 3, 40),
            recipe: "fa2_cuda",
            pinned: &[P, O],
        },
        Case {
            op: "pa_decode",
            params: pa("bf16", [37, 150]),
            recipe: "ascend_ifa_bf16",
            pinned: &[P, O],
        },
        Case {
            op: "pa_decode",
            params: pa("f16", [64, 21]),
            recipe: "ascend_ifa_bf16",
            pinned: &[P, O],
        },
        Case {
            op: "pa_decode",
            params: pa("bf16", [40, 77]),
            recipe: "vllm_pa_v1",
            pinned: &[P, O],
        },
        Case {
            op: "pa_decode",
            params: pa("f16", [40, 77]),
            recipe: "vllm_pa_v1",
            pinned: &[P, O],
        },
        Case {
            op: "pa_decode",
            params: pa("bf16", [600, 33]),
            recipe: "vllm_pa_v2",
            pinned: &[P, C],
        },
        Case {
            op: "pa_decode",
            params: json!({ "dtype": "bf16", "batch": 1, "num_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "block_size": 16, "actual_seq_lengths_kv": [1100] }),
            recipe: "vllm_pa_v2",
            pinned: &[P, C],
        },
    ]
}

#[test]
fn every_recipe_rounding_point_differs_in_8_or_more_elements_on_every_seed() {
    for c in cases() {
        for seed in 0..SEEDS {
            let inputs = generate(c.op, &c.params, c.recipe, seed)
                .unwrap_or_else(|e| panic!("{} {} seed {seed}: {e}", c.op, c.recipe));
            for fault in c.pinned {
                let m = margin(c.op, &c.params, c.recipe, fault, &inputs)
                    .unwrap_or_else(|| panic!("{fault} does not apply to {}", c.recipe));
                assert!(
                    m >= MARGIN,
                    "{} {} {:?} seed {seed}: {fault} changes {m} output elements (< {MARGIN})",
                    c.op,
                    c.recipe,
                    c.params
                );
            }
        }
    }
}

#[test]
fn without_the_regime_the_ties_are_rare() {
    // The same shapes without the regime: the output-rounding swap changes almost nothing,
    // which is why the regime exists (this guards the test above against measuring a fault
    // that differs everywhere anyway).
    let c = &cases()[0];
    let mut total = 0;
    for seed in 0..SEEDS {
        let mut g = SplitMix64::new(seed ^ 0xABCD);
        let mut bits = move || g.next_u64();
        let mut ctx = GenContext::new(
            &mut bits,
            ValueDist::Normal {
                mean: 0.0,
                std: 1.0,
            },
        );
        let inputs = ops::find(c.op)
            .unwrap()
            .generate_with_regimes(&c.params, &[], &mut ctx)
            .unwrap();
        total += margin(
            c.op,
            &c.params,
            c.recipe,
            "attn-output-rounding-swapped",
            &inputs,
        )
        .unwrap();
    }
    assert!(
        total < SEEDS as usize * MARGIN / 4,
        "{total} differing elements without the regime"
    );
}

#[test]
fn a_recipe_without_a_cast_to_tie_or_no_recipe_is_an_error_naming_the_regime() {
    let params = json!({ "dtype": "bf16", "batch": 1, "q_seq": 4, "kv_seq": 16, "num_heads": 2, "num_key_value_heads": 2, "head_dim": 16 });
    let mut g = SplitMix64::new(1);
    let mut bits = move || g.next_u64();
    let mut ctx = GenContext::new(
        &mut bits,
        ValueDist::Normal {
            mean: 0.0,
            std: 1.0,
        },
    );
    let e = ops::find("fa_prefill")
        .unwrap()
        .generate_with_regimes(&params, &[Regime::RoundingTies], &mut ctx)
        .unwrap_err()
        .to_string();
    assert!(e.contains("rounding_ties") && e.contains("recipe"), "{e}");
    let f32p = json!({ "dtype": "f32", "batch": 1, "q_seq": 4, "kv_seq": 16, "num_heads": 2, "num_key_value_heads": 2, "head_dim": 16 });
    let e = generate("fa_prefill", &f32p, "exact_f32", 1)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rounding_ties") && e.contains("exact_f32"),
        "{e}"
    );
    // The f16 high-performance kernel's only tie-able cast is its row sum's: a row must see 17
    // keys of a 32-key block.
    let f16p = json!({ "dtype": "f16", "batch": 1, "q_seq": 4, "kv_seq": 12, "num_heads": 2, "num_key_value_heads": 2, "head_dim": 16 });
    let e = generate("fa_prefill", &f16p, "ascend_pfa_f16_high_perf", 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("row sum") && e.contains("17 keys"), "{e}");
    let e = ops::find("fa_prefill")
        .unwrap()
        .check_regimes(&params, &[Regime::RoundingTies, Regime::LargeLogits])
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot be combined"), "{e}");
}

#[test]
fn the_f16_high_performance_row_sum_cast_differs_in_8_or_more_elements_on_every_seed() {
    let params = json!({ "dtype": "f16", "batch": 2, "q_seq": 8, "kv_seq": 160, "num_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "sparse_mode": 3 });
    for seed in 0..SEEDS {
        let inputs = generate("fa_prefill", &params, "ascend_pfa_f16_high_perf", seed)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let m = margin(
            "fa_prefill",
            &params,
            "ascend_pfa_f16_high_perf",
            "attn-f16-rowsum-rounding-swapped",
            &inputs,
        )
        .expect("applies to the f16 high-performance recipe");
        assert!(m >= MARGIN, "seed {seed}: {m} output elements differ");
    }
}
