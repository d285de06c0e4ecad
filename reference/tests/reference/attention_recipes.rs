//! Every recipe against the oracle within its documented bound, and the structural
//! properties of the recipe engine (GQA, split-KV, empty rows, causal alignment, threads).

use crate::attention_common;

use attention_common::{bits, ulps, Problem, VECTOR_CORES};
use conform_reference::attention::recipe::{EmptyRow, MaskFill};
use conform_reference::attention::{
    attention, oracle, AttentionConfig, AttentionInputs, Recipe, PRESETS,
};
use conform_reference::formats::DType;
use conform_reference::parallel::Threads;
use proptest::prelude::*;

/// Documented error bound of a recipe against the oracle, per output element, for inputs
/// with |v| <= vmax and |score| <= smax:
/// - P rounded to a dtype with unit roundoff u (bf16 2^-8, f16 2^-11) perturbs each weight by
///   a relative u, and the row sum of raw P differs from the sum the matmul saw by the same:
///   2 u vmax; split-KV partials stored in bf16 add u vmax;
/// - f16 scores (high-performance mode) perturb each exponent by about 4 u |s|: 4 u smax vmax;
/// - f32 arithmetic adds far less than one output ulp; the final cast adds one output ulp.
///
/// exact_f32 has no rounded intermediate, so it stays within one output ulp (or, for outputs
/// that cancel to near 0, within the absolute f32 accumulation error 2^-20 vmax).
fn bound(recipe: &Recipe, vmax: f64, smax: f64) -> f64 {
    let u = |d: DType| match d {
        DType::Bf16 => 2f64.powi(-8),
        DType::F16 => 2f64.powi(-11),
        DType::F32 => 2f64.powi(-24),
    };
    let mut b = 2.0 * u(recipe.p_dtype) * vmax;
    if let Some(s) = &recipe.split {
        b += u(s.partial_dtype) * vmax;
    }
    if recipe.score_precision == conform_reference::attention::recipe::ScorePrecision::F16 {
        b += 4.0 * 2f64.powi(-11) * (smax + 1.0) * vmax;
    }
    b + 1e-6 * vmax
}

fn max_abs_score(p: &Problem) -> f64 {
    let g = &p.g;
    let mut m = 0f64;
    for b in 0..g.batch {
        for h in 0..g.heads {
            for i in 0..g.lq[b] {
                for j in 0..g.lk[b] {
                    let qo = g.q_offset(b, i, h);
                    let ko = g.kv_offset(b, j, g.kv_head(h));
                    let s: f64 = (0..g.head_dim)
                        .map(|d| p.q[qo + d] as f64 * p.k[ko + d] as f64)
                        .sum();
                    m = m.max((s * g.scale as f64).abs());
                }
            }
        }
    }
    m
}

