//! `moe_dispatch_combine`: a hand-computed round trip (placement, receive order, counts and
//! running sums, the weighted sum), shared-expert placement, the same bits for any thread
//! count, the recipe within rounding of the exact oracle, every fault of the family killed by
//! 8 or more elements on every seed of the cases whose regimes are meant to kill it, and bad
//! parameters or inputs refused naming what is wrong.

use crate::op_runs;
use conform_reference::formats::{bf16, Rounding};
use conform_reference::ops::{self, ElemType, OpError, Regime, Tensor, TensorMap, ValueDist};
use conform_reference::parallel::Threads;
use serde_json::{json, Value};

const OP: &str = "moe_dispatch_combine";
const SEEDS: u64 = 30;

fn generate(params: &Value, regimes: &[Regime], seed: u64) -> Result<TensorMap, OpError> {
    op_runs::generate(
        OP,
        params,
        regimes,
        seed,
        0x3E,
        ValueDist::default(),
        "ascend_v2",
    )
}

fn run(params: &Value, recipe: &str, inputs: &TensorMap, threads: usize) -> TensorMap {
    op_runs::run(OP, params, recipe, inputs, threads)
}

fn with_fault(name: &str, params: &Value, inputs: &TensorMap) -> TensorMap {
    op_runs::with_fault(OP, name, params, "ascend_v2", inputs)
}

fn differing(a: &TensorMap, b: &TensorMap) -> usize {
    a.iter()
        .map(|(name, x)| op_runs::differing(x, &b[name]))
        .sum()
}

fn bf(v: &[f64]) -> Vec<u16> {
    v.iter()
        .map(|&x| bf16::f64_to_bf16(x, Rounding::RNE))
        .collect()
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec()
}

#[test]
fn moe_dispatch_combine_hand_computed_round_trip() {
    // 2 ranks, 4 experts (2 per rank), top-2, every element of token (s, t) the same value.
    let h = 32;
    for (ty, nums) in [(1, vec![2, 2, 2, 2]), (0, vec![2, 4, 2, 4])] {
        let params = json!({"ranks": 2, "bs": 2, "hidden": h, "experts": 4, "top_k": 2,
            "expert_token_nums_type": ty});
        let xv = [1.0, 2.0, 3.0, 4.0]; // s0t0, s0t1, s1t0, s1t1
        let x: Vec<f64> = xv.iter().flat_map(|&v| vec![v; h]).collect();
        let ids = [3, 0, 1, 2, 0, 1, 2, 3];
        let w: [f32; 8] = [0.25, 0.5, 0.5, 0.25, 1.0, 0.125, 0.5, 0.5];
        let gains = [1.0, 2.0, 0.5, 1.0];
        let mut inputs = TensorMap::new();
        inputs.insert(
            "x".into(),
            Tensor::from_bits16(ElemType::Bf16, vec![2, 2, h], &bf(&x)),
        );
        inputs.insert("expert_ids".into(), Tensor::from_i32(vec![2, 2, 2], &ids));
        inputs.insert("expert_scales".into(), Tensor::from_f32(vec![2, 2, 2], &w));
        inputs.insert(
            "expert_gain".into(),
            Tensor::from_bits16(ElemType::Bf16, vec![4], &bf(&gains)),
        );
        for threads in [1, 3] {
            let o = run(&params, "ascend_v2", &inputs, threads);
            // Rank 0 (experts 0, 1): by local expert, then source: e0 <- s0t0, s1t0;
            // e1 <- s0t1, s1t0. Rank 1 (experts 2, 3): e2 <- s0t1, s1t1; e3 <- s0t0, s1t1.
            let rows: Vec<f64> = values(&o["expand_x"]).chunks(h).map(|r| r[0]).collect();
            assert_eq!(rows, vec![1.0, 3.0, 2.0, 3.0, 2.0, 4.0, 1.0, 4.0]);
            assert_eq!(o["expert_token_nums"].to_i64_vec().unwrap(), nums);
            let out: Vec<f64> = values(&o["out"]).chunks(h).map(|r| r[0]).collect();
            assert_eq!(out, vec![0.75, 2.25, 3.75, 3.0]);
            let oracle = run(&params, "oracle", &inputs, threads);
            assert_eq!(values(&oracle["out"]), values(&o["out"]));
        }
    }
}

