//! The declared numeric regimes of the attention families hold on every seed: the scores and
//! the mask are recomputed here from the generated tensors (keys read through the block table
//! for `pa_decode`), independently of the generator's construction.

use conform_reference::attention::mask::BatchMask;
use conform_reference::attention::Geometry;
use conform_reference::kv::{CacheGeometry, KvCacheLayout};
use conform_reference::ops::{self, GenContext, OpError, Regime, TensorMap, ValueDist};
use conform_reference::splitmix::SplitMix64;
use serde_json::json;

const SEEDS: u64 = 120;
/// The regimes about scores and masks (`rounding_ties` has its own test: attention_ties.rs).
const SCORE_REGIMES: [Regime; 3] = [Regime::LargeLogits, Regime::LateMax, Regime::MaskedRowsLse];

fn generate(
    op: &str,
    params: &serde_json::Value,
    regimes: &[Regime],
    seed: u64,
    dist: ValueDist,
) -> Result<TensorMap, OpError> {
    generate_for(op, params, regimes, seed, dist, None)
}

/// [`generate`] for the cases of a recipe (the regimes placed against its tiles).
fn generate_for(
    op: &str,
    params: &serde_json::Value,
    regimes: &[Regime],
    seed: u64,
    dist: ValueDist,
    recipe: Option<&str>,
) -> Result<TensorMap, OpError> {
    let mut g = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EED);
    let mut bits = move || g.next_u64();
    let mut ctx = GenContext::new(&mut bits, dist);
    ctx.recipe = recipe.map(str::to_string);
    ops::find(op)?.generate_with_regimes(params, regimes, &mut ctx)
}

fn normal() -> ValueDist {
    ValueDist::Normal {
        mean: 0.0,
        std: 1.0,
    }
}

/// Scores of a generated case, recomputed from its tensors.
struct Scores {
    g: Geometry,
    q: Vec<f64>,
    /// Key row (b, j, kv head) as f64.
    key: Box<dyn Fn(usize, usize, usize) -> Vec<f64>>,
    mask: Option<Vec<u8>>,
}

impl Scores {
    fn of(op: &str, params: &serde_json::Value, inputs: &TensorMap) -> Scores {
        let q = inputs["query"].to_f64_vec();
        let mask = inputs.get("atten_mask").map(|t| t.data.clone());
        if op == "fa_prefill" {
            let g = ops::fa_prefill::geometry_of(params).unwrap();
            let k = inputs["key"].to_f64_vec();
            let gk = g.clone();
            let d = g.head_dim;
            Scores {
                key: Box::new(move |b, j, kvh| {
                    let o = gk.kv_offset(b, j, kvh);
                    k[o..o + d].to_vec()
                }),
                g,
                q,
                mask,
            }
        } else {
            let g = ops::pa_decode::geometry_of(params).unwrap();
            let kc = &inputs["key_cache"];
            let layout: KvCacheLayout = serde_json::from_value(
                params
                    .get("cache_layout")
                    .cloned()
                    .unwrap_or(json!("BnBsH")),
            )
            .unwrap();
            let bs = params["block_size"].as_u64().unwrap() as usize;
            let cache = CacheGeometry {
                num_blocks: kc.shape[0],
                block_size: bs,
                kv_heads: g.kv_heads,
                head_dim: g.head_dim,
            };
            let table = inputs["block_table"].to_i64_vec().unwrap();
            let width = inputs["block_table"].shape[1];
            let k = kc.to_f64_vec();
            let d = g.head_dim;
            Scores {
                key: Box::new(move |b, j, kvh| {
                    let blk = table[b * width + j / bs] as usize;
                    let o = layout.offset(&cache, blk, j % bs, kvh, 0);
                    k[o..o + d].to_vec()
                }),
                g,
                q,
                mask,
            }
        }
    }

    fn sees(&self, b: usize, i: usize) -> Vec<usize> {
        let m = BatchMask::new(&self.g, b, self.mask.as_deref());
        (0..self.g.lk[b]).filter(|&j| m.allowed(i, j)).collect()
    }

