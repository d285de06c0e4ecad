//! AllGatherMatmul and MatmulReduceScatter: cross-checked against MatmulAllReduce and a
//! single-rank matmul, with the same numerics parameters.

use crate::mc2_common;

use conform_reference::formats::DType;
use conform_reference::mc2::{
    all_gather_matmul, matmul_all_reduce, matmul_reduce_scatter, AllGatherMatmulInputs,
    MatmulAllReduceInputs, MatmulReduceScatterInputs, Mc2Error, Mc2Numerics, Mc2Shape,
    RankOperands, ReductionOrder,
};
use conform_reference::parallel::Threads;
use mc2_common::SplitMix;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn numerics(dtype: DType) -> Vec<Mc2Numerics> {
    let mut v: Vec<Mc2Numerics> = ReductionOrder::ALL
        .iter()
        .map(|&o| Mc2Numerics::kernel(dtype, o))
        .collect();
    v.push(Mc2Numerics::high_precision(dtype));
    v
}

#[test]
fn reduce_scatter_blocks_are_the_all_reduce_rows_of_each_rank() {
    for dtype in [DType::F16, DType::Bf16] {
        for ranks in [1usize, 2, 4, 8] {
            let (m, k, n) = (8 * 3, 45, 10);
            let mut rng = SplitMix::new(ranks as u64);
            let x1: Vec<Vec<f32>> = (0..ranks)
                .map(|_| mc2_common::tensor(&mut rng, m * k, dtype))
                .collect();
            let x2: Vec<Vec<f32>> = (0..ranks)
                .map(|_| mc2_common::tensor(&mut rng, k * n, dtype))
                .collect();
            let bias = mc2_common::tensor(&mut rng, n, dtype);
            let ops: Vec<RankOperands<'_>> = x1
                .iter()
                .zip(&x2)
                .map(|(x1, x2)| RankOperands { x1, x2 })
                .collect();
            for nm in numerics(dtype) {
                let shape = Mc2Shape::new(m, k, n);
                let rs = matmul_reduce_scatter(
                    &MatmulReduceScatterInputs {
                        shape,
                        ranks: &ops,
                        bias: Some(&bias),
                    },
                    &nm,
                    Threads(2),
                )
                .unwrap();
                let ar = matmul_all_reduce(
                    &MatmulAllReduceInputs {
                        shape,
                        ranks: &ops,
                        bias: Some(&bias),
                        x3: None,
                    },
                    &nm,
                    Threads::ONE,
                )
                .unwrap();
                assert_eq!(rs.len(), ranks);
                let block = m / ranks * n;
                for (r, out) in rs.iter().enumerate() {
                    assert_eq!(bits(out), bits(&ar[r * block..(r + 1) * block]));
                }
            }
        }
    }
}

#[test]
fn reduce_scatter_needs_m_divisible_by_the_rank_count() {
    let x = vec![0.0f32; 6];
    let ops = [RankOperands { x1: &x, x2: &x }; 4];
    let err = matmul_reduce_scatter(
        &MatmulReduceScatterInputs {
            shape: Mc2Shape::new(6, 1, 6),
            ranks: &ops,
            bias: None,
        },
        &Mc2Numerics::high_precision(DType::F16),
        Threads::ONE,
    )
    .unwrap_err();
    assert_eq!(
        err,
        Mc2Error::NotDivisibleByRanks {
            name: "M",
            value: 6,
            ranks: 4
        }
    );
}

#[test]
fn all_gather_matmul_is_the_gathered_activation_times_each_ranks_weight() {
    for dtype in [DType::F16, DType::Bf16] {
        let (ranks, m, k, n) = (4usize, 5, 37, 9);
        let mut rng = SplitMix::new(42);
        let x1: Vec<Vec<f32>> = (0..ranks)
            .map(|_| mc2_common::tensor(&mut rng, m * k, dtype))
            .collect();
        let x2: Vec<Vec<f32>> = (0..ranks)
            .map(|_| mc2_common::tensor(&mut rng, k * n, dtype))
            .collect();
        let bias = mc2_common::tensor(&mut rng, n, dtype);
        let ops: Vec<RankOperands<'_>> = x1
            .iter()
            .zip(&x2)
            .map(|(x1, x2)| RankOperands { x1, x2 })
            .collect();
        let gathered: Vec<f32> = x1.concat();
        for nm in numerics(dtype) {
            let out = all_gather_matmul(
                &AllGatherMatmulInputs {
                    shape: Mc2Shape::new(m, k, n),
                    ranks: &ops,
                    bias: Some(&bias),
                },
                &nm,
                Threads(7),
            )
            .unwrap();
            assert_eq!(bits(&out.gathered_x1), bits(&gathered));
            for (r, o) in out.outputs.iter().enumerate() {
                // One rank, no reduction: the bias enters the single rounding.
                let single = [RankOperands {
                    x1: &gathered,
                    x2: &x2[r],
                }];
                let want = matmul_all_reduce(
                    &MatmulAllReduceInputs {
                        shape: Mc2Shape::new(ranks * m, k, n),
                        ranks: &single,
                        bias: Some(&bias),
                        x3: None,
                    },
                    &Mc2Numerics::high_precision(dtype),
                    Threads::ONE,
                )
                .unwrap();
                assert_eq!(bits(o), bits(&want), "{dtype:?} rank {r} {nm:?}");
            }
        }
    }
}

#[test]
fn all_gather_matmul_rejects_bad_inputs() {
    let x = vec![0.5f32; 4];
    let ops = [RankOperands { x1: &x, x2: &x }; 2];
    let nm = Mc2Numerics::kernel(DType::Bf16, ReductionOrder::Ring);
    let run = |shape: Mc2Shape, nm: &Mc2Numerics| {
        all_gather_matmul(
            &AllGatherMatmulInputs {
                shape,
                ranks: &ops,
                bias: None,
            },
            nm,
            Threads::ONE,
        )
    };
    assert!(run(Mc2Shape::new(2, 2, 2), &nm).is_ok());
    assert!(matches!(
        run(Mc2Shape::new(2, 3, 2), &nm),
        Err(Mc2Error::ShapeMismatch { .. })
    ));
    assert_eq!(
        run(Mc2Shape::new(0, 2, 2), &nm).unwrap_err(),
        Mc2Error::ZeroDimension { name: "M" }
    );
    let f32nm = Mc2Numerics::high_precision(DType::F32);
    assert!(matches!(
        run(Mc2Shape::new(2, 2, 2), &f32nm),
        Err(Mc2Error::UnsupportedDType { .. })
    ));
}
