//! Roofline figures of a timing: achieved throughput, the roofline floor (the least time the
//! hardware profile allows for the work) and the fraction of that ceiling reached. A time
//! below the floor is physically impossible on that hardware: a broken or cheating timer, or
//! work that was skipped.

use super::error::PerfError;
use super::hardware::HardwareProfile;

pub use conform_metadata::perf::{Bound, Roofline, Work};

/// Roofline figures of `work` done in `time_us` on `profile`, compute ceiling of `dtype`.
pub fn roofline(
    work: Work,
    time_us: f64,
    profile: &HardwareProfile,
    dtype: &str,
) -> Result<Roofline, PerfError> {
    let bad = |field, problem: String| Err(PerfError::InvalidArgument { field, problem });
    if !(time_us.is_finite() && time_us > 0.0) {
        return bad("time_us", format!("{time_us} is not a finite time > 0"));
    }
    if !(work.flops.is_finite() && work.flops >= 0.0) {
        return bad(
            "flops",
            format!("{} is not a finite count >= 0", work.flops),
        );
    }
    if !(work.bytes.is_finite() && work.bytes >= 0.0) {
        return bad(
            "bytes",
            format!("{} is not a finite count >= 0", work.bytes),
        );
    }
    let peak_flops = profile.peak_flops(dtype)?;
    let compute_us = work.flops / peak_flops * 1e6;
    // without a bandwidth figure the memory floor is unknown: 0 keeps the floor a true bound
    let memory_us = profile
        .memory_bandwidth_gbps
        .map_or(0.0, |gbps| work.bytes / (gbps * 1e9) * 1e6);
    let (floor_us, bound) = if compute_us >= memory_us {
        (compute_us, Bound::Compute)
    } else {
        (memory_us, Bound::Memory)
    };
    let seconds = time_us * 1e-6;
    Ok(Roofline {
        hardware: profile.id.clone(),
        dtype: dtype.to_string(),
        time_us,
        achieved_tflops: work.flops / seconds / 1e12,
        achieved_gbps: work.bytes / seconds / 1e9,
        floor_us,
        bound,
        fraction_of_peak: floor_us / time_us,
        implausible: time_us < floor_us,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn profile() -> HardwareProfile {
        HardwareProfile::from_toml(
            r#"
id = "p"
name = "P"
kind = "npu"
scope = "one chip"
memory_bandwidth_gbps = 1000.0
[peak_tflops]
f16 = 100.0
[provenance]
kind = "measured"
method = "test"
"#,
            Path::new("p.toml"),
        )
        .unwrap()
    }

    #[test]
    fn compute_bound_figures_match_hand_computation() {
        // 2e9 flops at 100 TFLOP/s = 20 us; 1e6 bytes at 1000 GB/s = 1 us -> compute bound
        let r = roofline(
            Work {
                flops: 2e9,
                bytes: 1e6,
            },
            40.0,
            &profile(),
            "f16",
        )
        .unwrap();
        assert_eq!(r.bound, Bound::Compute);
        approx::assert_abs_diff_eq!(r.floor_us, 20.0, epsilon = 1e-12);
        approx::assert_abs_diff_eq!(r.fraction_of_peak, 0.5, epsilon = 1e-12);
        approx::assert_abs_diff_eq!(r.achieved_tflops, 50.0, epsilon = 1e-9);
        approx::assert_abs_diff_eq!(r.achieved_gbps, 25.0, epsilon = 1e-9);
        assert!(!r.implausible);
    }

    #[test]
    fn memory_bound_and_implausible_times() {
        // 1e8 bytes at 1e12 B/s = 100 us floor; 80 us is impossible
        let r = roofline(
            Work {
                flops: 1e6,
                bytes: 1e8,
            },
            80.0,
            &profile(),
            "f16",
        )
        .unwrap();
        assert_eq!(r.bound, Bound::Memory);
        approx::assert_abs_diff_eq!(r.floor_us, 100.0, epsilon = 1e-9);
        assert!(r.implausible);
        assert!(r.fraction_of_peak > 1.0);
    }

    #[test]
    fn bad_arguments_are_named() {
        let e = roofline(
            Work {
                flops: 1.0,
                bytes: 1.0,
            },
            0.0,
            &profile(),
            "f16",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("time_us"));
        let e = roofline(
            Work {
                flops: 1.0,
                bytes: 1.0,
            },
            1.0,
            &profile(),
            "int4",
        )
        .unwrap_err();
        assert!(e.to_string().contains("int4"));
    }
}