    fn score(&self, b: usize, i: usize, h: usize, j: usize) -> f64 {
        let d = self.g.head_dim;
        let o = self.g.q_offset(b, i, h);
        let k = (self.key)(b, j, self.g.kv_head(h));
        self.g.scale as f64
            * self.q[o..o + d]
                .iter()
                .zip(&k)
                .map(|(a, c)| a * c)
                .sum::<f64>()
    }

    /// For each (b, h) of a batch with a row whose visible keys pass `rows`: whether some such
    /// row's scores `(score, key)` (in key order) pass `holds`.
    fn per_batch_head(
        &self,
        rows: impl Fn(&[usize]) -> bool,
        holds: impl Fn(&[(f64, usize)]) -> bool,
    ) -> Vec<bool> {
        let g = &self.g;
        let mut v = Vec::new();
        for b in 0..g.batch {
            let rows: Vec<(usize, Vec<usize>)> = (0..g.lq[b])
                .map(|i| (i, self.sees(b, i)))
                .filter(|(_, keys)| rows(keys))
                .collect();
            if rows.is_empty() {
                continue;
            }
            for h in 0..g.heads {
                v.push(rows.iter().any(|(i, keys)| {
                    let sc: Vec<(f64, usize)> =
                        keys.iter().map(|&j| (self.score(b, *i, h, j), j)).collect();
                    holds(&sc)
                }));
            }
        }
        v
    }

    /// For each (b, h) of a batch with a row that sees a key: whether some row has a largest
    /// score above 100.
    fn large_logits(&self) -> Vec<bool> {
        self.per_batch_head(
            |keys| !keys.is_empty(),
            |sc| sc.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max) > 100.0,
        )
    }

    /// For each (b, h) as above: whether some row that also sees a key before 128 has its
    /// maximum at key 128 or later, 4 or more above every other score.
    fn late_max(&self) -> Vec<bool> {
        self.per_batch_head(
            |keys| !keys.is_empty(),
            |sc| {
                let mut s = sc.to_vec();
                s.sort_by(|a, b| b.0.total_cmp(&a.0));
                sc[0].1 < 128 && s[0].1 >= 128 && s.len() > 1 && s[0].0 - s[1].0 >= 4.0
            },
        )
    }

    /// Where the largest score of batch entry 0, head 0 sits (row, key): the seed moves it.
    fn top_position(&self) -> Option<(usize, usize)> {
        (0..self.g.lq[0])
            .flat_map(|i| self.sees(0, i).into_iter().map(move |j| (i, j)))
            .max_by(|a, b| {
                self.score(0, a.0, 0, a.1)
                    .total_cmp(&self.score(0, b.0, 0, b.1))
            })
    }

    fn masked_rows(&self) -> usize {
        let g = &self.g;
        (0..g.batch)
            .map(|b| (0..g.lq[b]).filter(|&i| self.sees(b, i).is_empty()).count())
            .sum()
    }
}

fn fa_params() -> serde_json::Value {
    json!({ "dtype": "bf16", "batch": 2, "q_seq": 16, "kv_seq": 200, "num_heads": 4,
            "num_key_value_heads": 2, "head_dim": 64, "atten_mask": true,
            "softmax_lse_flag": true })
}

fn pa_params() -> serde_json::Value {
    json!({ "dtype": "f16", "batch": 3, "num_heads": 4, "num_key_value_heads": 2,
            "head_dim": 64, "block_size": 16, "actual_seq_lengths_kv": [300, 200, 150],
            "shared_prefix_blocks": 1, "cache_layout": "BnNBsD", "atten_mask": true,
            "softmax_lse_flag": true })
}

