//! MatmulAllReduce over simulated ranks: tiling properties, schedule independence, thread-count
//! independence, the documented reduction orders, epilogue placement and typed errors.

use crate::mc2_common;

use conform_reference::formats::{f16, DType, Rounding};
use conform_reference::mc2::{
    decode_bits, encode_bits, matmul_all_reduce, matmul_all_reduce_tiled, EpiloguePlacement,
    MatmulAllReduceInputs, Mc2Error, Mc2Numerics, Mc2Shape, RankOperands, ReductionOrder,
};
use conform_reference::parallel::Threads;
use mc2_common::SplitMix;

struct Data {
    shape: Mc2Shape,
    x1: Vec<Vec<f32>>,
    x2: Vec<Vec<f32>>,
    bias: Vec<f32>,
    x3: Vec<f32>,
}

impl Data {
    fn random(ranks: usize, shape: Mc2Shape, dtype: DType, seed: u64) -> Data {
        let mut rng = SplitMix::new(seed);
        let Mc2Shape { m, k, n } = shape;
        Data {
            shape,
            x1: (0..ranks)
                .map(|_| mc2_common::tensor(&mut rng, m * k, dtype))
                .collect(),
            x2: (0..ranks)
                .map(|_| mc2_common::tensor(&mut rng, k * n, dtype))
                .collect(),
            bias: mc2_common::tensor(&mut rng, n, dtype),
            x3: mc2_common::tensor(&mut rng, m * n, dtype),
        }
    }

    fn ops(&self) -> Vec<RankOperands<'_>> {
        self.x1
            .iter()
            .zip(&self.x2)
            .map(|(x1, x2)| RankOperands { x1, x2 })
            .collect()
    }
}

