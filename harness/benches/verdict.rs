//! Verdict throughput: 100 M bf16 elements under the ulp and CANN policies (the figure in
//! docs/PERFORMANCE.md, "Harness: verdicts"). Set CONFORM_BENCH_ELEMS to change the size and
//! CONFORM_BENCH_THREADS the thread count (default 1: the target is per core).
//!
//! With one thread the time measured is the benchmark thread's on-CPU time (Linux
//! `/proc/thread-self/schedstat`), so a machine shared with other work still gives the cost
//! per core; set CONFORM_BENCH_CLOCK=wall for wall time (always used with several threads).

use conform_harness::verdict::{evaluate, policies, CannLevel, CheckPolicy, Comparison};
use conform_reference::ops::{ElemType, Tensor, TensorSpec};
use conform_reference::parallel::Threads;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Nanoseconds this thread has spent on a CPU, where the kernel reports it.
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Runs `f` `iters` times and returns the time taken on `cpu` or the wall clock.
fn timed<F: FnMut()>(iters: u64, cpu: bool, mut f: F) -> Duration {
    let (c0, w0) = (thread_cpu_ns(), Instant::now());
    for _ in 0..iters {
        f();
    }
    match (cpu, c0, thread_cpu_ns()) {
        (true, Some(a), Some(b)) => Duration::from_nanos(b - a),
        _ => w0.elapsed(),
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn bench(c: &mut Criterion) {
    let n = env_usize("CONFORM_BENCH_ELEMS", 100_000_000);
    let threads = Threads(env_usize("CONFORM_BENCH_THREADS", 1));
    let cpu_clock = threads.0 == 1
        && std::env::var("CONFORM_BENCH_CLOCK").as_deref() != Ok("wall")
        && thread_cpu_ns().is_some();
    eprintln!(
        "verdict bench: {} thread(s), {} clock",
        threads.0,
        if cpu_clock { "thread on-CPU" } else { "wall" }
    );
    // Shape with s and n axes so the heatmap is part of the cost.
    let d = 128;
    let heads = 32;
    let s = n / (d * heads);
    let shape = vec![1, s, heads, d];
    let n = s * heads * d;
    let mut exp = Vec::with_capacity(n);
    let mut act = Vec::with_capacity(n);
    let mut base = Vec::with_capacity(n);
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Values in [1, 2) and [-2, -1): bf16 0x3F80..0x3FFF with a random sign.
        let e = 0x3F80 | (x & 0x7F) as u16 | (((x >> 8) & 1) as u16) << 15;
        exp.push(e);
        act.push(e ^ ((x >> 9) & 1) as u16);
        base.push(e ^ ((x >> 10) & 1) as u16);
    }
    let spec = TensorSpec::new("out", ElemType::Bf16, shape.clone(), &["b", "s", "n", "d"]);
    let a = Tensor::from_bits16(ElemType::Bf16, shape.clone(), &act);
    let e = Tensor::from_bits16(ElemType::Bf16, shape.clone(), &exp);
    let b = Tensor::from_bits16(ElemType::Bf16, shape, &base);
    drop((act, exp, base));
    let poison = [0x7FA5u64];
    let cmp = Comparison::new(&spec, &a, &e).with_poison(&poison);
    // The double benchmark reads the expected tensor as the high-precision golden here (the
    // oracle slot takes any tensor of the output dtype), so the bench stays within memory.
    let cmp_double = cmp.with_oracle(&e).with_baseline(&b);
    // An F64 oracle: every element differs from it, so no exact-element fast path.
    let oracle_values: Vec<f64> = e
        .to_f64_vec()
        .iter()
        .zip(0u64..)
        .map(|(&v, i)| v * (1.0 + ((i % 7) as f64 - 3.0) * 1e-4))
        .collect();
    let o = Tensor::of_f64(e.shape.clone(), &oracle_values);
    drop(oracle_values);
    let cmp_oracle = cmp.with_oracle(&o).with_baseline(&b);

    let mut g = c.benchmark_group("verdict_bf16");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(10));
    let policies = [
        ("ulp", CheckPolicy::from(policies::Ulp { max: 1 }), cmp),
        (
            "cann_single",
            CheckPolicy::from(policies::CannSingle {}),
            cmp,
        ),
        ("cann_mixed", CheckPolicy::from(policies::CannMixed {}), cmp),
        (
            "cann_double_L1",
            CheckPolicy::from(policies::CannDouble {
                level: CannLevel::L1,
            }),
            cmp_double,
        ),
        (
            "cann_single_vs_f64_oracle",
            CheckPolicy::from(policies::CannSingle {}),
            cmp_oracle,
        ),
        (
            "cann_double_L1_vs_f64_oracle",
            CheckPolicy::from(policies::CannDouble {
                level: CannLevel::L1,
            }),
            cmp_oracle,
        ),
    ];
    for (name, policy, cmp) in policies {
        g.bench_function(format!("{name}/{n}"), |bch| {
            bch.iter_custom(|iters| {
                timed(iters, cpu_clock, || {
                    black_box(evaluate(&policy, &cmp, threads).unwrap());
                })
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
