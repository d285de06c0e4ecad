use conform_reference::attention::*;
use conform_reference::formats::{bf16, DType, Rounding};
use conform_reference::parallel::Threads;
fn cpu() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let f: Vec<&str> = s.rsplit(')').next().unwrap().split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}
fn main() {
    let which = std::env::args().nth(1).unwrap_or("recipe".into());
    let s: usize = std::env::args()
        .nth(2)
        .map(|x| x.parse().unwrap())
        .unwrap_or(2048);
    let mut cfg = AttentionConfig::new(DType::Bf16, 1, s, s, 32, 8, 128);
    cfg.sparse_mode = 3;
    let g = cfg.geometry().unwrap();
    let mut st = 1u64;
    let mut vals = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                st = st
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let x = ((st >> 40) as f32) / (1u64 << 24) as f32 * 2.0 - 1.0;
                bf16::quantize_f32_bf16(x, Rounding::RNE)
            })
            .collect()
    };
    let (q, k, v) = (vals(g.q_len()), vals(g.kv_len()), vals(g.kv_len()));
    let ins = AttentionInputs {
        query: &q,
        key: &k,
        value: &v,
        atten_mask: None,
    };
    let r = Recipe::preset("ascend_pfa_bf16", DType::Bf16).unwrap();
    let t0 = cpu();
    let w = std::time::Instant::now();
    if which == "oracle" {
        let o = oracle(&g, &ins, Threads(1)).unwrap();
        std::hint::black_box(o);
    } else {
        let o = attention(&g, &r, &ins, Threads(1)).unwrap();
        std::hint::black_box(o);
    }
    println!(
        "{which} S={s}: thread cpu {:.2} s, wall {:.2} s",
        cpu() - t0,
        w.elapsed().as_secs_f64()
    );
}