fn check_all_seeds(op: &str, params: &serde_json::Value, regimes: &[Regime], dist: ValueDist) {
    let mut positions = std::collections::BTreeSet::new();
    for seed in 0..SEEDS {
        let inputs = generate(op, params, regimes, seed, dist.clone())
            .unwrap_or_else(|e| panic!("{op} seed {seed}: {e}"));
        let s = Scores::of(op, params, &inputs);
        if regimes.contains(&Regime::LargeLogits) {
            let v = s.large_logits();
            assert!(
                !v.is_empty() && v.iter().all(|&x| x),
                "{op} seed {seed}: large_logits {v:?}"
            );
        }
        if regimes.contains(&Regime::LateMax) {
            let v = s.late_max();
            assert!(
                !v.is_empty() && v.iter().all(|&x| x),
                "{op} seed {seed}: late_max {v:?}"
            );
        }
        if regimes.contains(&Regime::MaskedRowsLse) {
            assert!(s.masked_rows() > 0, "{op} seed {seed}: no fully masked row");
            // Wide enough for the adequacy margin floor: 8 LSE elements of masked rows.
            assert!(
                s.masked_rows() * s.g.heads >= 8,
                "{op} seed {seed}: {} masked rows of {} heads",
                s.masked_rows(),
                s.g.heads
            );
            let desc = ops::find(op).unwrap().describe(params).unwrap();
            assert!(desc.outputs.iter().any(|o| o.name == "softmax_lse"));
        }
        // Where the regime sits: the seed moves it.
        positions.insert(s.top_position());
    }
    assert!(
        positions.len() > SEEDS as usize / 4,
        "{op}: the seed hardly moves the regime ({} positions)",
        positions.len()
    );
}

#[test]
fn fa_prefill_regimes_hold_on_every_seed() {
    check_all_seeds("fa_prefill", &fa_params(), &SCORE_REGIMES, normal());
    check_all_seeds("fa_prefill", &fa_params(), &[Regime::LateMax], normal());
    let mut causal = fa_params();
    causal["sparse_mode"] = json!(3);
    causal["dtype"] = json!("f16");
    check_all_seeds(
        "fa_prefill",
        &causal,
        &[Regime::LargeLogits, Regime::MaskedRowsLse],
        ValueDist::Uniform {
            low: -1.0,
            high: 1.0,
        },
    );
}

#[test]
fn pa_decode_regimes_hold_on_every_seed() {
    check_all_seeds("pa_decode", &pa_params(), &SCORE_REGIMES, normal());
    let mut bf = pa_params();
    bf["dtype"] = json!("bf16");
    bf["cache_layout"] = json!("BnBsH");
    check_all_seeds(
        "pa_decode",
        &bf,
        &[Regime::LargeLogits, Regime::LateMax],
        ValueDist::CannOutliers {
            fraction: 0.01,
            outlier_scale: 1000.0,
        },
    );
}

#[test]
fn without_regimes_the_inputs_are_the_ordinary_draw() {
    for (op, p) in [("fa_prefill", fa_params()), ("pa_decode", pa_params())] {
        let mut g = SplitMix64::new(7);
        let mut bits = move || g.next_u64();
        let mut ctx = GenContext::new(&mut bits, normal());
        let plain = ops::find(op).unwrap().generate(&p, &mut ctx).unwrap();
        let mut g = SplitMix64::new(7);
        let mut bits = move || g.next_u64();
        let mut ctx = GenContext::new(&mut bits, normal());
        let none = ops::find(op)
            .unwrap()
            .generate_with_regimes(&p, &[], &mut ctx)
            .unwrap();
        assert_eq!(plain, none, "{op}");
    }
}

fn regime_error(op: &str, params: serde_json::Value, r: Regime) -> String {
    let e = ops::find(op)
        .unwrap()
        .check_regimes(&params, &[r])
        .expect_err("the shape cannot hold it");
    assert!(
        matches!(&e, OpError::Regime { regime, .. } if regime == r.name()),
        "{e:?}"
    );
    let g = generate(op, &params, &[r], 0, normal()).expect_err("generation refuses too");
    assert_eq!(g.to_string(), e.to_string());
    e.to_string()
}