#[test]
fn moe_dispatch_combine_shared_experts_and_masks() {
    // 4 ranks: ranks 0-1 hold the one shared expert (source s sends to rank s % 2), ranks 2-3
    // the 4 routed experts. Rank 2 has no active token.
    let params = json!({"ranks": 4, "bs": 3, "hidden": 32, "experts": 4, "top_k": 2,
        "shared_experts": 1, "shared_ranks": 2, "active": [3, 1, 0, 2]});
    let inputs = generate(&params, &[], 1).unwrap();
    let o = run(&params, "ascend_v2", &inputs, 2);
    let nums = o["expert_token_nums"].to_i64_vec().unwrap();
    assert_eq!(nums.len(), 2 + 2 * 2);
    assert_eq!(nums[0], 3, "shared rank 0 takes sources 0 and 2");
    assert_eq!(nums[1], 1 + 2, "shared rank 1 takes sources 1 and 3");
    assert_eq!(nums[2..].iter().sum::<i64>(), 6 * 2);
    assert_eq!(o["out"].shape, vec![6, 32]);
    assert_eq!(o["expand_x"].shape, vec![6 * 3, 32]);
    // The shared row enters unweighted: with every weight 0 the output is the shared
    // expert's own (x * its gain, exact).
    let mut zero = inputs.clone();
    zero.insert(
        "expert_scales".into(),
        Tensor::from_f32(vec![4, 3, 2], &[0.0; 24]),
    );
    let o = run(&params, "ascend_v2", &zero, 1);
    let g = values(&inputs["expert_gain"])[0];
    let x = values(&inputs["x"]);
    let out = values(&o["out"]);
    for (i, (s, t)) in [(0, 0), (0, 1), (0, 2), (1, 0), (3, 0), (3, 1)]
        .iter()
        .enumerate()
    {
        for j in 0..32 {
            let want = x[(s * 3 + t) * 32 + j] * g;
            assert_eq!(out[i * 32 + j], want, "token ({s}, {t}) column {j}");
        }
    }
}

fn regime_cases() -> Vec<(Value, Vec<Regime>, Vec<&'static str>)> {
    use Regime::*;
    vec![
        (
            json!({"ranks": 4, "bs": 6, "hidden": 64, "experts": 32, "top_k": 3,
                "expert_token_nums_type": 0, "active": [6, 4, 0, 5]}),
            vec![MoeRoutingEdges, MoeCombineOrder],
            vec![
                "moe-weights-twice",
                "moe-weights-ignored",
                "moe-weights-renormalised",
                "moe-sum-reversed",
                "moe-sum-in-dtype",
                "moe-out-ties-away",
                "moe-rank-map-off-by-one",
                "moe-expand-by-token",
                "moe-empty-block-stops-receive",
                "moe-token-nums-swapped",
            ],
        ),
        (
            json!({"ranks": 4, "bs": 6, "hidden": 64, "experts": 16, "top_k": 3,
                "dtype": "f16"}),
            vec![MoeRoutingEdges, MoeCombineOrder],
            vec!["moe-sum-reversed", "moe-sum-in-dtype", "moe-out-ties-away"],
        ),
        (
            json!({"ranks": 3, "bs": 3, "hidden": 96, "experts": 12, "top_k": 3}),
            vec![MoeCombineOrder, OrderWitnesses],
            vec!["moe-combine-fma", "moe-sum-reversed", "moe-out-ties-away"],
        ),
        (
            json!({"ranks": 5, "bs": 2, "hidden": 32, "experts": 10, "top_k": 2,
                "dtype": "f16"}),
            vec![OrderWitnesses],
            vec!["moe-combine-fma"],
        ),
        (
            json!({"ranks": 5, "bs": 6, "hidden": 64, "experts": 32, "top_k": 3,
                "shared_experts": 1, "shared_ranks": 1, "quant_mode": 2, "smooth": true}),
            vec![MoeRoutingEdges, RoundingTies],
            vec![
                "moe-weights-renormalised",
                "moe-rank-map-off-by-one",
                "moe-scale-of-previous-token",
                "moe-quant-ties-away",
                "moe-token-nums-swapped",
            ],
        ),
    ]
}

#[test]
fn moe_dispatch_combine_faults_killed_on_every_seed() {
    for (params, regimes, kills) in regime_cases() {
        for seed in 0..SEEDS {
            let inputs = generate(&params, &regimes, seed).unwrap();
            let good = run(&params, "ascend_v2", &inputs, 1);
            for name in &kills {
                let bad = with_fault(name, &params, &inputs);
                let n = differing(&good, &bad);
                assert!(
                    n >= 8,
                    "{name} on {params} seed {seed}: {n} elements differ"
                );
            }
        }
    }
}

