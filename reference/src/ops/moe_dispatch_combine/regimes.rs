//! `moe_dispatch_combine`'s regimes: how a case plants `rounding_ties`, `moe_routing_edges`,
//! `moe_combine_order` and `order_witnesses` in its generated inputs, and the fused
//! multiply-add witnesses the order construction searches for.

use super::*;

impl MoeDispatchCombine {
    /// Makes every regime of `regimes` true (docs/suites.md):
    /// - `moe_routing_edges`: a routed rank none of whose experts any active token picks (it
    ///   receives nothing); on another routed rank B, local expert 0 picked by nobody (an
    ///   expert with no rows, first in B's receive loop); on a source rank with two or more
    ///   active tokens, token 0 sends all K rows to B (local experts 1..=K) and token 1 sends
    ///   one of them to B's local expert 1 too (so B's rows by expert differ from its rows by
    ///   arrival); every other active token draws K distinct experts off the empty rank and
    ///   B's expert 0; token 0's weights are all 3/4 (their sum, 3K/4, is never 1).
    /// - `moe_combine_order` (quant_mode 0, no shared experts): on one token, 8 columns of x
    ///   are 1 and the weights make the products `1 + 2^-8, 2^-24, 2^-24, 0, ...` (the gains are
    ///   powers of two, so the weights are exact): k order rounds to 1 in bf16, the reverse
    ///   order to 1 + 2^-7; on another, products `1 + 2^-8, 2^-9, 0, ...`: an f32 sum rounds
    ///   to 1 + 2^-7, a sum rounded to the dtype per step to 1. The first is an exact tie of
    ///   the final cast, so its tie rule is judged too.
    /// - `rounding_ties` (quant_mode 2): on 2 tokens a row max `A = 127 * 2^-p` and 8 exact .5
    ///   ties of the quantisation's cast at columns whose smooth scale (every row) is 1/2.
    pub(super) fn impose_regimes(
        &self,
        c: &Case,
        regimes: &[Regime],
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError> {
        let (bs, h, k) = (c.bs, c.hidden, c.top_k);
        let dtype = c.dtype;
        let mut x = m
            .get("x")
            .ok_or_else(|| failed("no x"))?
            .bits16()
            .map_err(failed)?;
        let mut ids: Vec<i32> = m
            .get("expert_ids")
            .ok_or_else(|| failed("no expert_ids"))?
            .to_i64_vec()
            .map_err(failed)?
            .into_iter()
            .map(|v| v as i32)
            .collect();
        let mut wts = m
            .get("expert_scales")
            .ok_or_else(|| failed("no expert_scales"))?
            .to_f32_vec()
            .map_err(failed)?;
        let gain = m
            .get("expert_gain")
            .ok_or_else(|| failed("no expert_gain"))?
            .bits16()
            .map_err(failed)?;
        let mut smooth = match m.get("scales") {
            Some(t) => Some(t.to_f32_vec().map_err(failed)?),
            None => None,
        };
        // Active tokens not yet taken by a construction.
        let mut free: Vec<(usize, usize)> = (0..c.ranks)
            .flat_map(|s| (0..c.active[s]).map(move |t| (s, t)))
            .collect();
        if regimes.contains(&Regime::MoeRoutingEdges) {
            let routed = c.ranks - c.shared_ranks;
            let empty = ctx.below(routed as u64) as usize;
            let busy = (empty + 1 + ctx.below(routed as u64 - 1) as usize) % routed;
            let e_none = busy * c.local;
            let allowed: Vec<usize> = (0..c.experts)
                .filter(|&e| e / c.local != empty && e != e_none)
                .collect();
            let sources: Vec<usize> = (0..c.ranks).filter(|&s| c.active[s] >= 2).collect();
            let src = sources[ctx.below(sources.len() as u64) as usize];
            for s in 0..c.ranks {
                for t in 0..c.active[s] {
                    let row = &mut ids[(s * bs + t) * k..(s * bs + t + 1) * k];
                    if s == src && t == 0 {
                        let mut locals: Vec<usize> = (1..c.local).collect();
                        ctx.shuffle(&mut locals);
                        let mut pick: Vec<usize> = locals[..k].to_vec();
                        // Local expert 1 first among them is not required: token 1 picks
                        // local 1, which token 0 holds.
                        if !pick.contains(&1) {
                            pick[0] = 1;
                        }
                        for (i, l) in pick.iter().enumerate() {
                            row[i] = (busy * c.local + l) as i32;
                        }
                        continue;
                    }
                    let mut pool = allowed.clone();
                    for i in 0..k {
                        let j = i + ctx.below((pool.len() - i) as u64) as usize;
                        pool.swap(i, j);
                        row[i] = pool[i] as i32;
                    }
                    if s == src && t == 1 {
                        let want = (busy * c.local + 1) as i32;
                        if !row.contains(&want) {
                            row[ctx.below(k as u64) as usize] = want;
                        }
                    }
                }
            }
            for kk in 0..k {
                wts[(src * bs) * k + kk] = 0.75;
            }
            free.retain(|&(s, t)| !(s == src && t < 2));
        }
        ctx.shuffle(&mut free);
        let mut next = free.into_iter();
        let mut take = || {
            next.next()
                .ok_or_else(|| failed("out of tokens (checked before)"))
        };
        for &r in regimes {
            match r {
                Regime::MoeCombineOrder => {
                    let mut cols: Vec<usize> = (0..h).collect();
                    ctx.shuffle(&mut cols);
                    let cols = &cols[..CONSTRUCTION_COLUMNS];
                    // Half an ulp of the dtype at 1: bf16 2^-8, f16 2^-11.
                    let tie = if dtype == ElemType::F16 {
                        pow2(-11)
                    } else {
                        pow2(-8)
                    };
                    let order = [1.0 + tie, pow2(-24), pow2(-24)];
                    let precision = [1.0 + tie, tie / 2.0];
                    let targets: [&[f64]; 2] = [&order, &precision];
                    for prods in targets {
                        let (s, t) = take()?;
                        let one = encode(dtype, 1.0);
                        for &j in cols {
                            x[(s * bs + t) * h + j] = one;
                        }
                        for kk in 0..k {
                            let e = ids[(s * bs + t) * k + kk] as usize;
                            let g = decode(dtype, gain[c.shared_experts + e]) as f64;
                            let p = prods.get(kk).copied().unwrap_or(0.0);
                            let wv = p / g;
                            if wv as f32 as f64 != wv {
                                return Err(failed(format!(
                                    "moe_combine_order: weight {wv} is not exact in f32"
                                )));
                            }
                            wts[(s * bs + t) * k + kk] = wv as f32;
                        }
                    }
                }
                Regime::OrderWitnesses => {
                    for _ in 0..WITNESS_TOKENS {
                        let (s, t) = take()?;
                        let g: Vec<f32> = (0..k)
                            .map(|kk| {
                                let e = ids[(s * bs + t) * k + kk] as usize;
                                decode(dtype, gain[c.shared_experts + e])
                            })
                            .collect();
                        let found = fma_witness(dtype, &g, h, ctx)?;
                        x[(s * bs + t) * h..(s * bs + t + 1) * h].copy_from_slice(&found.x);
                        wts[(s * bs + t) * k..(s * bs + t + 1) * k].copy_from_slice(&found.w);
                    }
                }
                Regime::RoundingTies => {
                    let mut cols: Vec<usize> = (0..h).collect();
                    ctx.shuffle(&mut cols);
                    let cols: Vec<usize> = cols[..=TIES_PER_ROW].to_vec();
                    let sv = if c.smooth { 0.5f64 } else { 1.0 };
                    if let Some(sm) = smooth.as_mut() {
                        for e in 0..c.shared_experts + c.experts {
                            for &j in &cols {
                                sm[e * h + j] = 0.5;
                            }
                        }
                    }
                    let quant = DqRecipe::kernel(ScaleForm::QuotientThenReciprocal);
                    for _ in 0..TIE_ROWS {
                        let (s, t) = take()?;
                        // f16 keeps 2^(-p-1) normal and 127 * 2^-p finite for p in -3..=10.
                        let p = ctx.below(14) as i32 - 3;
                        let a = 127.0 * pow2(-p);
                        let base = (s * bs + t) * h;
                        for j in 0..h {
                            let u = 2.0 * ctx.unit() - 1.0;
                            x[base + j] = encode(dtype, u * 0.95 * a);
                        }
                        let (_, factor) = quant.scale_and_factor(a as f32);
                        let put = |x: &mut Vec<u16>, j: usize, v: f64| -> Result<(), OpError> {
                            let xv = v / sv;
                            let b = encode(dtype, xv);
                            if decode(dtype, b) as f64 != xv {
                                return Err(failed(format!(
                                    "{xv} is not exact in {}",
                                    dtype.name()
                                )));
                            }
                            x[base + j] = b;
                            Ok(())
                        };
                        let sign =
                            |ctx: &mut GenContext| if ctx.below(2) == 0 { 1.0 } else { -1.0 };
                        let sg = sign(ctx);
                        put(&mut x, cols[0], sg * a)?;
                        for &j in &cols[1..] {
                            let kk = 2 * ctx.below(63) as i64;
                            let v = sign(ctx) * (2 * kk + 1) as f64 * pow2(-p - 1);
                            put(&mut x, j, v)?;
                            let q = quant.scaled(v as f32, factor) as f64;
                            if q.abs() != kk as f64 + 0.5 {
                                return Err(failed(format!(
                                    "rounding_ties: {v} scaled to {q}, not the tie {kk}.5"
                                )));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        let put_back = |m: &mut TensorMap, name: &str, t: Tensor| {
            m.insert(name.to_string(), t);
        };
        let xs = m.get("x").map(|t| t.shape.clone()).unwrap_or_default();
        put_back(m, "x", Tensor::from_bits16(dtype, xs, &x));
        let is = m
            .get("expert_ids")
            .map(|t| t.shape.clone())
            .unwrap_or_default();
        put_back(m, "expert_ids", Tensor::from_i32(is, &ids));
        let ws = m
            .get("expert_scales")
            .map(|t| t.shape.clone())
            .unwrap_or_default();
        put_back(m, "expert_scales", Tensor::from_f32(ws, &wts));
        if let Some(sm) = smooth {
            let ss = m.get("scales").map(|t| t.shape.clone()).unwrap_or_default();
            put_back(m, "scales", Tensor::from_f32(ss, &sm));
        }
        Ok(())
    }
}

/// One witness token: its x row and its K weights.
struct FmaWitness {
    x: Vec<u16>,
    w: Vec<f32>,
}

/// A token (x row of `h` columns, K weights for routed gains `g`) on which the kernel's
/// combine (`ascend_v2`: each product rounded to f32, then added) and the same combine with a
/// fused multiply-add give other output bits on [`CONSTRUCTION_COLUMNS`] columns.
///
/// The weights make the first two routed products nearly cancel: `w1 * g1 = b` (an f32 in
/// [1, 2) with its last bit set) and `w0 * g0 = d - b` with `d` a small power-of-two multiple
/// (bf16: about 2^-17, f16: about 2^-14); every later weight is 0. On a column holding `x`
/// (a dtype value in [1, 2), either sign) the kernel's f32 sum is `fl(x a) + fl(x b)`, exact
/// by Sterbenz, so it keeps the rounding error of `x b`, which the fused form drops; the sum
/// is near `x d`, where that error is about an ulp of the dtype, so the two round apart on
/// about half the draws. Each column keeps the first `x` on which they differ; the other
/// columns keep the drawn x. The seed chooses the witness, never whether there is one.
fn fma_witness(
    dtype: ElemType,
    g: &[f32],
    h: usize,
    ctx: &mut GenContext,
) -> Result<FmaWitness, OpError> {
    let kernel = MoeRecipe::preset("ascend_v2").ok_or_else(|| failed("no preset"))?;
    let fused = MoeRecipe {
        accumulator: Accumulator::FusedMultiplyAdd,
        ..kernel
    };
    let (mantissa_bits, d_exp) = if dtype == ElemType::F16 {
        (10, -14)
    } else {
        (7, -17)
    };
    let k = g.len();
    let mut x: Vec<u16> = (0..h)
        .map(|_| encode(dtype, 2.0 * ctx.unit() - 1.0))
        .collect();
    let mut cols: Vec<usize> = (0..h).collect();
    ctx.shuffle(&mut cols);
    let cols = &cols[..CONSTRUCTION_COLUMNS];
    for _ in 0..WITNESS_DRAWS {
        let b = 1.0 + (2 * ctx.below(1 << 22) + 1) as f64 * pow2(-23);
        let d = (16 + ctx.below(16)) as f64 * pow2(d_exp - 4 + ctx.below(2) as i32);
        let a = d - b;
        let mut w = vec![0.0f32; k];
        w[0] = (a / g[0] as f64) as f32;
        w[1] = (b / g[1] as f64) as f32;
        if w[0] as f64 * g[0] as f64 != a || w[1] as f64 * g[1] as f64 != b {
            return Err(failed(format!(
                "order_witnesses: weights {a} / {} and {b} / {} are not exact in f32",
                g[0], g[1]
            )));
        }
        let mut all = true;
        for &j in cols {
            let mut hit = false;
            for _ in 0..WITNESS_DRAWS {
                let sign = if ctx.below(2) == 0 { 1.0 } else { -1.0 };
                let frac = ctx.below(1 << mantissa_bits) as f64 * pow2(-mantissa_bits);
                let xb = encode(dtype, sign * (1.0 + frac));
                let xv = decode(dtype, xb);
                let ys: Vec<f32> = g
                    .iter()
                    .map(|&gk| {
                        decode(
                            dtype,
                            round_f32(dtype, xv * gk, RoundingMode::NearestTiesToEven),
                        )
                    })
                    .collect();
                if combine_element(&kernel, dtype, &ys, &w, &[])
                    != combine_element(&fused, dtype, &ys, &w, &[])
                {
                    x[j] = xb;
                    hit = true;
                    break;
                }
            }
            if !hit {
                all = false;
                break;
            }
        }
        if all {
            return Ok(FmaWitness { x, w });
        }
    }
    Err(failed(format!(
        "order_witnesses: no fused multiply-add witness in {WITNESS_DRAWS} draws of weights"
    )))
}
