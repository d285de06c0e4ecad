//! The perf history at the size of a year of nightly runs: 365 runs x 100 cases x 50 samples
//! (1.8 M samples) ingested through `History::ingest`, then what `conform perf history show`
//! does for one case (read its 365 runs and 18 250 samples, per-run locations, E-divisive
//! change points with 199 permutations). The figures are in docs/PERFORMANCE.md. Set
//! CONFORM_BENCH_RUNS / CONFORM_BENCH_CASES / CONFORM_BENCH_SAMPLES to change the size.

use conform_harness::perf::changepoint::ChangePointConfig;
use conform_harness::perf::history::{analyse, flagged_runs, History, RunMeta};
use conform_harness::perf::{Environment, PerfFile, PerfFileIo, PerfRecord, PerfRecordBuild};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Instant;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn history(c: &mut Criterion) {
    let (runs, cases, per) = (
        env_usize("CONFORM_BENCH_RUNS", 365),
        env_usize("CONFORM_BENCH_CASES", 100),
        env_usize("CONFORM_BENCH_SAMPLES", 50),
    );
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("perf-history.sqlite");
    let db = db.to_string_lossy().into_owned();
    let mut h = History::open_or_create(&db).unwrap();
    let t0 = Instant::now();
    let mut rng = conform_reference::splitmix::SplitMix64::new(0);
    for night in 0..runs {
        let mut file = PerfFile::new(Environment {
            commit: Some(format!("{night:040x}")),
            date: Some(format!(
                "2026-{:02}-{:02}T02:00:00Z",
                1 + night / 31 % 12,
                1 + night % 31
            )),
            ..Environment::default()
        });
        for case in 0..cases {
            // A 5% step half-way through the year, 3% noise.
            let level =
                100.0 * (1.0 + case as f64 / 10.0) * if night >= runs / 2 { 1.05 } else { 1.0 };
            let samples = (0..per)
                .map(|_| level * (1.0 + 0.03 * (rng.unit() - 0.5)))
                .collect();
            file.push(
                PerfRecord::from_samples(format!("suite/case{case:03}"), "reference", samples)
                    .unwrap(),
            )
            .unwrap();
        }
        h.ingest(&file, &RunMeta::default()).unwrap();
    }
    let size = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "ingested {runs} runs x {cases} cases x {per} samples ({} samples) in {:.1} s; file {:.1} MB",
        runs * cases * per,
        t0.elapsed().as_secs_f64(),
        size as f64 / 1e6
    );
    drop(h);
    let mut h = History::open(&db).unwrap();
    let mut g = c.benchmark_group("perf_history");
    g.sample_size(20);
    g.bench_function("show_one_case", |b| {
        b.iter(|| {
            let key = h.find_series("suite/case042", None, None).unwrap();
            let nights = h.nights(&key).unwrap();
            let a = analyse(&key, &nights, &ChangePointConfig::default());
            black_box(flagged_runs(
                &nights,
                &a,
                &conform_harness::perf::GateConfig::default(),
            ))
        })
    });
    g.bench_function("read_one_series", |b| {
        b.iter(|| {
            let key = h.find_series("suite/case042", None, None).unwrap();
            black_box(h.nights(&key).unwrap())
        })
    });
    g.finish();
}

criterion_group!(benches, history);
criterion_main!(benches);
