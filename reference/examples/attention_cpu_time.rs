//! CPU seconds of one single-threaded run of the prefill bench case (docs/PERFORMANCE.md,
//! "Reference: attention"): a figure that a loaded, shared machine distorts far less than
//! wall time. Linux only (reads /proc/thread-self/stat).
//!
//! `cargo run --release -p conform-reference --example attention_cpu_time -- [recipe|oracle] [S]`

use conform_reference::attention::{attention, oracle, AttentionConfig, AttentionInputs, Recipe};
use conform_reference::formats::{bf16, DType, Rounding};
use conform_reference::parallel::Threads;

/// User + system CPU seconds of the calling thread.
fn thread_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("Linux /proc");
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|x| x.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "recipe".into());
    let s: usize = std::env::args()
        .nth(2)
        .and_then(|x| x.parse().ok())
        .unwrap_or(2048);
    let mut cfg = AttentionConfig::new(DType::Bf16, 1, s, s, 32, 8, 128);
    cfg.sparse_mode = 3;
    let g = cfg.geometry().expect("valid bench configuration");
    let mut state = 1u64;
    let mut values = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let x = ((state >> 40) as f32) / (1u64 << 24) as f32 * 2.0 - 1.0;
                bf16::quantize_f32_bf16(x, Rounding::RNE)
            })
            .collect()
    };
    let (q, k, v) = (values(g.q_len()), values(g.kv_len()), values(g.kv_len()));
    let ins = AttentionInputs {
        query: &q,
        key: &k,
        value: &v,
        atten_mask: None,
    };
    let recipe = Recipe::ascend_pfa_bf16(DType::Bf16);
    let t0 = thread_cpu_seconds();
    let wall = std::time::Instant::now();
    if which == "oracle" {
        std::hint::black_box(oracle(&g, &ins, Threads(1)).expect("oracle"));
    } else {
        std::hint::black_box(attention(&g, &recipe, &ins, Threads(1)).expect("recipe"));
    }
    println!(
        "{which} S={s}: thread CPU {:.2} s, wall {:.2} s",
        thread_cpu_seconds() - t0,
        wall.elapsed().as_secs_f64()
    );
}