#[test]
fn shapes_that_cannot_hold_a_regime_are_refused_by_name() {
    let mut p = fa_params();
    p["softmax_lse_flag"] = json!(false);
    let e = regime_error("fa_prefill", p, Regime::MaskedRowsLse);
    assert!(e.contains("softmax_lse_flag"), "{e}");
    let mut p = fa_params();
    p["atten_mask"] = json!(false);
    let e = regime_error("fa_prefill", p, Regime::MaskedRowsLse);
    assert!(e.contains("atten_mask"), "{e}");
    let mut p = fa_params();
    p["kv_seq"] = json!(100);
    let e = regime_error("fa_prefill", p, Regime::LateMax);
    assert!(e.contains("key 128"), "{e}");
    let mut p = pa_params();
    p["actual_seq_lengths_kv"] = json!([120, 64, 16]);
    regime_error("pa_decode", p, Regime::LateMax);
    let e = ops::find("mxfp4_dequant")
        .unwrap()
        .check_regimes(&json!({"n": 1, "k": 32}), &[Regime::LargeLogits])
        .unwrap_err();
    assert!(e.to_string().contains("large_logits"), "{e}");
}

/// A shape with every structural regime: padded rows with the LSE, two batch entries, S != N,
/// GQA groups of 2 over 2 KV heads.
fn fa_shape_params() -> serde_json::Value {
    json!({ "dtype": "bf16", "batch": 2, "q_seq": 16, "kv_seq": 200, "num_heads": 4,
            "num_key_value_heads": 2, "head_dim": 64, "atten_mask": true,
            "softmax_lse_flag": true, "actual_seq_lengths": [16, 11] })
}

const SHAPE_REGIMES: [Regime; 3] = [Regime::BatchDistinct, Regime::SeqNeHeads, Regime::GqaGroups];

#[test]
fn structural_regimes_move_no_value_and_combine_with_the_others() {
    for (op, p, extra) in [
        ("fa_prefill", fa_shape_params(), Some(Regime::PaddedRowsLse)),
        ("pa_decode", pa_params(), None),
    ] {
        for base in [&[][..], &SCORE_REGIMES[..]] {
            let mut with: Vec<Regime> = base.to_vec();
            with.extend(SHAPE_REGIMES);
            with.extend(extra);
            for seed in 0..8 {
                let plain = generate(op, &p, base, seed, normal()).unwrap();
                let shaped = generate(op, &p, &with, seed, normal())
                    .unwrap_or_else(|e| panic!("{op} seed {seed}: {e}"));
                assert_eq!(plain, shaped, "{op} seed {seed} {with:?}");
            }
        }
    }
}

#[test]
fn shapes_that_cannot_hold_a_structural_regime_are_refused_by_name() {
    let with = |base: serde_json::Value, k: &str, v: serde_json::Value| {
        let mut p = base;
        p[k] = v;
        p
    };
    let e = regime_error(
        "fa_prefill",
        with(fa_shape_params(), "softmax_lse_flag", json!(false)),
        Regime::PaddedRowsLse,
    );
    assert!(e.contains("softmax_lse_flag"), "{e}");
    let e = regime_error("fa_prefill", fa_params(), Regime::PaddedRowsLse);
    assert!(e.contains("padded row"), "{e}");
    let e = regime_error(
        "fa_prefill",
        with(
            with(fa_shape_params(), "batch", json!(1)),
            "actual_seq_lengths",
            json!([11]),
        ),
        Regime::BatchDistinct,
    );
    assert!(e.contains("batch >= 2"), "{e}");
    let e = regime_error(
        "fa_prefill",
        with(
            with(fa_shape_params(), "q_seq", json!(4)),
            "actual_seq_lengths",
            json!([4, 3]),
        ),
        Regime::SeqNeHeads,
    );
    assert!(e.contains("q_seq 4 with 4 heads"), "{e}");
    let e = regime_error(
        "fa_prefill",
        with(fa_shape_params(), "num_key_value_heads", json!(1)),
        Regime::GqaGroups,
    );
    assert!(e.contains("1 KV heads"), "{e}");
    let e = regime_error(
        "fa_prefill",
        with(fa_shape_params(), "num_key_value_heads", json!(4)),
        Regime::GqaGroups,
    );
    assert!(e.contains("group 1"), "{e}");
    let mut p = pa_params();
    p["num_heads"] = json!(16);
    p["num_key_value_heads"] = json!(16);
    let e = regime_error("pa_decode", p, Regime::SeqNeHeads);
    assert!(e.contains("block_size 16, 16 KV heads"), "{e}");
    // A batch entry whose keys are all shared prefix holds no data of its own.
    let mut p = pa_params();
    p["actual_seq_lengths_kv"] = json!([300, 200, 16]);
    let e = regime_error("pa_decode", p, Regime::BatchDistinct);
    assert!(e.contains("entry 2"), "{e}");
    let e = ops::find("pa_decode")
        .unwrap()
        .check_regimes(&pa_params(), &[Regime::PaddedRowsLse])
        .unwrap_err();
    assert!(e.to_string().contains("only to fa_prefill"), "{e}");
}