#[test]
fn moe_dispatch_combine_same_bits_for_any_thread_count_and_near_the_oracle() {
    for (params, regimes, _) in regime_cases() {
        for seed in 0..3 {
            let inputs = generate(&params, &regimes, seed).unwrap();
            let one = run(&params, "ascend_v2", &inputs, 1);
            for t in [2, 7] {
                assert_eq!(
                    one,
                    run(&params, "ascend_v2", &inputs, t),
                    "{params} {t} threads"
                );
            }
            // The recipe's out is within a few dtype ulps of the exact sum (relative to the
            // sum of the magnitudes).
            let oracle = run(&params, "oracle", &inputs, 2);
            let got = values(&one["out"]);
            let want = values(&oracle["out"]);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 2f64.powi(-6) * w.abs().max(1.0),
                    "{params} element {i}: {g} vs exact {w}"
                );
            }
            assert_eq!(
                one["expert_token_nums"].to_i64_vec().unwrap(),
                values(&oracle["expert_token_nums"])
                    .iter()
                    .map(|&v| v as i64)
                    .collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn moe_dispatch_combine_refuses_bad_parameters_and_inputs() {
    let fam = ops::find(OP).unwrap();
    let bad = [
        (
            json!({"ranks": 1, "bs": 2, "hidden": 32, "experts": 2, "top_k": 1}),
            "ranks",
        ),
        (
            json!({"ranks": 2, "bs": 2, "hidden": 33, "experts": 2, "top_k": 1}),
            "hidden",
        ),
        (
            json!({"ranks": 3, "bs": 2, "hidden": 32, "experts": 4, "top_k": 1}),
            "experts",
        ),
        (
            json!({"ranks": 2, "bs": 2, "hidden": 32, "experts": 2, "top_k": 3}),
            "top_k",
        ),
        (
            json!({"ranks": 2, "bs": 2, "hidden": 32, "experts": 2, "top_k": 1, "quant_mode": 1}),
            "quant_mode",
        ),
        (
            json!({"ranks": 2, "bs": 2, "hidden": 32, "experts": 2, "top_k": 1, "smooth": true}),
            "smooth",
        ),
        (
            json!({"ranks": 2, "bs": 2, "hidden": 32, "experts": 2, "top_k": 1, "shared_experts": 1}),
            "shared_experts",
        ),
        (
            json!({"ranks": 2, "bs": 2, "hidden": 32, "experts": 2, "top_k": 1, "active": [3, 1]}),
            "active",
        ),
        (
            json!({"ranks": 2, "bs": 2, "hidden": 32, "experts": 2, "top_k": 1, "colour": 1}),
            "colour",
        ),
    ];
    for (p, word) in bad {
        let e = fam.describe(&p).unwrap_err().to_string();
        assert!(e.contains(word), "{p}: {e}");
    }
    // Two equal ids in one row, and a mask that is not the parameters' prefix.
    let params =
        json!({"ranks": 2, "bs": 2, "hidden": 32, "experts": 4, "top_k": 2, "active": [2, 1]});
    let inputs = generate(&params, &[], 0).unwrap();
    let mut dup = inputs.clone();
    dup.insert(
        "expert_ids".into(),
        Tensor::from_i32(vec![2, 2, 2], &[1, 1, 0, 2, 3, 0, 1, 2]),
    );
    let e = fam
        .run(&params, "ascend_v2", &dup, Threads(1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("expert_ids") && e.contains("twice"), "{e}");
    let mut mask = inputs.clone();
    mask.insert(
        "x_active_mask".into(),
        Tensor::from_u8(vec![2, 2], vec![1, 1, 0, 1]),
    );
    let e = fam
        .run(&params, "ascend_v2", &mask, Threads(1))
        .unwrap_err()
        .to_string();
    assert!(e.contains("x_active_mask") && e.contains("rank 1"), "{e}");
    // A regime the shape cannot hold is named.
    let small = json!({"ranks": 2, "bs": 4, "hidden": 32, "experts": 4, "top_k": 2});
    let e = generate(&small, &[Regime::MoeRoutingEdges], 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("moe_routing_edges"), "{e}");
    let e = generate(&small, &[Regime::MoeCombineOrder], 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("moe_combine_order"), "{e}");
}
