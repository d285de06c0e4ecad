//! Process CPU time: what a CPU kernel did, beside the wall clock that other jobs on the
//! machine stretch. `CLOCK_PROCESS_CPUTIME_ID` sums every thread of the process (nanosecond
//! resolution on Linux), so a multi-threaded kernel's figure is its total work, not its
//! latency. Other load on the machine leaves it nearly unchanged (it still moves with cache
//! sharing and frequency scaling); a kernel that waits (I/O, a device) shows little of its time
//! here, so device targets keep the wall clock (docs/perf.md, "wall or CPU time").

/// The CPU time this process has used so far, in microseconds; `None` where the platform
/// cannot say.
pub fn process_cpu_us() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work_and_never_goes_back() {
        let a = process_cpu_us().expect("Linux has a process CPU clock");
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = process_cpu_us().unwrap();
        assert!(b > a, "{a} -> {b}");
    }
}
