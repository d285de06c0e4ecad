//! The seed-000 split planner: the worked-example golden, the documented min-vs-max
//! discrepancy, bad input, and the tiling invariants (proptest).

use crate::mc2_common;

use conform_reference::mc2::{
    plan_split, AxisCost, Bound, CostAxis, Mc2Error, PiecewiseCost, PlanInputs, PlannerConfig,
    Polynomial, ShortTileBounds, ShortTileRule,
};
use mc2_common::{seed_comm, seed_matmul, seed_unsplit};
use proptest::prelude::*;

fn seed_inputs<'a>(matmul: &'a AxisCost, comm: &'a AxisCost) -> PlanInputs<'a> {
    PlanInputs {
        m: 4096,
        k: 3072,
        n: 8192,
        element_bytes: 2,
        matmul,
        comm,
        unsplit: Some(seed_unsplit()),
    }
}

#[test]
fn seed_worked_example_plans_512_then_four_896_communication_bound() {
    let (mm, cm) = (seed_matmul(), seed_comm());
    let plan = plan_split(&seed_inputs(&mm, &cm), &PlannerConfig::default()).unwrap();
    assert_eq!(plan.bound, Bound::Communication);
    assert_eq!(plan.tiles, vec![512, 896, 896, 896, 896]);
    // The intermediate figures of the seed's steps 1-5.
    assert_eq!(
        plan.short_tile_bounds,
        ShortTileBounds {
            a: 171,
            b: 192,
            c: 384
        }
    );
    assert_eq!(plan.initial_short_tile, 384);
    // CostComm(6 MiB) = 142.23 us ("143"), x 1.15 = 163.56 us ("164").
    let comm6 = -0.9698202 * 36.0 + 27.0622573 * 6.0 + 14.769;
    approx::assert_abs_diff_eq!(plan.long_tile_budget_us, comm6 * 1.15, epsilon = 1e-9);
    approx::assert_abs_diff_eq!(plan.long_tile_budget_us, 163.56, epsilon = 0.01);
    assert_eq!(plan.initial_long_tile, 768);
    assert_eq!(plan.long_count, 4);
    assert_eq!(plan.long_tile, 896);
    assert_eq!(plan.short_tile, 512);
}

#[test]
fn seed_example_without_measured_times_is_still_communication_bound() {
    // The cost models alone give 803 us vs CostComm(64 MiB) = 930.9 us.
    let (mm, cm) = (seed_matmul(), seed_comm());
    let mut inputs = seed_inputs(&mm, &cm);
    inputs.unsplit = None;
    let plan = plan_split(&inputs, &PlannerConfig::default()).unwrap();
    approx::assert_abs_diff_eq!(
        plan.unsplit.comm_us,
        13.58491263 * 64.0 + 61.508333,
        epsilon = 1e-9
    );
    assert_eq!(plan.bound, Bound::Communication);
    assert_eq!(plan.tiles, vec![512, 896, 896, 896, 896]);
}

#[test]
fn seed_text_min_rule_does_not_reproduce_the_worked_example() {
    // The discrepancy documented in planner.rs and docs/mc2.md: min(a, b, c) = 171.
    let (mm, cm) = (seed_matmul(), seed_comm());
    let config = PlannerConfig {
        short_tile_rule: ShortTileRule::SeedTextMin,
        ..PlannerConfig::default()
    };
    let plan = plan_split(&seed_inputs(&mm, &cm), &config).unwrap();
    assert_eq!(plan.initial_short_tile, 171);
    assert_ne!(plan.tiles, vec![512, 896, 896, 896, 896]);
    // CostComm(171 rows) * 1.15 = 92.2 us -> m1 = 470 -> 384; n = 10; m1 = 384; m0 = 256.
    assert_eq!(plan.tiles[0], 256);
    assert_eq!(&plan.tiles[1..], &[384; 10]);
}

#[test]
fn m_zero_is_a_typed_error() {
    let (mm, cm) = (seed_matmul(), seed_comm());
    let mut inputs = seed_inputs(&mm, &cm);
    inputs.m = 0;
    assert_eq!(
        plan_split(&inputs, &PlannerConfig::default()),
        Err(Mc2Error::ZeroDimension { name: "M" })
    );
    inputs.m = 4096;
    inputs.n = 0;
    assert_eq!(
        plan_split(&inputs, &PlannerConfig::default()),
        Err(Mc2Error::ZeroDimension { name: "N" })
    );
}

#[test]
fn bad_planner_parameters_are_typed_errors() {
    let (mm, cm) = (seed_matmul(), seed_comm());
    let inputs = seed_inputs(&mm, &cm);
    for config in [
        PlannerConfig {
            alignment: 0,
            ..PlannerConfig::default()
        },
        PlannerConfig {
            contention: f64::NAN,
            ..PlannerConfig::default()
        },
        PlannerConfig {
            max_tiles: 0,
            ..PlannerConfig::default()
        },
    ] {
        assert!(matches!(
            plan_split(&inputs, &config),
            Err(Mc2Error::InvalidParameter { .. })
        ));
    }
}

