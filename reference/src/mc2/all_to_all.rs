//! A cost model and timeline for the expert-parallel all-to-all of `moe_dispatch_combine`
//! (npu_moe_distribute_dispatch_v2 / combine_v2), beside the MatmulAllReduce planner: the
//! bytes every (source, destination) rank pair moves, split into links inside a server (HCCS)
//! and across servers (RoCE), and per rank the time of the dispatch and of the combine.
//!
//! The model (docs/mc2.md, section "All-to-all"): a rank sends to all its peers at once and
//! receives from all of them at once; its HCCS traffic shares one per-rank HCCS bandwidth and
//! its RoCE traffic one per-rank RoCE bandwidth, in each direction. A phase on a rank takes the
//! fixed latency plus the largest of its four byte counts (HCCS out, HCCS in, RoCE out, RoCE
//! in) over the matching bandwidth; the phase ends when its slowest rank does (the kernel waits
//! for every peer's flag). The combine starts when the dispatch has ended everywhere (the
//! expert computation between them is not modelled). The row sizes are the kernel's window
//! slots (the ops-transformer README's HCCL_BUFFSIZE terms): a dispatched row takes
//! `Align512(Align32(row bytes) + 64)` bytes (its values, its scale and its (rank, token, k)
//! triple), a combined row `Align512(2 H)`. The bandwidths and latency of the presets are
//! assumed (calibrated on published measurements, not Huawei figures): see
//! [`LinkProfile::preset`].

use super::Mc2Error;

/// Link figures of one rank.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkProfile {
    /// Ranks per server (HCCS inside, RoCE between servers).
    pub ranks_per_server: usize,
    /// Per-rank HCCS bandwidth in each direction, GB/s (10^9 bytes per second).
    pub hccs_gbps: f64,
    /// Per-rank RoCE bandwidth in each direction, GB/s.
    pub roce_gbps: f64,
    /// Fixed cost of one phase (flag exchange and launch), microseconds.
    pub latency_us: f64,
}

impl LinkProfile {
    /// A named profile: `atlas-800i-a2` (8 NPUs per server) and `atlas-a3-superpod` (16 dies
    /// per node). The bandwidths are the dispatch bottleneck bandwidths sgl-kernel-npu reports
    /// for its DeepEP-style kernels on Ascend (102 GB/s inside a node with 8 ranks, 87 GB/s
    /// across nodes with 16): assumed to hold for these kernels too; the latency (20 us) is
    /// assumed.
    pub fn preset(name: &str) -> Option<LinkProfile> {
        match name {
            "atlas-800i-a2" => Some(LinkProfile {
                ranks_per_server: 8,
                hccs_gbps: 102.0,
                roce_gbps: 87.0,
                latency_us: 20.0,
            }),
            "atlas-a3-superpod" => Some(LinkProfile {
                ranks_per_server: 16,
                hccs_gbps: 102.0,
                roce_gbps: 87.0,
                latency_us: 20.0,
            }),
            _ => None,
        }
    }
}

/// Names of the presets.
pub const LINK_PRESETS: [&str; 2] = ["atlas-800i-a2", "atlas-a3-superpod"];

/// One all-to-all problem: how many rows each rank sends to each rank.
#[derive(Clone, Debug, PartialEq)]
pub struct AllToAll {
    pub ranks: usize,
    /// `rows[s * ranks + d]`: rows rank s sends to rank d in the dispatch (and receives back
    /// from it in the combine).
    pub rows: Vec<u64>,
    /// Hidden size H.
    pub hidden: u64,
    /// Bytes per dispatched element (2 for bf16/f16, 1 for INT8).
    pub dispatch_elem_bytes: u64,
    /// Bytes per combined element (2).
    pub combine_elem_bytes: u64,
}