fn check_recipe_against_oracle(name: &str, cfg: &AttentionConfig, seed: u64) {
    let p = Problem::new(cfg, seed, 2.0);
    let recipe = Recipe::preset(name, cfg.dtype)
        .unwrap()
        .on_vector_cores(Some(VECTOR_CORES));
    let o = oracle(&p.g, &p.inputs(), Threads(2)).unwrap();
    let r = attention(&p.g, &recipe, &p.inputs(), Threads(2)).unwrap();
    let vmax = p.v.iter().fold(0f64, |a, &x| a.max(x.abs() as f64));
    let tol = bound(&recipe, vmax, max_abs_score(&p));
    // The decode kernel has no row-invalid correction: a query row without an allowed key
    // gets the mean of V and LSE ln(n) + fill, not the oracle's 0 and +inf
    // (`the_decode_kernel_has_no_row_invalid_correction`, attention_paged.rs); such rows are
    // left out of the bound here.
    let g = &p.g;
    let mut unjudged = vec![false; r.out.len()];
    if !recipe.empty_row.skips_masked_tiles() {
        for b in 0..g.batch {
            for i in 0..g.lq[b] {
                for h in 0..g.heads {
                    if o.lse[g.lse_index(b, i, h)] == f64::INFINITY {
                        let at = g.out_offset(b, i, h);
                        unjudged[at..at + g.head_dim].fill(true);
                    }
                }
            }
        }
    }
    for (idx, (&a, &e)) in r.out.iter().zip(&o.out).enumerate() {
        assert!(!a.is_nan(), "{name}: NaN at {idx}");
        if unjudged[idx] {
            continue;
        }
        let err = (a as f64 - e).abs();
        let out_ulp = ulps(a as f64, e, cfg.dtype);
        if name == "exact_f32" {
            // One output ulp, or (for outputs near 0 after cancellation) the absolute f32
            // accumulation error 2^-20 vmax.
            assert!(
                out_ulp <= 1.0 || err <= 2f64.powi(-20) * vmax,
                "{name}: {a} vs {e}: {out_ulp} ulps at {idx}"
            );
        } else {
            assert!(
                err <= tol || out_ulp <= 1.0,
                "{name}: {a} vs {e}: error {err} > bound {tol} at {idx}"
            );
        }
    }
    let lse = r.lse.unwrap();
    for (&a, &e) in lse.iter().zip(&o.lse) {
        if e == f64::INFINITY && !recipe.empty_row.skips_masked_tiles() {
            continue;
        }
        // Equal (infinities included) or within the tolerance.
        assert!(
            approx::relative_eq!(
                a as f64,
                e,
                epsilon = 1e-3 * (1.0 + e.abs()),
                max_relative = 0.0
            ),
            "{name}: lse {a} vs {e}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn every_recipe_stays_within_its_documented_bound_of_the_oracle(
        seed in any::<u64>(),
        sq in 1usize..40, sk in 1usize..300, d in prop::sample::select(vec![16usize, 64, 128]),
        mode in prop::sample::select(vec![0u32, 2, 3]),
    ) {
        for name in PRESETS {
            let dtype = if name == "ascend_pfa_f16_high_perf" { DType::F16 } else { DType::Bf16 };
            let mut cfg = AttentionConfig::new(dtype, 2, sq, sk, 4, 2, d);
            cfg.sparse_mode = mode;
            cfg.softmax_lse_flag = true;
            check_recipe_against_oracle(name, &cfg, seed);
        }
    }
}

#[test]
fn exact_f32_is_within_one_output_ulp_of_the_oracle_for_each_dtype() {
    for dtype in [DType::Bf16, DType::F16] {
        let mut cfg = AttentionConfig::new(dtype, 2, 64, 200, 8, 2, 128);
        cfg.sparse_mode = 3;
        cfg.softmax_lse_flag = true;
        check_recipe_against_oracle("exact_f32", &cfg, 5);
    }
}

/// The same problem with each KV head repeated `group` times, as plain multi-head attention.
#[test]
fn gqa_equals_attention_with_kv_heads_repeated_bitwise() {
    let (b, s, sk, hq, hkv, d) = (2, 33, 70, 8, 2, 64);
    let mut cfg = AttentionConfig::new(DType::Bf16, b, s, sk, hq, hkv, d);
    cfg.sparse_mode = 3;
    cfg.softmax_lse_flag = true;
    let p = Problem::new(&cfg, 9, 2.0);
    let group = hq / hkv;
    let rep = |x: &[f32]| -> Vec<f32> {
        let mut y = Vec::with_capacity(x.len() * group);
        for row in x.chunks(hkv * d) {
            for h in 0..hq {
                let kh = h / group;
                y.extend_from_slice(&row[kh * d..(kh + 1) * d]);
            }
        }
        y
    };
    let (k2, v2) = (rep(&p.k), rep(&p.v));
    let mut mha = cfg.clone();
    mha.num_key_value_heads = hq;
    let g2 = mha.geometry().unwrap();
    let ins2 = AttentionInputs {
        query: &p.q,
        key: &k2,
        value: &v2,
        atten_mask: None,
    };
    for name in PRESETS {
        let r = Recipe::preset(name, DType::Bf16)
            .unwrap()
            .on_vector_cores(Some(VECTOR_CORES));
        let a = attention(&p.g, &r, &p.inputs(), Threads(2)).unwrap();
        let e = attention(&g2, &r, &ins2, Threads(2)).unwrap();
        assert_eq!(bits(&a.out), bits(&e.out), "{name}");
        assert_eq!(bits(&a.lse.unwrap()), bits(&e.lse.unwrap()), "{name}");
    }
    let a = oracle(&p.g, &p.inputs(), Threads(1)).unwrap();
    let e = oracle(&g2, &ins2, Threads(1)).unwrap();
    assert_eq!(a, e);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Flash-decoding with partitions of `part` keys against the single pass: the combine
    /// adds only f32 rounding (a few f32 ulps of the result, plus the output rounding).
    #[test]
    fn split_kv_combine_stays_within_bound_of_the_single_pass(
        seed in any::<u64>(), sk in 1usize..600, part in 16usize..200, sq in 1usize..4,
    ) {
        let mut cfg = AttentionConfig::new(DType::Bf16, 1, sq, sk, 4, 1, 64);
        cfg.softmax_lse_flag = true;
        let p = Problem::new(&cfg, seed, 2.0);
        let single = Recipe::exact_f32();
        let split = Recipe::exact_f32().with_split(part);
        let a = attention(&p.g, &single, &p.inputs(), Threads(1)).unwrap();
        let b = attention(&p.g, &split, &p.inputs(), Threads(2)).unwrap();
        let o = oracle(&p.g, &p.inputs(), Threads(1)).unwrap();
        for ((&x, &y), &e) in a.out.iter().zip(&b.out).zip(&o.out) {
            let near = |a: f64, e: f64| ulps(a, e, DType::Bf16) <= 1.0 || (a - e).abs() <= 2f64.powi(-20);
            prop_assert!(near(y as f64, x as f64), "{} vs {}", y, x);
            prop_assert!(near(y as f64, e), "{} vs oracle {}", y, e);
        }
        for (&x, &y) in a.lse.unwrap().iter().zip(&b.lse.unwrap()) {
            prop_assert!(approx::abs_diff_eq!(x, y, epsilon = 1e-5 * (1.0 + x.abs())), "lse {} vs {}", x, y);
        }
    }
}

#[test]
fn vllm_v2_with_one_partition_equals_v1_bitwise() {
    let cfg = AttentionConfig::new(DType::Bf16, 2, 1, 500, 8, 2, 128);
    let p = Problem::new(&cfg, 3, 2.0);
    let v1 = attention(
        &p.g,
        &Recipe::vllm_pa_v1(DType::Bf16),
        &p.inputs(),
        Threads(2),
    )
    .unwrap();
    let v2 = attention(
        &p.g,
        &Recipe::vllm_pa_v2(DType::Bf16),
        &p.inputs(),
        Threads(2),
    )
    .unwrap();
    assert_eq!(bits(&v1.out), bits(&v2.out));
    // Beyond one partition the v2 combine changes bits but stays within the bound.
    let cfg = AttentionConfig::new(DType::Bf16, 2, 1, 1500, 8, 2, 128);
    check_recipe_against_oracle(
        "vllm_pa_v2",
        &AttentionConfig {
            softmax_lse_flag: true,
            ..cfg
        },
        4,
    );
}

/// Rows that see no key (explicit mask rows of 1s; bottom-right causal with Lq > Lk; lengths
/// of 0) follow each recipe's empty-row policy and never leak NaN into other rows.
#[test]
fn fully_masked_rows_follow_the_empty_row_policy_without_nan() {
    let mut cfg = AttentionConfig::new(DType::Bf16, 2, 12, 9, 4, 2, 32);
    cfg.atten_mask = true;
    cfg.softmax_lse_flag = true;
    cfg.actual_seq_lengths_kv = Some(vec![9, 0]);
    let mut p = Problem::new(&cfg, 21, 2.0);
    let mask = p.mask.as_mut().unwrap();
    for j in 0..9 {
        mask[3 * 9 + j] = 1; // batch 0, row 3 fully masked
    }
    let mut br = cfg.clone();
    br.atten_mask = false;
    br.sparse_mode = 3; // Lq 12 > Lk 9: rows 0..3 of batch 0 see nothing
    for name in PRESETS {
        for c in [&cfg, &br] {
            let g = c.geometry().unwrap();
            let ins = AttentionInputs {
                atten_mask: if c.atten_mask {
                    p.mask.as_deref()
                } else {
                    None
                },
                ..p.inputs()
            };
            let mut recipe = Recipe::preset(name, DType::Bf16)
                .unwrap()
                .on_vector_cores(Some(VECTOR_CORES));
            recipe.q_tile = 4;
            let r = attention(&g, &recipe, &ins, Threads(2)).unwrap();
            let o = oracle(&g, &ins, Threads(1)).unwrap();
            let lse = r.lse.unwrap();
            let policy = recipe.empty_row;
            for b in 0..2 {
                for h in 0..4 {
                    for i in 0..12 {
                        let empty = o.lse[g.lse_index(b, i, h)] == f64::INFINITY;
                        let off = g.out_offset(b, i, h);
                        let row = &r.out[off..off + 32];
                        assert!(
                            row.iter().all(|x| !x.is_nan()),
                            "{name}: NaN in row {b} {i} {h}"
                        );
                        let l = lse[g.lse_index(b, i, h)];
                        if empty {
                            match policy {
                                EmptyRow::Zero { lse: v } => {
                                    assert!(row.iter().all(|&x| x == 0.0), "{name}: not 0");
                                    assert_eq!(l, v, "{name}");
                                }
                                // The decode kernel: an empty KV is 0 with its LSE; masked
                                // keys are averaged (finite), LSE ln(n) + -1e12.
                                EmptyRow::DecodeKernel { empty_kv_lse } if b == 1 => {
                                    assert!(row.iter().all(|&x| x == 0.0), "{name}: not 0");
                                    assert_eq!(l, empty_kv_lse, "{name}");
                                }
                                EmptyRow::DecodeKernel { .. } => {
                                    assert!(row.iter().all(|x| x.is_finite()), "{name}");
                                    assert!(l < -9e11, "{name}: {l}");
                                }
                                EmptyRow::Arithmetic => panic!("{name}: no preset computes"),
                            }
                        } else {
                            assert!(lse[g.lse_index(b, i, h)].is_finite(), "{name}");
                        }
                    }
                }
            }
        }
    }
    // Without the policy, a -inf mask without a guard would give NaN; with the -FLT_MAX
    // select the arithmetic gives the mean of the visited values, which is finite.
    let mut arith = Recipe::ascend_pfa_bf16(DType::Bf16);
    arith.empty_row = EmptyRow::Arithmetic;
    assert_eq!(arith.mask_fill, MaskFill::NegFltMax);
    let g = br.geometry().unwrap();
    let ins = AttentionInputs {
        atten_mask: None,
        ..p.inputs()
    };
    let r = attention(&g, &arith, &ins, Threads(1)).unwrap();
    let off = g.out_offset(0, 0, 0);
    assert!(r.out[off..off + 32].iter().all(|x| x.is_finite()));
}

/// Top-left (sparse_mode 2) and bottom-right (3) causal masks agree exactly when Lq == Lk.
#[test]
fn causal_top_left_and_bottom_right_differ_exactly_when_lengths_differ() {
    for (sq, sk) in [(16usize, 16usize), (8, 16), (16, 8), (1, 5), (5, 5)] {
        let mut cfg = AttentionConfig::new(DType::Bf16, 1, sq, sk, 2, 1, 16);
        let p = Problem::new(&cfg, 2, 2.0);
        let r = Recipe::ascend_pfa_bf16(DType::Bf16);
        cfg.sparse_mode = 2;
        let tl = attention(&cfg.geometry().unwrap(), &r, &p.inputs(), Threads(1)).unwrap();
        cfg.sparse_mode = 3;
        let brr = attention(&cfg.geometry().unwrap(), &r, &p.inputs(), Threads(1)).unwrap();
        assert_eq!(tl.out == brr.out, sq == sk, "Lq {sq} Lk {sk}");
    }
}

fn thread_independence(cfg: &AttentionConfig) {
    let p = Problem::new(cfg, 17, 2.0);
    for name in ["ascend_pfa_bf16", "fa2_cuda", "vllm_pa_v2"] {
        let r = Recipe::preset(name, DType::Bf16)
            .unwrap()
            .on_vector_cores(Some(VECTOR_CORES));
        let base = attention(&p.g, &r, &p.inputs(), Threads(1)).unwrap();
        for t in [2, 7] {
            let x = attention(&p.g, &r, &p.inputs(), Threads(t)).unwrap();
            assert_eq!(bits(&base.out), bits(&x.out), "{name} threads {t}");
            assert_eq!(
                bits(base.lse.as_ref().unwrap()),
                bits(x.lse.as_ref().unwrap())
            );
        }
    }
    let base = oracle(&p.g, &p.inputs(), Threads(1)).unwrap();
    for t in [2, 7] {
        assert_eq!(base, oracle(&p.g, &p.inputs(), Threads(t)).unwrap());
    }
}

/// The bench's prefill case (B=1, Hq=32, Hkv=8, S=2048, D=128, causal) gives bitwise the same
/// output with 1, 2 and 7 threads (release; debug runs the same shape with 4 heads, S=512).
#[test]
fn prefill_bench_case_is_bitwise_identical_for_1_2_and_7_threads() {
    let (h, kv, s) = if cfg!(debug_assertions) {
        (4, 1, 512)
    } else {
        (32, 8, 2048)
    };
    let mut cfg = AttentionConfig::new(DType::Bf16, 1, s, s, h, kv, 128);
    cfg.sparse_mode = 3;
    cfg.softmax_lse_flag = true;
    let p = Problem::new(&cfg, 1, 1.0);
    let r = Recipe::ascend_pfa_bf16(DType::Bf16);
    let base = attention(&p.g, &r, &p.inputs(), Threads(1)).unwrap();
    for t in [2, 7] {
        let x = attention(&p.g, &r, &p.inputs(), Threads(t)).unwrap();
        assert_eq!(bits(&base.out), bits(&x.out), "threads {t}");
    }
}

#[test]
fn recipes_and_oracle_are_independent_of_thread_count_on_varied_shapes() {
    let mut rng = attention_common::rng(4);
    for _ in 0..4 {
        let mut cfg = AttentionConfig::new(
            DType::Bf16,
            3,
            1 + rng.below(70),
            1 + rng.below(300),
            6,
            3,
            64,
        );
        cfg.sparse_mode = [0, 2, 3, 4][rng.below(4)];
        cfg.pre_tokens = rng.below(50) as i64;
        cfg.next_tokens = rng.below(50) as i64;
        cfg.softmax_lse_flag = true;
        thread_independence(&cfg);
    }
}

/// The knobs change bits as the notes say (so each is live): KV tile, block order, P dtype.
#[test]
fn recipe_fields_change_the_output_bits() {
    let cfg = AttentionConfig::new(DType::Bf16, 1, 8, 1000, 2, 1, 128);
    let p = Problem::new(&cfg, 8, 2.0);
    let base = Recipe::ascend_pfa_bf16(DType::Bf16);
    let run = |r: &Recipe| attention(&p.g, r, &p.inputs(), Threads(1)).unwrap().out;
    let b = run(&base);
    let variants = [
        Recipe {
            kv_tile: 64,
            kv_tiling: conform_reference::attention::recipe::KvTiling::Fixed,
            ..base.clone()
        },
        Recipe {
            block_order: conform_reference::attention::recipe::BlockOrder::Reverse,
            ..base.clone()
        },
        Recipe {
            p_dtype: DType::F32,
            ..base.clone()
        },
        Recipe {
            o_rescale: conform_reference::attention::recipe::ORescale::DiagonalMatmul,
            ..base.clone()
        },
    ];
    for v in &variants {
        assert_ne!(bits(&run(v)), bits(&b), "{v:?}");
    }
}

/// The f16 high-performance prompt kernel (docs/ascend.md, `fa.ascend_pfa_f16_high_perf.*`)
/// holds O in f16: the P V result, the rescale and the update are each rounded to f16, the
/// f32 row sum is cast to f16 with CAST_ROUND and O is divided by it in f16. A scalar model
/// of one row over three KV tiles, written here with the `half` crate's f16 rounding, gives
/// the preset's bits for every seed, and the f32-O model conform had before does not.
#[test]
fn f16_high_perf_holds_o_in_f16_and_divides_in_f16() {
    use conform_reference::attention::recipe::{Normalize, ORescale};
    use conform_reference::formats::Rounding;
    use conform_reference::math::exp_f32;
    let r16 = |x: f32| half::f16::from_f32(x).to_f32();
    let (keys, dim, tile) = (6usize, 2usize, 2usize);
    let cfg = AttentionConfig::new(DType::F16, 1, 1, keys, 1, 1, dim);
    let recipe = Recipe {
        kv_tile: tile,
        kv_tiling: conform_reference::attention::recipe::KvTiling::Fixed,
        ..Recipe::ascend_pfa_f16_high_perf()
    };
    let f32_o = Recipe {
        o_rescale: ORescale::VectorF32,
        normalize: Normalize::Divide,
        ..recipe.clone()
    };
    let mut old_differs = 0;
    for seed in 0..64 {
        let p = Problem::new(&cfg, seed, 3.0);
        let sc = r16(p.g.scale);
        let s: Vec<f32> = (0..keys)
            .map(|j| {
                let dot = p.q[0] * p.k[j * dim] + p.q[1] * p.k[j * dim + 1];
                r16(r16(dot) * sc)
            })
            .collect();
        let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
        let mut o = vec![0.0f32; dim];
        for t0 in (0..keys).step_by(tile) {
            let ks = t0..t0 + tile;
            let mx = ks.clone().map(|j| s[j]).fold(f32::NEG_INFINITY, f32::max);
            let m_new = m.max(mx);
            let alpha = r16(exp_f32(r16(m - m_new)));
            let pj: Vec<f32> = ks
                .clone()
                .map(|j| r16(exp_f32(r16(s[j] - m_new))))
                .collect();
            l = l * alpha + (pj[0] + pj[1]);
            for (d, od) in o.iter_mut().enumerate() {
                let pv = pj[0] * p.v[t0 * dim + d] + pj[1] * p.v[(t0 + 1) * dim + d];
                *od = r16(r16(*od * alpha) + r16(pv));
            }
            m = m_new;
        }
        let l16 = DType::F16.quantize_f32(l, Rounding::RNA);
        let want: Vec<f32> = o.iter().map(|&x| r16(x / l16)).collect();
        let got = attention(&p.g, &recipe, &p.inputs(), Threads(1)).unwrap();
        assert_eq!(bits(&got.out), bits(&want), "seed {seed}");
        let old = attention(&p.g, &f32_o, &p.inputs(), Threads(1)).unwrap();
        old_differs += (bits(&old.out) != bits(&want)) as usize;
    }
    assert!(old_differs > 0, "no seed tells the f16-O kernel from f32 O");
}

/// The contradiction issue 40 fixed: the prompt presets tiled KV by 128 keys, a size the
/// kernel's tiling never picks (`AdjustCVTilingCVDiff`: 512 for bf16 and f16 high precision,
/// 1024 for f16 high performance over more than 1024 keys, 2048 for at most 16 unmasked query
/// rows over more than 2048 keys). Each preset equals itself with the kernel's block written
/// out as a fixed tile, bit for bit, and differs from the 128-key tiling on these shapes (the
/// old model fails here).
#[test]
fn the_prompt_presets_tile_kv_as_the_kernel_does() {
    use conform_reference::attention::recipe::KvTiling;
    let fixed = |r: &Recipe, tile: usize| Recipe {
        kv_tile: tile,
        kv_tiling: KvTiling::Fixed,
        ..r.clone()
    };
    // (dtype, q_seq, kv_seq, causal, preset, the kernel's block)
    let cases = [
        (
            DType::Bf16,
            24,
            1100,
            true,
            Recipe::ascend_pfa_bf16(DType::Bf16),
            512,
        ),
        (
            DType::F16,
            24,
            600,
            true,
            Recipe::ascend_pfa_bf16(DType::F16),
            512,
        ),
        (
            DType::F16,
            24,
            1100,
            true,
            Recipe::ascend_pfa_f16_high_perf(),
            1024,
        ),
        (
            DType::F16,
            24,
            900,
            true,
            Recipe::ascend_pfa_f16_high_perf(),
            512,
        ),
        (
            DType::Bf16,
            8,
            2600,
            false,
            Recipe::ascend_pfa_bf16(DType::Bf16),
            2048,
        ),
    ];
    for (dtype, q, kv, causal, preset, block) in cases {
        let mut cfg = AttentionConfig::new(dtype, 1, q, kv, 2, 1, 64);
        cfg.sparse_mode = if causal { 3 } else { 0 };
        let p = Problem::new(&cfg, 11, 2.0);
        let run = |r: &Recipe| attention(&p.g, r, &p.inputs(), Threads(1)).unwrap().out;
        let got = bits(&run(&preset));
        assert_eq!(
            got,
            bits(&run(&fixed(&preset, block))),
            "{} kv {kv}",
            preset.name
        );
        assert_ne!(
            got,
            bits(&run(&fixed(&preset, 128))),
            "{} kv {kv}",
            preset.name
        );
    }
}