#[test]
fn no_split_below_twice_the_minimum_tile_or_with_k_zero() {
    let (mm, cm) = (seed_matmul(), seed_comm());
    let mut inputs = seed_inputs(&mm, &cm);
    inputs.m = 767; // 2 * 384 - 1
    let plan = plan_split(&inputs, &PlannerConfig::default()).unwrap();
    assert_eq!(plan.tiles, vec![767]);
    assert!(!plan.split);
    inputs.m = 768;
    let plan = plan_split(&inputs, &PlannerConfig::default()).unwrap();
    assert!(plan.split);
    assert_eq!(plan.tiles.iter().sum::<u64>(), 768);
    inputs.k = 0;
    let plan = plan_split(&inputs, &PlannerConfig::default()).unwrap();
    assert_eq!(plan.tiles, vec![768]);
}

#[test]
fn compute_bound_puts_the_short_tile_last() {
    // A matmul 4x slower per row than the seed's makes the shape compute-bound.
    let mm = AxisCost::new(
        CostAxis::Rows,
        PiecewiseCost::single(
            "matmul",
            Polynomial::Linear {
                slope: 4.0 * 803.0 / 4096.0,
                intercept: 0.0,
            },
        )
        .unwrap(),
    );
    let cm = seed_comm();
    let mut inputs = seed_inputs(&mm, &cm);
    inputs.unsplit = None;
    let plan = plan_split(&inputs, &PlannerConfig::default()).unwrap();
    assert_eq!(plan.bound, Bound::Compute);
    let (last, long) = plan.tiles.split_last().unwrap();
    assert!(long.iter().all(|&t| t == long[0] && t % 128 == 0));
    assert_eq!(*last, plan.short_tile);
    // m1 = CostComm^-1(CostMM(384) / 1.15) = rows whose all-reduce takes 261.8 us.
    let budget = 4.0 * 803.0 / 4096.0 * 384.0 / 1.15;
    approx::assert_abs_diff_eq!(plan.long_tile_budget_us, budget, epsilon = 1e-9);
    let x = (budget - 61.508333) / 13.58491263; // MiB, on the linear segment
    let rows = x * 1_048_576.0 / (8192.0 * 2.0);
    approx::assert_abs_diff_eq!(plan.long_tile_unaligned, rows, epsilon = 1e-6);
    assert_eq!(plan.initial_long_tile, (rows as u64) / 128 * 128);
}

fn linear_rows(name: &str, slope: f64, intercept: f64) -> AxisCost {
    AxisCost::new(
        CostAxis::Rows,
        PiecewiseCost::single(name, Polynomial::Linear { slope, intercept }).unwrap(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(debug_assertions) { 256 } else { 4096 }))]

    #[test]
    fn plan_invariants_hold(
        m in 1u64..200_000,
        k in 0u64..20_000,
        n in 1u64..20_000,
        mm_slope in 0.001f64..2.0,
        mm_icpt in 0.0f64..50.0,
        use_seed_comm in any::<bool>(),
        comm_slope in 0.001f64..2.0,
        measured in any::<bool>(),
        mm_measured in 1.0f64..5000.0,
        comm_measured in 1.0f64..5000.0,
    ) {
        let mm = linear_rows("matmul", mm_slope, mm_icpt);
        let cm = if use_seed_comm { seed_comm() } else { linear_rows("comm", comm_slope, 10.0) };
        let inputs = PlanInputs {
            m, k, n, element_bytes: 2, matmul: &mm, comm: &cm,
            unsplit: measured.then_some(conform_reference::mc2::UnsplitTimes {
                matmul_us: mm_measured, comm_us: comm_measured,
            }),
        };
        let config = PlannerConfig::default();
        let plan = plan_split(&inputs, &config).unwrap();
        let tiles = &plan.tiles;
        prop_assert_eq!(tiles.iter().sum::<u64>(), m);
        prop_assert!(tiles.iter().all(|&t| t > 0));
        prop_assert!(tiles.len() as u64 <= config.max_tiles);
        let expected_bound = if plan.unsplit.comm_us > plan.unsplit.matmul_us {
            Bound::Communication
        } else {
            Bound::Compute
        };
        prop_assert_eq!(plan.bound, expected_bound);
        let m0 = ShortTileBounds::for_shape(k, n, &config).short_tile(config.short_tile_rule);
        if (m as u128) < 2 * m0 as u128 || k == 0 {
            prop_assert_eq!(tiles, &vec![m]);
        }
        if tiles.len() > 1 {
            prop_assert!(plan.split);
            let (short, long) = match plan.bound {
                Bound::Communication => (tiles[0], &tiles[1..]),
                Bound::Compute => (tiles[tiles.len() - 1], &tiles[..tiles.len() - 1]),
            };
            prop_assert!(long.iter().all(|&t| t == long[0] && t % 128 == 0));
            prop_assert_eq!(short, plan.short_tile);
            prop_assert!(short >= m0, "short tile {} below the minimum {}", short, m0);
        }
    }
}
