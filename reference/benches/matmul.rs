//! Matmul-family reference benchmarks (docs/PERFORMANCE.md, "Reference: matmul family"), each
//! beside numpy's `float32` matmul (OpenBLAS sgemm) on the same shape, measured in the same run:
//! - `lanes16/*`: the recipes' fixed-order f32 products (16 lane accumulators per output, no
//!   FMA) on an MC2 rank's shape (DeepSeek-V3 o_proj, M128 K2048 N7168), the W4A16 shape after
//!   dequantisation (Llama-3-8B down_proj, M32 K14336 N4096) and a seed-000 MC2 rank's shape
//!   cut to 512 rows (M512 K3072 N8192);
//! - `oracle_f64/*`: the oracle's sequential f64 sums on the same shapes.
//!
//! The anchor needs a Python with numpy: `CONFORM_BENCH_PYTHON`, else `.venv/bin/python` at the
//! workspace root (`bash ci/setup-targets.sh` makes it); without one the anchor line says so.
//! `CONFORM_BENCH_ANCHOR_ONLY=1` prints only that table. All use the machine's available parallelism; the figures (GFLOP/s = 2 M N K / time) are
//! printed at the end.

use conform_reference::gemm::{matmul_lanes16, matmul_sequential_f64, BLayout};
use conform_reference::parallel::Threads;
use criterion::Criterion;
use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const SHAPES: [(&str, usize, usize, usize); 3] = [
    (
        "mc2_deepseek_v3_o_proj_rank_m128_k2048_n7168",
        128,
        2048,
        7168,
    ),
    ("w4a16_llama3_8b_down_m32_k14336_n4096", 32, 14336, 4096),
    ("mc2_seed000_rank_m512_k3072_n8192", 512, 3072, 8192),
];

fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut g = conform_reference::splitmix::SplitMix64::new(seed);
    // bf16-representable values in [-1, 1).
    (0..len)
        .map(|_| f32::from_bits(g.sym_f32().to_bits() & 0xFFFF_0000))
        .collect()
}

fn gflops(m: usize, k: usize, n: usize, secs: f64) -> f64 {
    2.0 * (m * k * n) as f64 / secs / 1e9
}

/// Median seconds of `f` over a few runs (the figures printed beside the anchor).
fn median_secs(mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..5)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[2]
}

fn python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CONFORM_BENCH_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    venv.exists().then_some(venv)
}

/// numpy's float32 matmul on `[m, k] x [k, n]` (median of 5 after one warm-up), in seconds.
fn numpy_sgemm(py: &PathBuf, m: usize, k: usize, n: usize) -> Result<f64, String> {
    let script = format!(
        "import numpy as np, time\n\
         a = np.random.default_rng(1).standard_normal(({m}, {k}), dtype=np.float32)\n\
         b = np.random.default_rng(2).standard_normal(({k}, {n}), dtype=np.float32)\n\
         a @ b\n\
         t = []\n\
         for _ in range(5):\n\
         \x20   s = time.perf_counter(); a @ b; t.append(time.perf_counter() - s)\n\
         print(sorted(t)[2])\n"
    );
    let out = Command::new(py)
        .args(["-c", &script])
        .output()
        .map_err(|e| format!("{}: {e}", py.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|e| format!("numpy printed no time: {e}"))
}

fn bench(c: &mut Criterion) {
    let threads = Threads::available();
    let mut group = c.benchmark_group("matmul");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(6));
    for (name, m, k, n) in SHAPES {
        let a = values(m * k, 1);
        let bt = values(n * k, 2);
        let b = values(k * n, 3);
        group.bench_function(format!("lanes16/{name}"), |bn| {
            bn.iter(|| black_box(matmul_lanes16(&a, &bt, m, n, k, threads)))
        });
        group.bench_function(format!("oracle_f64/{name}"), |bn| {
            bn.iter(|| {
                black_box(matmul_sequential_f64(
                    &a,
                    &b,
                    BLayout::KByN,
                    m,
                    n,
                    k,
                    threads,
                ))
            })
        });
    }
    group.finish();
}

fn anchor_table() {
    let threads = Threads::available();
    let py = python();
    println!(
        "\nmatmul family, {} threads, vector forms: {} (GFLOP/s = 2 M N K / median time)",
        threads.0,
        conform_reference::cpu::description()
    );
    println!(
        "{:<48} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "shape", "lanes16", "oracle", "numpy", "l16/np", "orc/np"
    );
    for (name, m, k, n) in SHAPES {
        let a = values(m * k, 1);
        let bt = values(n * k, 2);
        let b = values(k * n, 3);
        let l = gflops(
            m,
            k,
            n,
            median_secs(|| {
                black_box(matmul_lanes16(&a, &bt, m, n, k, threads));
            }),
        );
        let o = gflops(
            m,
            k,
            n,
            median_secs(|| {
                black_box(matmul_sequential_f64(
                    &a,
                    &b,
                    BLayout::KByN,
                    m,
                    n,
                    k,
                    threads,
                ));
            }),
        );
        let np = match &py {
            Some(p) => numpy_sgemm(p, m, k, n).map(|s| gflops(m, k, n, s)),
            None => Err("no Python with numpy (set CONFORM_BENCH_PYTHON or make .venv)".into()),
        };
        match np {
            Ok(np) => println!(
                "{name:<48} {l:>10.1} {o:>10.1} {np:>10.1} {:>8.2} {:>8.2}",
                l / np,
                o / np
            ),
            Err(e) => println!("{name:<48} {l:>10.1} {o:>10.1}  numpy anchor unavailable: {e}"),
        }
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    // `CONFORM_BENCH_ANCHOR_ONLY=1`: only the side-by-side table (criterion takes no extra flags).
    if std::env::var_os("CONFORM_BENCH_ANCHOR_ONLY").is_none() {
        bench(&mut c);
    }
    anchor_table();
    c.final_summary();
}
