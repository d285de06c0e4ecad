//! `moe_dispatch_combine` as a [`PresetFamily`]: a case parsed and checked against the API's
//! rules, the oracle and the recipe run on its inputs, the preset by name (the regimes are
//! planted in `regimes.rs`).

use super::*;

impl PresetFamily for MoeDispatchCombine {
    type Case = Case;
    type Recipe = MoeRecipe;
    const PRESETS: &'static [&'static str] = &PRESETS;

    fn case(&self, v: &serde_json::Value) -> Result<Case, OpError> {
        let p: Params = parse_params(OP, v)?;
        let dtype = crate::ops::x_dtype_16(OP, &p.dtype)?;
        if p.ranks < 2 || p.ranks > 1024 {
            return Err(invalid("ranks", "2..=1024 (ep_world_size)"));
        }
        if p.bs == 0 || p.bs > 512 {
            return Err(invalid(
                "bs",
                "1..=512 tokens per rank (the API's BS range)",
            ));
        }
        if p.hidden == 0 || !p.hidden.is_multiple_of(32) || p.hidden > 10240 {
            return Err(invalid(
                "hidden",
                format!("{}: a positive multiple of 32, at most 10240", p.hidden),
            ));
        }
        if p.shared_ranks >= p.ranks {
            return Err(invalid(
                "shared_ranks",
                "below ranks: at least one rank holds routed experts",
            ));
        }
        if p.shared_ranks == 0 && p.shared_experts != 0 {
            return Err(invalid(
                "shared_experts",
                "shared experts need shared ranks (shared_ranks > 0)",
            ));
        }
        if p.shared_ranks > 0
            && (p.shared_experts == 0
                || p.shared_experts > 4
                || !p.shared_ranks.is_multiple_of(p.shared_experts))
        {
            return Err(invalid(
                "shared_experts",
                "1..=4, dividing shared_ranks (shared_expert_rank_num % shared_expert_num == 0)",
            ));
        }
        let routed = p.ranks - p.shared_ranks;
        if p.experts == 0 || !p.experts.is_multiple_of(routed) || p.experts > 1024 {
            return Err(invalid(
                "experts",
                format!(
                    "{}: 1..=1024 and a multiple of the routed ranks ({routed}): moe_expert_num % (ep_world_size - shared_expert_rank_num) == 0",
                    p.experts
                ),
            ));
        }
        if p.top_k == 0 || p.top_k > 8 || p.top_k > p.experts {
            return Err(invalid("top_k", "1..=8 and at most experts"));
        }
        if p.quant_mode != 0 && p.quant_mode != 2 {
            return Err(invalid(
                "quant_mode",
                format!(
                    "{}: 0 (none) or 2 (per-token dynamic INT8); static quantisation is not modelled",
                    p.quant_mode
                ),
            ));
        }
        if p.smooth && p.quant_mode != 2 {
            return Err(invalid("smooth", "smooth scales need quant_mode 2"));
        }
        if p.expert_token_nums_type > 1 {
            return Err(invalid(
                "expert_token_nums_type",
                "0 (running sums) or 1 (counts)",
            ));
        }
        let mask = p.active.is_some();
        let active = p.active.unwrap_or_else(|| vec![p.bs; p.ranks]);
        if active.len() != p.ranks {
            return Err(invalid(
                "active",
                format!("{} counts for {} ranks", active.len(), p.ranks),
            ));
        }
        if let Some((r, a)) = active.iter().enumerate().find(|(_, a)| **a > p.bs) {
            return Err(invalid(
                "active",
                format!("rank {r}: {a} active tokens of {}", p.bs),
            ));
        }
        let elems = p
            .ranks
            .checked_mul(p.bs)
            .and_then(|n| n.checked_mul(p.hidden))
            .and_then(|n| n.checked_mul(p.top_k + p.shared_experts));
        if elems.is_none_or(|n| n > 1 << 30) {
            return Err(invalid(
                "ranks/bs/hidden/top_k",
                "more than 2^30 received elements",
            ));
        }
        Ok(Case {
            ranks: p.ranks,
            bs: p.bs,
            hidden: p.hidden,
            experts: p.experts,
            top_k: p.top_k,
            shared_experts: p.shared_experts,
            shared_ranks: p.shared_ranks,
            local: p.experts / routed,
            quant: p.quant_mode == 2,
            smooth: p.smooth,
            dtype,
            cumsum: p.expert_token_nums_type == 0,
            active,
            mask,
        })
    }

    fn run_oracle(
        &self,
        c: &Case,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let inp = self.decoded(c, inputs)?;
        let kernel = MoeRecipe::preset("ascend_v2").ok_or_else(|| failed("no preset"))?;
        // The routing is exact: the kernel's rows, with exact payloads.
        let rows = self.dispatch(c, &kernel, &inp, threads);
        let (h, k, ns) = (c.hidden, c.top_k, c.shared_experts);
        let slots = k + ns;
        let n = c.rows();
        let flat: Vec<&Row> = rows.iter().flatten().collect();
        // Exact payload of every row: (values, scale) with y exact integers when quantised.
        let exact: Vec<(Vec<f64>, f64)> = map_tasks(flat.len(), threads, |i| {
            let row = flat[i];
            let base = (row.source * c.bs + row.token) * h;
            if c.quant {
                let srow = if row.slot >= k {
                    row.slot - k
                } else {
                    row.gain
                };
                let v: Vec<f64> = (0..h)
                    .map(|j| {
                        let a = decode(c.dtype, inp.x[base + j]) as f64;
                        match inp.smooth.as_ref() {
                            Some(sm) => a * sm[srow * h + j] as f64,
                            None => a,
                        }
                    })
                    .collect();
                let (scale, y) = oracle_row(&v);
                (y.into_iter().map(f64::from).collect(), scale)
            } else {
                (
                    (0..h)
                        .map(|j| decode(c.dtype, inp.x[base + j]) as f64)
                        .collect(),
                    0.0,
                )
            }
        });
        let mut index = vec![usize::MAX; c.ranks * c.bs * slots];
        for (i, row) in flat.iter().enumerate() {
            index[(row.source * c.bs + row.token) * slots + row.slot] = i;
        }
        let mut expand = Vec::with_capacity(n * h);
        let mut scales = Vec::with_capacity(n);
        for (v, s) in &exact {
            expand.extend_from_slice(v);
            scales.push(*s);
        }
        let y_exact = |i: usize, j: usize| -> f64 {
            let g = decode(c.dtype, inp.gain[flat[i].gain]) as f64;
            let (v, s) = &exact[i];
            let deq = if c.quant { v[j] * s } else { v[j] };
            deq * g
        };
        let tokens: Vec<(usize, usize)> = (0..c.ranks)
            .flat_map(|s| (0..c.active[s]).map(move |t| (s, t)))
            .collect();
        let out_rows: Vec<Vec<f64>> = map_tasks(tokens.len(), threads, |i| {
            let (s, t) = tokens[i];
            (0..h)
                .map(|j| {
                    let mut acc = 0.0f64;
                    for kk in 0..k {
                        let at = index[(s * c.bs + t) * slots + kk];
                        acc += inp.weights[(s * c.bs + t) * k + kk] as f64 * y_exact(at, j);
                    }
                    for si in 0..ns {
                        acc += y_exact(index[(s * c.bs + t) * slots + k + si], j);
                    }
                    acc
                })
                .collect()
        });
        let nums = self.token_nums(c, &kernel, &inp, &rows);
        let mut m = TensorMap::new();
        m.insert("expand_x".into(), Tensor::of_f64(vec![n, h], &expand));
        if c.quant {
            m.insert("dynamic_scales".into(), Tensor::of_f64(vec![n], &scales));
        }
        m.insert(
            "expert_token_nums".into(),
            Tensor::of_f64(
                vec![nums.len()],
                &nums.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            ),
        );
        let out: Vec<f64> = out_rows.into_iter().flatten().collect();
        m.insert(
            "out".into(),
            Tensor::of_f64(vec![c.active_tokens(), h], &out),
        );
        Ok(m)
    }

    fn run_recipe(
        &self,
        c: &Case,
        r: &MoeRecipe,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let inp = self.decoded(c, inputs)?;
        let rows = self.dispatch(c, r, &inp, threads);
        let (h, k, ns) = (c.hidden, c.top_k, c.shared_experts);
        let slots = k + ns;
        // Where each (source, token, slot) row landed.
        let mut index = vec![usize::MAX; c.ranks * c.bs * slots];
        let mut flat: Vec<&Row> = Vec::with_capacity(c.rows());
        for rr in &rows {
            for row in rr {
                index[(row.source * c.bs + row.token) * slots + row.slot] = flat.len();
                flat.push(row);
            }
        }
        let n = c.rows();
        if flat.len() > n {
            return Err(failed(format!("{} rows received, {n} sent", flat.len())));
        }
        // The expert outputs of every received row.
        let outs: Vec<Vec<f32>> =
            map_tasks(flat.len(), threads, |i| self.expert_out(c, &inp, flat[i]));
        // expand_x and dynamic_scales, each rank's segment at its fixed offset.
        let mut seg = Vec::with_capacity(c.ranks);
        {
            // Rows a rank should receive with the kernel's placement (its segment length).
            let kernel = MoeRecipe::preset("ascend_v2").ok_or_else(|| failed("no preset"))?;
            let mut counts = vec![0usize; c.ranks];
            let ps = c.per_shared();
            for s in 0..c.ranks {
                for t in 0..c.active[s] {
                    for kk in 0..k {
                        let e = inp.ids[(s * c.bs + t) * k + kk] as usize;
                        counts[c.place(e, kernel.placement).0] += 1;
                    }
                    for i in 0..ns {
                        counts[i * ps + s % ps] += 1;
                    }
                }
            }
            // A recipe that moves rows between ranks keeps the total; segments follow the
            // rows it actually delivered when they do not fit the kernel's counts.
            let delivered: Vec<usize> = rows.iter().map(|rr| rr.len()).collect();
            let moved = delivered.iter().zip(&counts).any(|(a, b)| a > b);
            let lens = if moved { delivered } else { counts };
            let mut off = 0;
            for len in lens {
                seg.push(off);
                off += len;
            }
        }
        let mut expand_bits = vec![0u16; n * h];
        let mut expand_q = vec![0i8; n * h];
        let mut dyn_scales = vec![0f32; n];
        for (d, rr) in rows.iter().enumerate() {
            for (i, row) in rr.iter().enumerate() {
                let at = seg[d] + i;
                if at >= n {
                    return Err(failed("a rank's rows overflow the expand buffer"));
                }
                if c.quant {
                    expand_q[at * h..(at + 1) * h].copy_from_slice(&row.q);
                    dyn_scales[at] = row.scale;
                } else {
                    expand_bits[at * h..(at + 1) * h].copy_from_slice(&row.data);
                }
            }
        }
        // The combine, per active token.
        let tokens: Vec<(usize, usize)> = (0..c.ranks)
            .flat_map(|s| (0..c.active[s]).map(move |t| (s, t)))
            .collect();
        let dtype = c.dtype;
        let out_rows: Vec<Vec<u16>> = map_tasks(tokens.len(), threads, |i| {
            let (s, t) = tokens[i];
            let w = &inp.weights[(s * c.bs + t) * k..(s * c.bs + t + 1) * k];
            let y_of = |slot: usize, j: usize| -> f32 {
                let at = index[(s * c.bs + t) * slots + slot];
                if at == usize::MAX {
                    0.0
                } else {
                    outs[at][j]
                }
            };
            let mut ys = [0.0f32; MAX_TOP_K];
            let mut shared = [0.0f32; MAX_SHARED];
            (0..h)
                .map(|j| {
                    for (kk, y) in ys.iter_mut().enumerate().take(k) {
                        *y = y_of(kk, j);
                    }
                    for (si, y) in shared.iter_mut().enumerate().take(ns) {
                        *y = y_of(k + si, j);
                    }
                    combine_element(r, dtype, &ys[..k], w, &shared[..ns])
                })
                .collect()
        });
        let out: Vec<u16> = out_rows.into_iter().flatten().collect();
        let mut m = TensorMap::new();
        if c.quant {
            m.insert("expand_x".into(), Tensor::from_i8(vec![n, h], &expand_q));
            m.insert(
                "dynamic_scales".into(),
                Tensor::from_f32(vec![n], &dyn_scales),
            );
        } else {
            m.insert(
                "expand_x".into(),
                Tensor::from_bits16(dtype, vec![n, h], &expand_bits),
            );
        }
        m.insert(
            "expert_token_nums".into(),
            i64_tensor(self.token_nums(c, r, &inp, &rows)),
        );
        m.insert(
            "out".into(),
            Tensor::from_bits16(dtype, vec![c.active_tokens(), h], &out),
        );
        Ok(m)
    }

    /// Plants the declared regimes (`regimes.rs`).
    fn impose(
        &self,
        c: &Case,
        regimes: &[Regime],
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError> {
        self.impose_regimes(c, regimes, m, ctx)
    }

    fn recipe_preset(_: &Case, name: &str) -> Option<MoeRecipe> {
        MoeRecipe::preset(name)
    }
}
