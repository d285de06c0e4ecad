//! The f64 oracle against an independent textbook implementation, and layout handling.

use crate::attention_common;

use attention_common::Problem;
use conform_reference::attention::{oracle, AttentionConfig, InputLayout};
use conform_reference::formats::DType;
use conform_reference::parallel::Threads;
use proptest::prelude::*;

/// Textbook softmax(Q K^T * scale) V in f64 on BSND inputs, written independently of the
/// reference's geometry and mask code: std exp, two passes, explicit index arithmetic.
#[allow(clippy::too_many_arguments)]
fn textbook(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    b_: usize,
    sq: usize,
    sk: usize,
    hq: usize,
    hk: usize,
    d: usize,
    scale: f64,
    allowed: &dyn Fn(usize, usize, usize) -> bool,
) -> (Vec<f64>, Vec<f64>) {
    let mut out = vec![0.0; b_ * sq * hq * d];
    let mut lse = vec![f64::INFINITY; b_ * hq * sq];
    for b in 0..b_ {
        for h in 0..hq {
            let kh = h * hk / hq;
            for i in 0..sq {
                let mut s = Vec::new();
                for j in 0..sk {
                    if !allowed(b, i, j) {
                        continue;
                    }
                    let mut acc = 0.0f64;
                    for x in 0..d {
                        acc += q[((b * sq + i) * hq + h) * d + x] as f64
                            * k[((b * sk + j) * hk + kh) * d + x] as f64;
                    }
                    s.push((j, acc * scale));
                }
                if s.is_empty() {
                    continue;
                }
                let m = s.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
                let l: f64 = s.iter().map(|x| (x.1 - m).exp()).sum();
                for &(j, sj) in &s {
                    let w = (sj - m).exp() / l;
                    for x in 0..d {
                        out[((b * sq + i) * hq + h) * d + x] +=
                            w * v[((b * sk + j) * hk + kh) * d + x] as f64;
                    }
                }
                lse[(b * hq + h) * sq + i] = l.ln() + m;
            }
        }
    }
    (out, lse)
}