/// For each (b, h) of a batch with a row that sees keys on both sides of `tile`: whether some
/// row has its maximum after the first tile, 5 to 10 above the tiles before its own and 5 or
/// more above every other score (`late`), or in the first tile, 0.5 to 3 above the later
/// tiles' largest score (not `late`).
fn moderate_max(s: &Scores, tile: usize, late: bool) -> Vec<bool> {
    s.per_batch_head(
        |k| k.iter().any(|&j| j < tile) && k.iter().any(|&j| j >= tile),
        |sc| {
            let (top, j) =
                sc.iter().copied().fold(
                    (f64::NEG_INFINITY, 0),
                    |a, x| {
                        if x.0 > a.0 {
                            x
                        } else {
                            a
                        }
                    },
                );
            let max_where = |f: &dyn Fn(usize) -> bool| {
                sc.iter()
                    .filter(|&&(_, x)| x != j && f(x))
                    .map(|p| p.0)
                    .fold(f64::NEG_INFINITY, f64::max)
            };
            let second = max_where(&|_| true);
            if late {
                let start = j / tile * tile;
                let gap = top - max_where(&|x| x < start);
                j >= tile && (5.0..=10.0).contains(&gap) && top - second >= 5.0
            } else {
                let margin = top - max_where(&|x| x >= tile);
                j < tile && (0.5..=3.0).contains(&margin)
            }
        },
    )
}

fn check_moderate(op: &str, params: &serde_json::Value, recipe: &str, tile: usize, seeds: u64) {
    for (r, late) in [
        (Regime::ModerateLateMax, true),
        (Regime::ModerateEarlyMax, false),
    ] {
        let mut positions = std::collections::BTreeSet::new();
        for seed in 0..seeds {
            let inputs = generate_for(op, params, &[r], seed, normal(), Some(recipe))
                .unwrap_or_else(|e| panic!("{op} seed {seed}: {e}"));
            let s = Scores::of(op, params, &inputs);
            let v = moderate_max(&s, tile, late);
            assert!(
                !v.is_empty() && v.iter().all(|&x| x),
                "{op} seed {seed}: {} {v:?}",
                r.name()
            );
            positions.insert(s.top_position());
        }
        assert!(
            positions.len() > seeds as usize / 4,
            "{op} {}: the seed hardly moves the regime",
            r.name()
        );
    }
}

#[test]
fn moderate_max_regimes_hold_against_the_recipes_own_tile_on_every_seed() {
    // The prompt kernel's 512-key block (bf16).
    let fa = json!({ "dtype": "bf16", "batch": 2, "q_seq": 4, "kv_seq": 700, "num_heads": 4,
                     "num_key_value_heads": 2, "head_dim": 64, "softmax_lse_flag": true });
    check_moderate("fa_prefill", &fa, "ascend_pfa_bf16", 512, 40);
    let mut causal = fa.clone();
    causal["sparse_mode"] = json!(3);
    causal["dtype"] = json!("f16");
    check_moderate("fa_prefill", &causal, "ascend_pfa_bf16", 512, 40);
    // A fixed 64-key tile.
    check_moderate("fa_prefill", &fa, "fa2_cuda", 64, 40);
    // The decode kernel: GQA groups of 10 take 2048-key sInner tiles; 16 (batch, KV head)
    // pairs on 40 vector cores take no split.
    let pa = json!({ "dtype": "bf16", "vector_cores": 40, "batch": 8, "num_heads": 20,
                     "num_key_value_heads": 2, "head_dim": 16, "block_size": 128,
                     "actual_seq_lengths_kv": [2100, 130, 140, 2060, 128, 200, 129, 300],
                     "shared_prefix_blocks": 1 });
    check_moderate("pa_decode", &pa, "ascend_ifa_bf16", 2048, 12);
}

