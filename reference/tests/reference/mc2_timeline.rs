//! The two-stream timeline simulator on the seed's worked example and on hand-checked cases.

use crate::mc2_common;

use conform_reference::mc2::{
    plan_split, simulate, simulate_tiles, Inflation, Mc2Error, PlanInputs, PlannerConfig,
};
use mc2_common::{seed_comm, seed_matmul, seed_unsplit};

#[test]
fn seed_example_serial_time_is_1874_us_and_prediction_is_near_the_measured_1262_us() {
    let (mm, cm) = (seed_matmul(), seed_comm());
    let plan = plan_split(
        &PlanInputs {
            m: 4096,
            k: 3072,
            n: 8192,
            element_bytes: 2,
            matmul: &mm,
            comm: &cm,
            unsplit: Some(seed_unsplit()),
        },
        &PlannerConfig::default(),
    )
    .unwrap();
    let tl = simulate_tiles(
        &plan.tiles,
        3072,
        8192,
        2,
        &mm,
        &cm,
        Inflation::default(),
        Some(seed_unsplit()),
    )
    .unwrap();
    assert_eq!(tl.serial_us, 1874.0);
    // By hand: matmul 100.375 us (512 rows) then 175.65625 us per 896 rows; all-reduce
    // CostComm(8 MiB) = 170.188 us then CostComm(14 MiB) = 251.697 us each. The first
    // all-reduce ends (270.56 us) before the second matmul (276.03 us), so the communication
    // stream idles 5.5 us once and then runs back to back.
    let mm0 = 803.0 / 4096.0 * 512.0;
    let mm1 = 803.0 / 4096.0 * 896.0;
    let c0 = 13.58491263 * 8.0 + 61.508333;
    let c1 = 13.58491263 * 14.0 + 61.508333;
    assert!(mm0 + c0 < mm0 + mm1);
    assert_eq!(tl.tiles[1].comm_start_us, mm0 + mm1);
    let expected = mm0 + mm1 + 4.0 * c1;
    approx::assert_abs_diff_eq!(tl.makespan_us, expected, epsilon = 1e-9);
    let measured = 1262.0;
    println!(
        "seed example: serial {} us, predicted fused {:.1} us, measured fused {measured} us, \
         predicted gain {:.1}% vs measured {:.1}%",
        tl.serial_us,
        tl.makespan_us,
        100.0 * tl.gain_fraction,
        100.0 * (1874.0 - measured) / 1874.0
    );
    // The model predicts the measurement to within 2% (1282.8 vs 1262 us).
    approx::assert_abs_diff_eq!(tl.makespan_us, measured, epsilon = 0.02 * measured);
    approx::assert_abs_diff_eq!(tl.gain_us, 1874.0 - tl.makespan_us, epsilon = 1e-9);
    // Tile spans: the matmul stream is contiguous, all-reduce i starts after matmul i.
    for (i, s) in tl.tiles.iter().enumerate() {
        assert!(s.comm_start_us >= s.matmul_end_us);
        if i > 0 {
            assert_eq!(s.matmul_start_us, tl.tiles[i - 1].matmul_end_us);
            assert!(s.comm_start_us >= tl.tiles[i - 1].comm_end_us);
        }
    }
    assert_eq!(
        tl.tiles.iter().map(|s| s.rows).collect::<Vec<_>>(),
        plan.tiles
    );
}

#[test]
fn inflation_applies_only_to_split_operators() {
    let (mm, cm) = (seed_matmul(), seed_comm());
    let infl = Inflation {
        matmul: 1.1,
        comm: 1.15,
    };
    let one = simulate_tiles(&[4096], 3072, 8192, 2, &mm, &cm, infl, None).unwrap();
    assert_eq!(
        one.makespan_us,
        mm.time_us(4096.0, 3072, 8192, 2) + cm.time_us(4096.0, 3072, 8192, 2)
    );
    assert_eq!(one.gain_us, 0.0);
    let plain = simulate_tiles(
        &[2048, 2048],
        3072,
        8192,
        2,
        &mm,
        &cm,
        Inflation::default(),
        None,
    )
    .unwrap();
    let inflated = simulate_tiles(&[2048, 2048], 3072, 8192, 2, &mm, &cm, infl, None).unwrap();
    assert!(inflated.makespan_us > plain.makespan_us);
    let m1 = mm.time_us(2048.0, 3072, 8192, 2) * 1.1;
    let c1 = cm.time_us(2048.0, 3072, 8192, 2) * 1.15;
    approx::assert_abs_diff_eq!(
        inflated.makespan_us,
        (m1 + 2.0 * c1).max(2.0 * m1 + c1),
        epsilon = 1e-9
    );
}

#[test]
fn compute_bound_stream_waits_for_the_matmul() {
    // Matmul 10 us per tile, all-reduce 3 us: the all-reduce stream idles between tiles.
    let tl = simulate(&[1, 1, 1], &[10.0, 10.0, 10.0], &[3.0, 3.0, 3.0], 39.0).unwrap();
    assert_eq!(tl.makespan_us, 33.0);
    assert_eq!(
        tl.tiles.iter().map(|s| s.comm_start_us).collect::<Vec<_>>(),
        vec![10.0, 20.0, 30.0]
    );
    assert_eq!(tl.gain_us, 6.0);
    // Splitting can lose: a negative gain.
    let tl = simulate(&[1, 1], &[10.0, 10.0], &[3.0, 3.0], 20.0).unwrap();
    assert!(tl.gain_us < 0.0);
}

#[test]
fn bad_timeline_inputs_are_typed_errors() {
    assert!(matches!(
        simulate(&[], &[], &[], 0.0),
        Err(Mc2Error::ZeroDimension { .. })
    ));
    assert!(matches!(
        simulate(&[1, 1], &[1.0], &[1.0, 1.0], 0.0),
        Err(Mc2Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        simulate(&[1], &[-1.0], &[1.0], 0.0),
        Err(Mc2Error::InvalidParameter { .. })
    ));
    let (mm, cm) = (seed_matmul(), seed_comm());
    let bad = Inflation {
        matmul: 0.0,
        comm: 1.0,
    };
    assert!(matches!(
        simulate_tiles(&[128, 128], 1, 1, 2, &mm, &cm, bad, None),
        Err(Mc2Error::InvalidParameter { .. })
    ));
}