fn inputs<'a>(d: &'a Data, ops: &'a [RankOperands<'a>], epi: bool) -> MatmulAllReduceInputs<'a> {
    MatmulAllReduceInputs {
        shape: d.shape,
        ranks: ops,
        bias: epi.then_some(&d.bias[..]),
        x3: epi.then_some(&d.x3[..]),
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn all_numerics(dtype: DType) -> Vec<Mc2Numerics> {
    let mut v: Vec<Mc2Numerics> = ReductionOrder::ALL
        .iter()
        .map(|&o| Mc2Numerics::kernel(dtype, o))
        .collect();
    v.push(Mc2Numerics::high_precision(dtype));
    v
}

const TILINGS: &[&[usize]] = &[&[37], &[5, 32], &[16, 16, 5], &[1, 35, 1], &[8, 8, 8, 8, 5]];

#[test]
fn tiled_equals_untiled_bitwise_in_high_precision_mode() {
    for dtype in [DType::F16, DType::Bf16] {
        for ranks in [1, 2, 4, 8] {
            let d = Data::random(ranks, Mc2Shape::new(37, 40, 19), dtype, 11 + ranks as u64);
            let ops = d.ops();
            for epi in [false, true] {
                for epilogue in [
                    EpiloguePlacement::AfterReduce,
                    EpiloguePlacement::IntoRankZero,
                    EpiloguePlacement::IntoEveryRank,
                ] {
                    let nm = Mc2Numerics {
                        epilogue,
                        ..Mc2Numerics::high_precision(dtype)
                    };
                    let inp = inputs(&d, &ops, epi);
                    let untiled = matmul_all_reduce(&inp, &nm, Threads::ONE).unwrap();
                    for tiles in TILINGS {
                        let schedule: Vec<usize> = (0..tiles.len()).collect();
                        let tiled =
                            matmul_all_reduce_tiled(&inp, &nm, tiles, &schedule, Threads::ONE)
                                .unwrap();
                        assert_eq!(
                            bits(&tiled),
                            bits(&untiled),
                            "{dtype:?} R={ranks} {tiles:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn rank_order_and_tree_kernel_modes_do_not_depend_on_tiling() {
    for order in [ReductionOrder::RankOrder, ReductionOrder::BinaryTree] {
        let d = Data::random(8, Mc2Shape::new(37, 24, 11), DType::Bf16, 5);
        let ops = d.ops();
        let nm = Mc2Numerics::kernel(DType::Bf16, order);
        let inp = inputs(&d, &ops, true);
        let untiled = matmul_all_reduce(&inp, &nm, Threads::ONE).unwrap();
        for tiles in TILINGS {
            let schedule: Vec<usize> = (0..tiles.len()).rev().collect();
            let tiled = matmul_all_reduce_tiled(&inp, &nm, tiles, &schedule, Threads::ONE).unwrap();
            assert_eq!(bits(&tiled), bits(&untiled));
        }
    }
}

/// The tile computed on its own: x1 and x3 restricted to the tile's rows, one untiled call.
fn per_tile_reference(d: &Data, nm: &Mc2Numerics, tiles: &[usize]) -> Vec<f32> {
    let Mc2Shape { k, n, .. } = d.shape;
    let mut out = Vec::new();
    let mut r0 = 0;
    for &rows in tiles {
        let x1: Vec<&[f32]> = d.x1.iter().map(|x| &x[r0 * k..(r0 + rows) * k]).collect();
        let ops: Vec<RankOperands<'_>> = x1
            .iter()
            .zip(&d.x2)
            .map(|(x1, x2)| RankOperands { x1, x2 })
            .collect();
        let inp = MatmulAllReduceInputs {
            shape: Mc2Shape::new(rows, k, n),
            ranks: &ops,
            bias: Some(&d.bias),
            x3: Some(&d.x3[r0 * n..(r0 + rows) * n]),
        };
        out.extend(matmul_all_reduce(&inp, nm, Threads::ONE).unwrap());
        r0 += rows;
    }
    out
}

#[test]
fn kernel_mode_equals_the_per_tile_computation_for_any_tile_schedule() {
    for dtype in [DType::F16, DType::Bf16] {
        for order in ReductionOrder::ALL {
            let d = Data::random(4, Mc2Shape::new(37, 33, 13), dtype, 99);
            let ops = d.ops();
            let nm = Mc2Numerics::kernel(dtype, order);
            let inp = inputs(&d, &ops, true);
            let tiles = [8usize, 8, 8, 8, 5];
            let expected = per_tile_reference(&d, &nm, &tiles);
            let mut rng = SplitMix::new(3);
            let mut schedules: Vec<Vec<usize>> = vec![vec![0, 1, 2, 3, 4], vec![4, 3, 2, 1, 0]];
            for _ in 0..6 {
                // Fisher-Yates with the deterministic generator.
                let mut s: Vec<usize> = (0..tiles.len()).collect();
                for i in (1..s.len()).rev() {
                    s.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
                }
                schedules.push(s);
            }
            for s in &schedules {
                let got = matmul_all_reduce_tiled(&inp, &nm, &tiles, s, Threads::ONE).unwrap();
                assert_eq!(bits(&got), bits(&expected), "{dtype:?} {order:?} {s:?}");
            }
        }
    }
}

#[test]
fn ring_order_depends_on_the_tile_buffer() {
    // The ring's chunk boundaries follow the reduced buffer, so tiling changes its bits (which
    // is why the property above is stated per tile).
    let d = Data::random(8, Mc2Shape::new(64, 64, 32), DType::Bf16, 2024);
    let ops = d.ops();
    let nm = Mc2Numerics::kernel(DType::Bf16, ReductionOrder::Ring);
    let inp = inputs(&d, &ops, false);
    let untiled = matmul_all_reduce(&inp, &nm, Threads::ONE).unwrap();
    let tiled = matmul_all_reduce_tiled(&inp, &nm, &[24, 40], &[0, 1], Threads::ONE).unwrap();
    assert_ne!(bits(&tiled), bits(&untiled));
}

#[test]
fn results_are_bitwise_identical_for_1_2_and_7_threads() {
    for nm in all_numerics(DType::F16) {
        let d = Data::random(4, Mc2Shape::new(53, 70, 29), DType::F16, 77);
        let ops = d.ops();
        let inp = inputs(&d, &ops, true);
        let tiles = [20usize, 33];
        let one = matmul_all_reduce_tiled(&inp, &nm, &tiles, &[1, 0], Threads(1)).unwrap();
        for t in [2, 7] {
            let other = matmul_all_reduce_tiled(&inp, &nm, &tiles, &[1, 0], Threads(t)).unwrap();
            assert_eq!(bits(&other), bits(&one), "{nm:?} threads {t}");
        }
    }
}

#[test]
fn reduction_orders_give_the_documented_results_on_a_crafted_case() {
    // Four ranks; rank r's product is v_r in every column (K = 1, x2 = 1):
    // v = [2048, 1, 1, -2048]. f16 spacing is 2 at 2048 and 1 below it.
    let v = [2048.0f32, 1.0, 1.0, -2048.0];
    let x1: Vec<Vec<f32>> = v.iter().map(|&x| vec![x]).collect();
    let x2 = vec![1.0f32; 4];
    let ops: Vec<RankOperands<'_>> = x1.iter().map(|x1| RankOperands { x1, x2: &x2 }).collect();
    let inp = MatmulAllReduceInputs {
        shape: Mc2Shape::new(1, 1, 4),
        ranks: &ops,
        bias: None,
        x3: None,
    };
    let run = |nm: Mc2Numerics| matmul_all_reduce(&inp, &nm, Threads::ONE).unwrap();
    // Rank order: 2048 + 1 = 2049 -> 2048 (tie to even), + 1 -> 2048, - 2048 = 0.
    assert_eq!(
        run(Mc2Numerics::kernel(DType::F16, ReductionOrder::RankOrder)),
        vec![0.0; 4]
    );
    // Tree: (2048 + 1 -> 2048) + (1 - 2048 = -2047) = 1.
    assert_eq!(
        run(Mc2Numerics::kernel(DType::F16, ReductionOrder::BinaryTree)),
        vec![1.0; 4]
    );
    // Ring, one element per chunk: chunk c starts at rank c + 1 and ends at rank c.
    //   c = 0: ((1 + 1) - 2048) + 2048 = 2;   c = 1: ((1 - 2048) + 2048) + 1 = 2;
    //   c = 2: ((-2048 + 2048) + 1) + 1 = 2;  c = 3: rank order = 0.
    assert_eq!(
        run(Mc2Numerics::kernel(DType::F16, ReductionOrder::Ring)),
        vec![2.0, 2.0, 2.0, 0.0]
    );
    // High precision: the exact sum 2, rounded once.
    assert_eq!(run(Mc2Numerics::high_precision(DType::F16)), vec![2.0; 4]);
}

#[test]
fn small_integer_case_matches_exact_arithmetic_for_every_epilogue_placement() {
    // Integer inputs keep every intermediate exact, so the three placements differ only by the
    // number of bias/x3 copies: 1 (after the reduce or into rank 0) or R (into every rank).
    let (m, k, n, ranks) = (5, 7, 6, 4);
    let mut x1 = Vec::new();
    let mut x2 = Vec::new();
    for r in 0..ranks {
        x1.push(
            (0..m * k)
                .map(|i| ((i * 3 + r * 5) % 7) as f32 - 3.0)
                .collect::<Vec<_>>(),
        );
        x2.push(
            (0..k * n)
                .map(|i| ((i * 5 + r) % 5) as f32 - 2.0)
                .collect::<Vec<_>>(),
        );
    }
    let bias: Vec<f32> = (0..n).map(|j| j as f32 - 2.0).collect();
    let x3: Vec<f32> = (0..m * n).map(|i| (i % 4) as f32).collect();
    let ops: Vec<RankOperands<'_>> = x1
        .iter()
        .zip(&x2)
        .map(|(x1, x2)| RankOperands { x1, x2 })
        .collect();
    let inp = MatmulAllReduceInputs {
        shape: Mc2Shape::new(m, k, n),
        ranks: &ops,
        bias: Some(&bias),
        x3: Some(&x3),
    };
    let exact = |copies: f64| -> Vec<f32> {
        let mut out = Vec::new();
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f64;
                for r in 0..ranks {
                    for kk in 0..k {
                        s += x1[r][i * k + kk] as f64 * x2[r][kk * n + j] as f64;
                    }
                }
                s += copies * (bias[j] as f64 + x3[i * n + j] as f64);
                out.push(s as f32);
            }
        }
        out
    };
    for nm in all_numerics(DType::Bf16) {
        for (epilogue, copies) in [
            (EpiloguePlacement::AfterReduce, 1.0),
            (EpiloguePlacement::IntoRankZero, 1.0),
            (EpiloguePlacement::IntoEveryRank, ranks as f64),
        ] {
            let nm = Mc2Numerics { epilogue, ..nm };
            let got = matmul_all_reduce(&inp, &nm, Threads::ONE).unwrap();
            assert_eq!(got, exact(copies), "{nm:?}");
        }
    }
}

#[test]
fn output_rounding_mode_applies_to_each_ranks_result() {
    // One rank, K = 1: 1 + 2^-11 sits halfway between f16 1 and 1 + 2^-10: RNE gives 1,
    // ties-away gives 1 + 2^-10.
    let x1 = vec![1.0f32];
    let x2 = vec![1.0f32];
    let bias = vec![2.0f32.powi(-11)];
    let ops = [RankOperands { x1: &x1, x2: &x2 }];
    let inp = MatmulAllReduceInputs {
        shape: Mc2Shape::new(1, 1, 1),
        ranks: &ops,
        bias: Some(&bias),
        x3: None,
    };
    let rne = Mc2Numerics::kernel(DType::F16, ReductionOrder::RankOrder);
    let rna = Mc2Numerics {
        output_rounding: Rounding::RNA,
        ..rne
    };
    assert_eq!(
        matmul_all_reduce(&inp, &rne, Threads::ONE).unwrap(),
        vec![1.0]
    );
    let got = matmul_all_reduce(&inp, &rna, Threads::ONE).unwrap();
    assert_eq!(got, vec![1.0 + 2.0f32.powi(-10)]);
    assert_eq!(encode_bits(&got, DType::F16).unwrap(), vec![0x3C01]);
    assert_eq!(decode_bits(&[0x3C01], DType::F16).unwrap(), got);
    assert_eq!(f16::f16_to_f32(0x3C01), got[0]);
    assert!(matches!(
        decode_bits(&[0], DType::F32),
        Err(Mc2Error::UnsupportedDType { .. })
    ));
}

#[test]
fn bsk_activation_is_the_flattened_matmul() {
    let shape = Mc2Shape::from_bsk(3, 5, 8, 4).unwrap();
    assert_eq!(shape, Mc2Shape::new(15, 8, 4));
}

#[test]
fn bad_inputs_are_typed_errors_naming_the_problem() {
    let d = Data::random(2, Mc2Shape::new(4, 3, 2), DType::F16, 1);
    let ops = d.ops();
    let nm = Mc2Numerics::kernel(DType::F16, ReductionOrder::Ring);
    let run = |inp: &MatmulAllReduceInputs<'_>, nm: &Mc2Numerics| {
        matmul_all_reduce(inp, nm, Threads::ONE).unwrap_err()
    };
    // Three ranks.
    let three = [ops[0], ops[1], ops[0]];
    let mut inp = inputs(&d, &three, false);
    assert_eq!(run(&inp, &nm), Mc2Error::UnsupportedRankCount { ranks: 3 });
    // M = 0.
    inp = inputs(&d, &ops, false);
    inp.shape.m = 0;
    assert_eq!(run(&inp, &nm), Mc2Error::ZeroDimension { name: "M" });
    // Wrong length.
    inp = inputs(&d, &ops, false);
    inp.shape.k = 4;
    let e = run(&inp, &nm);
    assert!(e.to_string().contains("x1[rank 0]"), "{e}");
    // Off the f16 grid.
    let mut bad = d.x1[1].clone();
    bad[2] = 1.0 + 2.0f32.powi(-20);
    let bad_ops = [
        ops[0],
        RankOperands {
            x1: &bad,
            x2: &d.x2[1],
        },
    ];
    inp = inputs(&d, &bad_ops, false);
    let e = run(&inp, &nm);
    assert!(matches!(e, Mc2Error::OffGrid { index: 2, .. }), "{e}");
    assert!(e.to_string().contains("x1[rank 1][2]"), "{e}");
    // Bias of the wrong length.
    inp = inputs(&d, &ops, false);
    let short_bias = [0.0f32];
    inp.bias = Some(&short_bias);
    assert!(run(&inp, &nm).to_string().contains("bias"));
    // f32 is not an MC2 dtype.
    inp = inputs(&d, &ops, false);
    let f32nm = Mc2Numerics::kernel(DType::F32, ReductionOrder::Ring);
    assert_eq!(
        run(&inp, &f32nm),
        Mc2Error::UnsupportedDType { dtype: "f32" }
    );
    // Tiles and schedules.
    let t = |tiles: &[usize], s: &[usize]| {
        matmul_all_reduce_tiled(&inp, &nm, tiles, s, Threads::ONE).unwrap_err()
    };
    assert!(matches!(t(&[2, 1], &[0, 1]), Mc2Error::BadTiling { .. }));
    assert!(matches!(t(&[4, 0], &[0, 1]), Mc2Error::BadTiling { .. }));
    assert!(matches!(t(&[], &[]), Mc2Error::BadTiling { .. }));
    assert!(matches!(t(&[2, 2], &[0, 0]), Mc2Error::BadSchedule { .. }));
    assert!(matches!(t(&[2, 2], &[0, 2]), Mc2Error::BadSchedule { .. }));
    assert!(matches!(t(&[2, 2], &[0]), Mc2Error::BadSchedule { .. }));
}

#[test]
fn default_epilogue_is_canns_per_rank_formula_with_bias_and_x3_given_to_rank_zero() {
    // CANN documents output = allreduce(x1 @ x2 + bias + x3): each rank adds what it is given
    // to its own product, rounds it to the output dtype, and the ranks' results are summed. A
    // case's one bias and x3 are handed to rank 0 only. Model that literally, one rank at a
    // time (a single-rank call is `round(x1 @ x2 [+ bias + x3])`), sum in rank order in the
    // dtype, and compare with the default numerics bit for bit.
    assert_eq!(
        EpiloguePlacement::default(),
        EpiloguePlacement::IntoRankZero
    );
    for dtype in [DType::F16, DType::Bf16] {
        for ranks in [2, 4, 8] {
            let d = Data::random(
                ranks,
                Mc2Shape::new(9, 24, 11),
                dtype,
                0xB1A5 + ranks as u64,
            );
            let ops = d.ops();
            let nm = Mc2Numerics::kernel(dtype, ReductionOrder::RankOrder);
            assert_eq!(nm.epilogue, EpiloguePlacement::IntoRankZero);
            let got = matmul_all_reduce(&inputs(&d, &ops, true), &nm, Threads::ONE).unwrap();
            let per_rank: Vec<Vec<f32>> = (0..ranks)
                .map(|r| {
                    let one = [ops[r]];
                    let inp = MatmulAllReduceInputs {
                        shape: d.shape,
                        ranks: &one,
                        bias: (r == 0).then_some(&d.bias[..]),
                        x3: (r == 0).then_some(&d.x3[..]),
                    };
                    matmul_all_reduce(&inp, &nm, Threads::ONE).unwrap()
                })
                .collect();
            let want: Vec<f32> = (0..got.len())
                .map(|e| {
                    let mut s = per_rank[0][e];
                    for v in &per_rank[1..] {
                        s = dtype.quantize_f32(s + v[e], Rounding::RNE);
                    }
                    s
                })
                .collect();
            assert_eq!(bits(&got), bits(&want), "{dtype:?} ranks {ranks}");
            // The two other placements are different kernels: on these inputs each differs.
            for other in [
                EpiloguePlacement::AfterReduce,
                EpiloguePlacement::IntoEveryRank,
            ] {
                let nm = Mc2Numerics {
                    epilogue: other,
                    ..nm
                };
                let alt = matmul_all_reduce(&inputs(&d, &ops, true), &nm, Threads::ONE).unwrap();
                assert_ne!(bits(&alt), bits(&want), "{other:?} {dtype:?} ranks {ranks}");
            }
        }
    }
}
