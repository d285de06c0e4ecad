//! The all-to-all cost model of the MoE dispatch/combine: the window row sizes, bytes split by
//! link (HCCS inside a server, RoCE across), the slowest rank bounding each phase, and the
//! figures docs/mc2.md quotes for DeepSeek-V3's routing.

use conform_reference::mc2::{simulate_all_to_all, AllToAll, LinkProfile};
use conform_reference::splitmix::SplitMix64;

/// Uniform top-k routing: `tokens` per rank, `k` distinct experts each.
fn uniform(ranks: usize, tokens: usize, experts: usize, k: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut g = SplitMix64::new(seed);
    (0..ranks)
        .map(|_| {
            let mut ids = Vec::new();
            for _ in 0..tokens {
                let mut pool: Vec<usize> = (0..experts).collect();
                for i in 0..k {
                    let j = i + (g.next_u64() % (experts - i) as u64) as usize;
                    pool.swap(i, j);
                    ids.push(pool[i]);
                }
            }
            ids
        })
        .collect()
}

#[test]
fn mc2_all_to_all_row_sizes_and_link_split() {
    let mut p = AllToAll::from_routing(2, 0, 0, 4, 1, &[vec![0, 3], vec![1, 2]]).unwrap();
    p.hidden = 7168;
    // bf16 rows: 14336 bytes + 64, aligned to 512; INT8 rows 7168 + 64 -> 7680.
    assert_eq!(p.dispatch_row_bytes(), 14848);
    assert_eq!(p.combine_row_bytes(), 14336);
    p.dispatch_elem_bytes = 1;
    assert_eq!(p.dispatch_row_bytes(), 7680);
    // Experts 0, 1 on rank 0; 2, 3 on rank 1: each rank keeps one row and sends one.
    assert_eq!(p.rows, vec![1, 1, 1, 1]);
    let one_server = LinkProfile {
        ranks_per_server: 8,
        hccs_gbps: 100.0,
        roce_gbps: 10.0,
        latency_us: 0.0,
    };
    let t = simulate_all_to_all(&p, &one_server).unwrap();
    assert_eq!(t.ranks[0].hccs_out_bytes, 7680);
    assert_eq!(t.ranks[0].roce_out_bytes, 0);
    // 7680 bytes at 100 GB/s = 0.0768 us; the combine sends 14336 bytes back.
    assert!((t.dispatch_us - 0.0768).abs() < 1e-12, "{}", t.dispatch_us);
    assert!(
        (t.total_us - (0.0768 + 0.14336)).abs() < 1e-12,
        "{}",
        t.total_us
    );
    // Across servers the same bytes go over RoCE, ten times slower here.
    let split = LinkProfile {
        ranks_per_server: 1,
        ..one_server
    };
    let t2 = simulate_all_to_all(&p, &split).unwrap();
    assert_eq!(t2.ranks[1].roce_in_bytes, 7680);
    assert!((t2.dispatch_us - 0.768).abs() < 1e-12);
    // Shared experts: 4 ranks, ranks 0-1 hold one shared expert; every token of source s also
    // goes to rank s % 2.
    let q =
        AllToAll::from_routing(4, 2, 1, 4, 1, &[vec![0], vec![1], vec![2], vec![3, 0]]).unwrap();
    assert_eq!(q.rows[0], 1, "source 0 keeps its shared row");
    assert_eq!(
        q.rows[3 * 4 + 1],
        2,
        "source 3's two tokens to shared rank 1"
    );
    assert!(AllToAll::from_routing(3, 0, 0, 4, 1, &[vec![], vec![], vec![]]).is_err());
}

#[test]
fn mc2_all_to_all_hot_rank_bounds_the_phase_and_deepseek_figures() {
    let links = LinkProfile::preset("atlas-800i-a2").unwrap();
    // A hot expert: every token's first choice on rank 0's experts.
    let mut ids = uniform(16, 64, 256, 8, 7);
    let mut hot = AllToAll::from_routing(16, 0, 0, 256, 8, &ids).unwrap();
    hot.hidden = 7168;
    let even = simulate_all_to_all(&hot, &links).unwrap();
    for rank in ids.iter_mut() {
        for t in rank.chunks_mut(8) {
            if !t.iter().any(|&e| e < 16) {
                t[0] = 0;
            }
        }
    }
    let mut skew = AllToAll::from_routing(16, 0, 0, 256, 8, &ids).unwrap();
    skew.hidden = 7168;
    let skewed = simulate_all_to_all(&skew, &links).unwrap();
    assert_eq!(skewed.bottleneck_rank, 0);
    assert!(
        skewed.dispatch_us > 1.5 * even.dispatch_us,
        "{} vs {}",
        skewed.dispatch_us,
        even.dispatch_us
    );
    // The figures of docs/mc2.md (DeepSeek-V3: 256 experts, top-8, H 7168, uniform routing).
    for (ranks, tokens) in [(16, 8), (16, 64), (32, 32), (32, 256)] {
        for (label, elem) in [("bf16", 2), ("int8", 1)] {
            let ids = uniform(ranks, tokens, 256, 8, 11);
            let mut p = AllToAll::from_routing(ranks, 0, 0, 256, 8, &ids).unwrap();
            p.hidden = 7168;
            p.dispatch_elem_bytes = elem;
            for preset in ["atlas-800i-a2", "atlas-a3-superpod"] {
                let t = simulate_all_to_all(&p, &LinkProfile::preset(preset).unwrap()).unwrap();
                println!(
                    "{preset:18} W={ranks:2} BS={tokens:3} {label}: dispatch {:8.1} us, round trip {:8.1} us",
                    t.dispatch_us, t.total_us
                );
                assert!(t.total_us > t.dispatch_us && t.dispatch_us > 0.0);
            }
        }
    }
}