#[test]
fn moderate_max_regimes_need_a_recipe_and_a_shape_past_its_tile() {
    let fa = json!({ "dtype": "bf16", "batch": 1, "q_seq": 4, "kv_seq": 500, "num_heads": 2,
                     "num_key_value_heads": 1, "head_dim": 32 });
    for r in [Regime::ModerateLateMax, Regime::ModerateEarlyMax] {
        let mut g = SplitMix64::new(1);
        let mut bits = move || g.next_u64();
        let mut ctx = GenContext::new(&mut bits, normal());
        ctx.recipe = Some("ascend_pfa_bf16".to_string());
        let e = ops::find("fa_prefill")
            .unwrap()
            .generate_with_regimes(&fa, &[r], &mut ctx)
            .expect_err("500 keys are one 512-key block");
        assert!(
            matches!(&e, OpError::Regime { regime, .. } if regime == r.name()),
            "{e:?}"
        );
        assert!(e.to_string().contains("key 512"), "{e}");
        let e = generate("fa_prefill", &fa, &[r], 0, normal()).expect_err("no recipe");
        assert!(e.to_string().contains("recipe preset"), "{e}");
        let e = ops::find("fa_prefill")
            .unwrap()
            .check_regimes(&fa, &[r, Regime::LateMax])
            .expect_err("rebuilds the same rows");
        assert!(e.to_string().contains("late_max"), "{e}");
    }
}

#[test]
fn subnormal_value_columns_hold_on_every_seed_and_need_room() {
    let fa = json!({ "dtype": "bf16", "batch": 2, "q_seq": 8, "kv_seq": 40, "num_heads": 4,
                     "num_key_value_heads": 2, "head_dim": 32, "sparse_mode": 3 });
    let mut pa = pa_params();
    pa["atten_mask"] = json!(false);
    // No shared prefix: every valid key then has value rows of its own.
    pa["shared_prefix_blocks"] = json!(0);
    for (op, p, value) in [
        ("fa_prefill", fa, "value"),
        ("pa_decode", pa, "value_cache"),
    ] {
        for dtype in ["bf16", "f16"] {
            let mut p = p.clone();
            p["dtype"] = json!(dtype);
            let (exp, sign) = if dtype == "f16" {
                (0x7C00u16, 0x8000u16)
            } else {
                (0x7F80, 0x8000)
            };
            for seed in 0..20 {
                let inputs = generate(op, &p, &[Regime::SubnormalOutputs], seed, normal())
                    .unwrap_or_else(|e| panic!("{op} {dtype} seed {seed}: {e}"));
                let g = Scores::of(op, &p, &inputs).g;
                let bits: Vec<u16> = inputs[value]
                    .data
                    .chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect();
                let sub = |b: u16| b & exp == 0 && b & !sign != 0;
                // Per value row (head_dim elements): one positive and one negative subnormal
                // column in every row a valid key reads; count the rows that hold them.
                let d = g.head_dim;
                let rows = bits
                    .chunks_exact(d)
                    .filter(|r| {
                        r.iter().filter(|&&b| sub(b) && b & sign == 0).count() >= 1
                            && r.iter().filter(|&&b| sub(b) && b & sign != 0).count() >= 1
                    })
                    .count();
                let valid: usize = g.lk.iter().sum::<usize>() * g.kv_heads;
                assert!(
                    rows >= valid,
                    "{op} {dtype} seed {seed}: {rows} of {valid} value rows hold both"
                );
            }
        }
    }
    let e = ops::find("fa_prefill")
        .unwrap()
        .check_regimes(
            &fa_params(),
            &[Regime::SubnormalOutputs, Regime::RoundingTies],
        )
        .expect_err("both rebuild value columns");
    assert!(e.to_string().contains("subnormal_outputs"), "{e}");
}