fn check_against_textbook(cfg: &AttentionConfig, seed: u64) {
    let p = Problem::new(cfg, seed, 2.0);
    let g = &p.g;
    let o = oracle(g, &p.inputs(), Threads(2)).unwrap();
    let (sq, sk) = (g.q_seq, g.kv_seq);
    let lq = g.lq.clone();
    let lk = g.lk.clone();
    let mask = p.mask.clone();
    let (mode, pre, next) = (cfg.sparse_mode, cfg.pre_tokens, cfg.next_tokens);
    let allowed = move |b: usize, i: usize, j: usize| {
        if i >= lq[b] || j >= lk[b] {
            return false;
        }
        let (i, j, d) = (i as i64, j as i64, lk[b] as i64 - lq[b] as i64);
        let structural = match mode {
            0 => true,
            2 => j <= i,
            3 => j <= i + d,
            4 => j >= i + d - pre && j <= i + d + next,
            _ => unreachable!(),
        };
        let explicit = mask
            .as_ref()
            .is_none_or(|m| m[((b * sq + i as usize) * sk) + j as usize] == 0);
        structural && explicit
    };
    let (t_out, t_lse) = textbook(
        &p.q,
        &p.k,
        &p.v,
        g.batch,
        sq,
        sk,
        g.heads,
        g.kv_heads,
        g.head_dim,
        g.scale as f64,
        &allowed,
    );
    for (a, e) in o.out.iter().zip(&t_out) {
        approx::assert_abs_diff_eq!(a, e, epsilon = 1e-12 * (1.0 + e.abs()));
    }
    for (a, e) in o.lse.iter().zip(&t_lse) {
        // Equal (infinities included) or within the tolerance: relative_eq! with no relative
        // part.
        approx::assert_relative_eq!(a, e, epsilon = 1e-12 * (1.0 + e.abs()), max_relative = 0.0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn oracle_matches_textbook_attention_on_small_shapes(
        seed in any::<u64>(),
        b in 1usize..3, sq in 1usize..9, sk in 1usize..20,
        kvh in 1usize..3, group in 1usize..4, d in 1usize..40,
        mode in prop::sample::select(vec![0u32, 2, 3, 4]),
        pre in 0i64..6, next in 0i64..6, explicit in any::<bool>(),
        lens in any::<bool>(),
    ) {
        let mut cfg = AttentionConfig::new(DType::Bf16, b, sq, sk, kvh * group, kvh, d);
        cfg.sparse_mode = mode;
        cfg.pre_tokens = pre;
        cfg.next_tokens = next;
        cfg.atten_mask = explicit && mode == 0;
        if lens {
            let mut r = attention_common::rng(seed);
            cfg.actual_seq_lengths = Some((0..b).map(|_| r.below(sq + 1) as i64).collect());
            cfg.actual_seq_lengths_kv = Some((0..b).map(|_| r.below(sk + 1) as i64).collect());
        }
        check_against_textbook(&cfg, seed);
    }
}

/// Reorders a BSND tensor into `layout` (`[B, S, N, D]` -> BNSD/BSH/TND).
fn from_bsnd(x: &[f32], b_: usize, s: usize, n: usize, d: usize, layout: InputLayout) -> Vec<f32> {
    match layout {
        InputLayout::Bsnd | InputLayout::Bsh | InputLayout::Tnd => x.to_vec(),
        InputLayout::Bnsd | InputLayout::BnsdBsnd => {
            let mut y = vec![0.0; x.len()];
            for b in 0..b_ {
                for i in 0..s {
                    for h in 0..n {
                        let src = ((b * s + i) * n + h) * d;
                        let dst = ((b * n + h) * s + i) * d;
                        y[dst..dst + d].copy_from_slice(&x[src..src + d]);
                    }
                }
            }
            y
        }
    }
}

#[test]
fn every_layout_gives_the_same_oracle_and_recipe_results() {
    use conform_reference::attention::{attention, AttentionInputs, Recipe};
    let (b, s, sk, n, kvn, d) = (2, 5, 7, 4, 2, 16);
    let mut base = AttentionConfig::new(DType::Bf16, b, s, sk, n, kvn, d);
    base.sparse_mode = 3;
    base.softmax_lse_flag = true;
    let p = Problem::new(&base, 11, 2.0);
    let recipe = Recipe::preset("ascend_pfa_bf16", DType::Bf16).unwrap();
    let ref_o = oracle(&p.g, &p.inputs(), Threads(1)).unwrap();
    let ref_r = attention(&p.g, &recipe, &p.inputs(), Threads(1)).unwrap();
    for layout in [
        InputLayout::Bnsd,
        InputLayout::Bsh,
        InputLayout::Tnd,
        InputLayout::BnsdBsnd,
    ] {
        let mut cfg = base.clone();
        cfg.input_layout = layout;
        if layout == InputLayout::Tnd {
            cfg.actual_seq_lengths = Some(vec![s as i64, 2 * s as i64]);
            cfg.actual_seq_lengths_kv = Some(vec![sk as i64, 2 * sk as i64]);
        }
        let g = cfg.geometry().unwrap();
        let q = from_bsnd(&p.q, b, s, n, d, layout);
        let k = from_bsnd(&p.k, b, sk, kvn, d, layout);
        let v = from_bsnd(&p.v, b, sk, kvn, d, layout);
        let ins = AttentionInputs {
            query: &q,
            key: &k,
            value: &v,
            atten_mask: None,
        };
        let o = oracle(&g, &ins, Threads(2)).unwrap();
        let r = attention(&g, &recipe, &ins, Threads(2)).unwrap();
        // Outputs are BSND-ordered for every layout but BNSD.
        let out_layout = if layout == InputLayout::Bnsd {
            InputLayout::Bnsd
        } else {
            InputLayout::Bsnd
        };
        let expect_o: Vec<f64> = {
            let f: Vec<f32> = ref_o.out.iter().map(|&x| x as f32).collect();
            let t = from_bsnd(&f, b, s, n, d, out_layout);
            t.iter().map(|&x| x as f64).collect()
        };
        let got_o: Vec<f64> = o.out.iter().map(|&x| x as f32 as f64).collect();
        assert_eq!(got_o, expect_o, "{layout:?} oracle");
        assert_eq!(
            r.out,
            from_bsnd(&ref_r.out, b, s, n, d, out_layout),
            "{layout:?} recipe"
        );
        if layout == InputLayout::Tnd {
            // [T, N] vs [B, N, S]
            for bb in 0..b {
                for h in 0..n {
                    for i in 0..s {
                        assert_eq!(o.lse[(bb * s + i) * n + h], ref_o.lse[(bb * n + h) * s + i]);
                    }
                }
            }
        } else {
            assert_eq!(o.lse, ref_o.lse);
        }
    }
}

/// The oracle runs the common keys of 4 rows together when no explicit mask applies, and row
/// by row otherwise; an explicit mask that masks nothing leaves the same allowed keys, so the
/// two paths must agree bit for bit (causal, band and varlen rows, odd row counts, D not a
/// multiple of the column block).
#[test]
fn oracle_row_blocked_and_row_by_row_paths_agree_bitwise() {
    let mut cases = Vec::new();
    for (sm, sq, sk, d) in [
        (3u32, 77, 200, 128),
        (2, 130, 130, 80),
        (4, 90, 90, 48),
        (0, 37, 53, 200),
    ] {
        let mut c = AttentionConfig::new(DType::Bf16, 2, sq, sk, 4, 2, d);
        c.sparse_mode = sm;
        if sm == 4 {
            c.pre_tokens = 17;
            c.next_tokens = 5;
        }
        c.actual_seq_lengths_kv = Some(vec![sk as i64, (sk / 3) as i64]);
        cases.push(c);
    }
    for (n, cfg) in cases.into_iter().enumerate() {
        let p = Problem::new(&cfg, 40 + n as u64, 3.0);
        let blocked = oracle(&p.g, &p.inputs(), Threads(2)).unwrap();
        let mut with_mask = cfg.clone();
        with_mask.atten_mask = true;
        let gm = with_mask.geometry().unwrap();
        let zeros = vec![0u8; gm.mask_shape().iter().product()];
        let mut ins = p.inputs();
        ins.atten_mask = Some(&zeros);
        let by_row = oracle(&gm, &ins, Threads(2)).unwrap();
        let b = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(b(&blocked.out), b(&by_row.out), "case {n}: output");
        assert_eq!(b(&blocked.lse), b(&by_row.lse), "case {n}: lse");
    }
}
