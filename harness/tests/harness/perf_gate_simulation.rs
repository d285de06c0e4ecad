//! Calibration of the regression gate by simulation (issue 7).
//!
//! Samples with a known shift and noise, from a deterministic generator: 30 samples a side,
//! 3% coefficient of variation (normal noise), threshold 0, the default gate configuration.
//! - power: a 3% slowdown must be flagged REGRESSION in at least 90% of trials;
//! - false alarms: an A/A comparison (no shift) may raise REGRESSION in at most 1% of trials,
//!   also when 5% of the samples are 3x spikes.
//!
//! A test fails when the simulated rate is significantly (3 standard errors) on the wrong side
//! of its requirement; see `SIGMAS` for why not on the point estimate.
//!
//! Release builds run enough trials for the rates to be meaningful (the standard error is
//! printed with each rate); debug builds run a small sample with loose bounds, as a smoke
//! test only. The measured rates are recorded in docs/perf.md.

use crate::rate;
use conform_harness::perf::case_rng::CaseRng;
use conform_harness::perf::{compare_samples, GateConfig, Verdict};
use rate::Rate;

const N: usize = 30;
const CV: f64 = 0.03;

#[cfg(not(debug_assertions))]
const TRIALS_AA: usize = 100_000;
#[cfg(not(debug_assertions))]
const TRIALS_POWER: usize = 40_000;
#[cfg(debug_assertions)]
const TRIALS_AA: usize = 300;
#[cfg(debug_assertions)]
const TRIALS_POWER: usize = 300;

/// Standard normal by Box-Muller from the counter-based generator.
fn normal(r: &mut CaseRng) -> f64 {
    let u1 = 1.0 - r.unit(); // (0, 1]
    let u2 = r.unit();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// `n` samples around `scale` with CV 3%; each sample is a 3x spike with probability `spike`.
fn draw(r: &mut CaseRng, scale: f64, spike: f64) -> Vec<f64> {
    (0..N)
        .map(|_| {
            let x = scale * (1.0 + CV * normal(r));
            if spike > 0.0 && r.unit() < spike {
                3.0 * x
            } else {
                x
            }
        })
        .collect()
}

/// Fraction of trials whose verdict is REGRESSION. Trial `i` draws its data from the stream
/// keyed `scenario/i` and the gate seeds its bootstrap from its own key, so the result does
/// not depend on the number of threads.
fn regression_rate(scenario: &str, shift: f64, spike: f64, trials: usize) -> Rate {
    let cfg = GateConfig::with_threshold(0.0).unwrap();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let hits: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    (t..trials)
                        .step_by(threads)
                        .filter(|i| {
                            let mut r =
                                CaseRng::for_key(&format!("gate-simulation/{scenario}/{i}"));
                            let baseline = draw(&mut r, 100.0, spike);
                            let candidate = draw(&mut r, 100.0 * shift, spike);
                            compare_samples(&baseline, &candidate, &cfg).verdict
                                == Verdict::Regression
                        })
                        .count()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let rate = Rate { hits, trials };
    println!(
        "{scenario}: REGRESSION in {hits} of {trials} trials = {:.2}% (standard error {:.2}%)",
        100.0 * rate.value(),
        100.0 * rate.std_error()
    );
    rate
}

/// The requirement: power >= 90% for a 3% slowdown, with and without spikes.
const POWER_MIN: f64 = 0.90;
/// The requirement: A/A false alarms <= 1%, with and without spikes.
const FALSE_ALARM_MAX: f64 = 0.01;
/// How many standard errors a measured rate may sit on the wrong side of the requirement
/// before the test fails. A Monte Carlo rate is an estimate: the gate's true false-alarm rate
/// is its nominal 1% (Welch's t at alpha = 0.01), so a bound of exactly 1% on the estimate
/// would pass or fail with the generator's stream, not with the gate. The test fails when the
/// simulation shows the gate significantly worse than the requirement (a 3-sigma excess,
/// about 1 in 700 by chance); the measured rates and their standard errors are printed and
/// recorded in docs/perf.md.
/// (Debug builds run a few hundred trials only: a smoke test under the same rule.)
const SIGMAS: f64 = 3.0;

fn assert_power(r: &Rate) {
    assert!(
        r.value() + SIGMAS * r.std_error() >= POWER_MIN,
        "power {:.4} (standard error {:.4}) is significantly below {POWER_MIN}",
        r.value(),
        r.std_error()
    );
}

fn assert_false_alarms(r: &Rate) {
    assert!(
        r.value() - SIGMAS * r.std_error() <= FALSE_ALARM_MAX,
        "false alarms {:.4} (standard error {:.4}) are significantly above {FALSE_ALARM_MAX}",
        r.value(),
        r.std_error()
    );
}

#[test]
fn a_three_percent_slowdown_is_flagged_in_at_least_90_percent_of_trials() {
    assert_power(&regression_rate("slowdown-3pct", 1.03, 0.0, TRIALS_POWER));
}

#[test]
fn a_a_comparisons_raise_at_most_1_percent_false_regressions() {
    assert_false_alarms(&regression_rate("a-a", 1.0, 0.0, TRIALS_AA));
}

#[test]
fn a_a_comparisons_with_5_percent_3x_spikes_raise_at_most_1_percent() {
    assert_false_alarms(&regression_rate("a-a-spikes", 1.0, 0.05, TRIALS_AA));
}

#[test]
fn a_three_percent_slowdown_with_5_percent_3x_spikes_is_flagged_in_about_90_percent() {
    // Spikes are fenced out before anything is estimated, so they cost only the samples they
    // replace (about 1.5 of 30 a side): the power is that of Welch's t at n = 28.5, which
    // sits at the statistical frontier of 90% at 1% false alarms (docs/perf.md).
    assert_power(&regression_rate(
        "slowdown-3pct-spikes",
        1.03,
        0.05,
        TRIALS_POWER,
    ));
}