fn align(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

impl AllToAll {
    /// Window bytes of one dispatched row.
    pub fn dispatch_row_bytes(&self) -> u64 {
        align(align(self.hidden * self.dispatch_elem_bytes, 32) + 64, 512)
    }

    /// Window bytes of one combined row.
    pub fn combine_row_bytes(&self) -> u64 {
        align(self.hidden * self.combine_elem_bytes, 512)
    }

    /// The rows of a routing: `ids[s]` the experts rank s's active tokens chose (`top_k`
    /// per token, token by token), `experts` routed experts on the last `ranks -
    /// shared_ranks` ranks; every token is also sent once to each of `shared_experts` shared
    /// experts (shared expert i on ranks i*R .. (i+1)*R - 1, source s to rank i*R + s % R).
    pub fn from_routing(
        ranks: usize,
        shared_ranks: usize,
        shared_experts: usize,
        experts: usize,
        top_k: usize,
        ids: &[Vec<usize>],
    ) -> Result<AllToAll, Mc2Error> {
        if ranks == 0 || shared_ranks >= ranks || ids.len() != ranks || top_k == 0 {
            return Err(Mc2Error::ZeroDimension { name: "ranks" });
        }
        if experts == 0 || !experts.is_multiple_of(ranks - shared_ranks) {
            return Err(Mc2Error::ZeroDimension {
                name: "experts per routed rank",
            });
        }
        let local = experts / (ranks - shared_ranks);
        let per = shared_ranks.checked_div(shared_experts).unwrap_or(1);
        let mut rows = vec![0u64; ranks * ranks];
        for (s, picks) in ids.iter().enumerate() {
            for &e in picks {
                if e >= experts {
                    return Err(Mc2Error::ShapeMismatch {
                        tensor: "expert id".into(),
                        expected: experts,
                        actual: e,
                    });
                }
                rows[s * ranks + e / local + shared_ranks] += 1;
            }
            let tokens = (picks.len() / top_k) as u64;
            for i in 0..shared_experts {
                rows[s * ranks + i * per + s % per] += tokens;
            }
        }
        Ok(AllToAll {
            ranks,
            rows,
            hidden: 0,
            dispatch_elem_bytes: 2,
            combine_elem_bytes: 2,
        })
    }
}

/// One rank's phases.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RankSpan {
    pub rank: usize,
    pub hccs_out_bytes: u64,
    pub hccs_in_bytes: u64,
    pub roce_out_bytes: u64,
    pub roce_in_bytes: u64,
    pub dispatch_end_us: f64,
    pub combine_start_us: f64,
    pub combine_end_us: f64,
}

/// The timeline of one dispatch/combine round trip.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AllToAllTimeline {
    pub ranks: Vec<RankSpan>,
    /// When the slowest rank's dispatch ends.
    pub dispatch_us: f64,
    /// When the slowest rank's combine ends (the round trip).
    pub total_us: f64,
    /// The rank that bounds the dispatch.
    pub bottleneck_rank: usize,
}

/// Simulates the round trip of `p` on `links`.
pub fn simulate_all_to_all(
    p: &AllToAll,
    links: &LinkProfile,
) -> Result<AllToAllTimeline, Mc2Error> {
    let w = p.ranks;
    if w == 0 || p.rows.len() != w * w {
        return Err(Mc2Error::ShapeMismatch {
            tensor: "rows".into(),
            expected: w * w,
            actual: p.rows.len(),
        });
    }
    if links.ranks_per_server == 0 || links.hccs_gbps <= 0.0 || links.roce_gbps <= 0.0 {
        return Err(Mc2Error::ZeroDimension {
            name: "link bandwidth",
        });
    }
    let server = |r: usize| r / links.ranks_per_server;
    // Bytes per rank: (hccs out, hccs in, roce out, roce in) for `row` bytes per row. A rank's
    // rows to itself stay in its own memory.
    let bytes = |row: u64| -> Vec<[u64; 4]> {
        let mut b = vec![[0u64; 4]; w];
        for s in 0..w {
            for d in 0..w {
                let n = p.rows[s * w + d] * row;
                if s == d || n == 0 {
                    continue;
                }
                if server(s) == server(d) {
                    b[s][0] += n;
                    b[d][1] += n;
                } else {
                    b[s][2] += n;
                    b[d][3] += n;
                }
            }
        }
        b
    };
    let phase = |b: &[u64; 4]| -> f64 {
        let us = |bytes: u64, gbps: f64| bytes as f64 / (gbps * 1e3);
        links.latency_us
            + us(b[0], links.hccs_gbps)
                .max(us(b[1], links.hccs_gbps))
                .max(us(b[2], links.roce_gbps))
                .max(us(b[3], links.roce_gbps))
    };
    let disp = bytes(p.dispatch_row_bytes());
    // The combine sends each row back: the reverse direction of the dispatch.
    let comb = bytes(p.combine_row_bytes());
    let d_time: Vec<f64> = disp.iter().map(phase).collect();
    let dispatch_us = d_time.iter().copied().fold(0.0, f64::max);
    let bottleneck_rank = d_time.iter().position(|&t| t == dispatch_us).unwrap_or(0);
    let mut ranks = Vec::with_capacity(w);
    let mut total_us: f64 = 0.0;
    for r in 0..w {
        let c = comb[r];
        let back = [c[1], c[0], c[3], c[2]];
        let end = dispatch_us + phase(&back);
        total_us = total_us.max(end);
        ranks.push(RankSpan {
            rank: r,
            hccs_out_bytes: disp[r][0],
            hccs_in_bytes: disp[r][1],
            roce_out_bytes: disp[r][2],
            roce_in_bytes: disp[r][3],
            dispatch_end_us: d_time[r],
            combine_start_us: dispatch_us,
            combine_end_us: end,
        });
    }
    Ok(AllToAllTimeline {
        ranks,
        dispatch_us,
        total_us,
        bottleneck_rank,
    })
}
