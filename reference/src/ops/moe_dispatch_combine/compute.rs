//! `moe_dispatch_combine`'s computation: a case's tensors, its decoded inputs, and the
//! dispatch (routing, quantisation), expert and combine steps the oracle and the recipe share.

use super::*;

impl MoeDispatchCombine {
    pub(super) fn specs(&self, c: &Case) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
        let (w, bs, h, k) = (c.ranks, c.bs, c.hidden, c.top_k);
        let ne = c.shared_experts + c.experts;
        let mut inputs = vec![
            TensorSpec::new("x", c.dtype, vec![w, bs, h], &["rank", "t", "h"]),
            TensorSpec::new(
                "expert_ids",
                ElemType::I32,
                vec![w, bs, k],
                &["rank", "t", "k"],
            ),
            TensorSpec::new(
                "expert_scales",
                ElemType::F32,
                vec![w, bs, k],
                &["rank", "t", "k"],
            ),
            TensorSpec::new("expert_gain", c.dtype, vec![ne], &["e"]),
        ];
        if c.smooth {
            inputs.push(TensorSpec::new(
                "scales",
                ElemType::F32,
                vec![ne, h],
                &["e", "h"],
            ));
        }
        if c.mask {
            inputs.push(TensorSpec::new(
                "x_active_mask",
                ElemType::U8,
                vec![w, bs],
                &["rank", "t"],
            ));
        }
        let n = c.rows();
        let mut outputs = vec![TensorSpec::new(
            "expand_x",
            if c.quant { ElemType::I8 } else { c.dtype },
            vec![n, h],
            &["row", "h"],
        )];
        if c.quant {
            outputs.push(TensorSpec::new(
                "dynamic_scales",
                ElemType::F32,
                vec![n],
                &["row"],
            ));
        }
        outputs.push(TensorSpec::new(
            "expert_token_nums",
            ElemType::I64,
            vec![c.token_nums_len()],
            &["expert"],
        ));
        outputs.push(TensorSpec::new(
            "out",
            c.dtype,
            vec![c.active_tokens(), h],
            &["token", "h"],
        ));
        (inputs, outputs)
    }

    pub(super) fn decoded(&self, c: &Case, inputs: &TensorMap) -> Result<Inputs, OpError> {
        let (specs, _) = self.specs(c);
        let get = |name: &str| -> Result<&Tensor, OpError> {
            let spec = specs
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| failed(format!("no input `{name}`")))?;
            input(OP, inputs, spec)
        };
        let x = get("x")?.bits16().map_err(failed)?;
        let ids = get("expert_ids")?.to_i64_vec().map_err(failed)?;
        let weights = get("expert_scales")?.to_f32_vec().map_err(failed)?;
        let gain = get("expert_gain")?.bits16().map_err(failed)?;
        let smooth = if c.smooth {
            Some(get("scales")?.to_f32_vec().map_err(failed)?)
        } else {
            None
        };
        if c.mask {
            let m = &get("x_active_mask")?.data;
            for r in 0..c.ranks {
                for t in 0..c.bs {
                    let want = u8::from(t < c.active[r]);
                    if m[r * c.bs + t] != want {
                        return Err(OpError::InvalidInput {
                            op: OP.into(),
                            input: "x_active_mask".into(),
                            message: format!(
                                "rank {r} token {t} is {}, the case's `active` ({}) makes it {want}: true values first, the count from the parameters",
                                m[r * c.bs + t],
                                c.active[r]
                            ),
                        });
                    }
                }
            }
        }
        let k = c.top_k;
        for r in 0..c.ranks {
            for t in 0..c.active[r] {
                let row = &ids[(r * c.bs + t) * k..(r * c.bs + t + 1) * k];
                for (i, &e) in row.iter().enumerate() {
                    if e < 0 || e as usize >= c.experts {
                        return Err(OpError::InvalidInput {
                            op: OP.into(),
                            input: "expert_ids".into(),
                            message: format!(
                                "rank {r} token {t} k {i}: {e} is outside [0, {})",
                                c.experts
                            ),
                        });
                    }
                    if row[..i].contains(&e) {
                        return Err(OpError::InvalidInput {
                            op: OP.into(),
                            input: "expert_ids".into(),
                            message: format!(
                                "rank {r} token {t}: expert {e} twice (the API requires the K ids of a row to differ)"
                            ),
                        });
                    }
                }
            }
        }
        Ok(Inputs {
            x,
            ids,
            weights,
            gain,
            smooth,
        })
    }

    /// The quantisation of token `t` of rank `s` for smooth row `srow`: `(q, scale)`.
    pub(super) fn quantise(
        &self,
        c: &Case,
        r: &MoeRecipe,
        inp: &Inputs,
        s: usize,
        t: usize,
        srow: usize,
    ) -> (Vec<i8>, f32) {
        let h = c.hidden;
        let base = (s * c.bs + t) * h;
        let v: Vec<f32> = (0..h)
            .map(|j| {
                let a = decode(c.dtype, inp.x[base + j]);
                match inp.smooth.as_ref() {
                    Some(sm) => a * sm[srow * h + j],
                    None => a,
                }
            })
            .collect();
        let amax = v
            .iter()
            .fold(0.0f32, |m, &x| if x.abs() > m { x.abs() } else { m });
        let (scale, factor) = r.quant.scale_and_factor(amax);
        let q = v
            .iter()
            .map(|&x| r.quant.to_int8(r.quant.scaled(x, factor)))
            .collect();
        (q, scale)
    }

    /// Every rank's received rows (ranks in order) under `r`.
    pub(super) fn dispatch(
        &self,
        c: &Case,
        r: &MoeRecipe,
        inp: &Inputs,
        threads: Threads,
    ) -> Vec<Vec<Row>> {
        let (k, h) = (c.top_k, c.hidden);
        let make_row = |s: usize, t: usize, slot: usize, srow: usize, gain: usize| -> Row {
            if c.quant {
                let (q, own) = self.quantise(c, r, inp, s, t, srow);
                let scale = if r.scale_source == ScaleSource::PreviousToken && t > 0 {
                    self.quantise(c, r, inp, s, t - 1, srow).1
                } else {
                    own
                };
                Row {
                    source: s,
                    token: t,
                    slot,
                    gain,
                    data: Vec::new(),
                    q,
                    scale,
                }
            } else {
                let base = (s * c.bs + t) * h;
                Row {
                    source: s,
                    token: t,
                    slot,
                    gain,
                    data: inp.x[base..base + h].to_vec(),
                    q: Vec::new(),
                    scale: 0.0,
                }
            }
        };
        map_tasks(c.ranks, threads, |d| {
            let mut rows = Vec::new();
            if d < c.shared_ranks {
                let ps = c.per_shared();
                let i = d / ps;
                for s in (0..c.ranks).filter(|s| s % ps == d % ps) {
                    for t in 0..c.active[s] {
                        rows.push(make_row(s, t, k + i, i, c.gain_index(d, 0)));
                    }
                }
                return rows;
            }
            // The (token, k) pairs of source s bound for local expert l of this rank.
            let bound = |s: usize, t: usize, kk: usize| -> Option<(usize, usize)> {
                let e = inp.ids[(s * c.bs + t) * k + kk] as usize;
                let (rank, l) = c.place(e, r.placement);
                (rank == d).then_some((l, e))
            };
            match r.expand_order {
                ExpandOrder::ExpertSourceToken => {
                    'blocks: for l in 0..c.local {
                        for s in 0..c.ranks {
                            let before = rows.len();
                            for t in 0..c.active[s] {
                                for kk in 0..k {
                                    if let Some((_, e)) = bound(s, t, kk).filter(|&(ll, _)| ll == l)
                                    {
                                        rows.push(make_row(
                                            s,
                                            t,
                                            kk,
                                            c.shared_experts + e,
                                            c.gain_index(d, l),
                                        ));
                                    }
                                }
                            }
                            if rows.len() == before && r.empty_blocks == EmptyBlocks::StopReceiving
                            {
                                break 'blocks;
                            }
                        }
                    }
                }
                ExpandOrder::SourceToken => {
                    for s in 0..c.ranks {
                        for t in 0..c.active[s] {
                            for kk in 0..k {
                                if let Some((l, e)) = bound(s, t, kk) {
                                    rows.push(make_row(
                                        s,
                                        t,
                                        kk,
                                        c.shared_experts + e,
                                        c.gain_index(d, l),
                                    ));
                                }
                            }
                        }
                    }
                }
            }
            rows
        })
    }

    /// `expert_token_nums` of every rank from the received rows.
    pub(super) fn token_nums(
        &self,
        c: &Case,
        r: &MoeRecipe,
        inp: &Inputs,
        rows: &[Vec<Row>],
    ) -> Vec<i64> {
        let cumsum = c.cumsum != (r.token_nums == TokenNums::Swapped);
        let mut out = Vec::with_capacity(c.token_nums_len());
        for (d, rr) in rows.iter().enumerate() {
            if d < c.shared_ranks {
                out.push(rr.len() as i64);
                continue;
            }
            let mut counts = vec![0i64; c.local];
            for row in rr {
                let e = inp.ids[(row.source * c.bs + row.token) * c.top_k + row.slot] as usize;
                counts[c.place(e, r.placement).1] += 1;
            }
            let mut acc = 0i64;
            for n in counts {
                acc = if cumsum { acc + n } else { n };
                out.push(acc);
            }
        }
        out
    }

    /// The expert step of one row: `round_dtype(fl32(deq * gain))`.
    pub(super) fn expert_out(&self, c: &Case, inp: &Inputs, row: &Row) -> Vec<f32> {
        let g = decode(c.dtype, inp.gain[row.gain]);
        (0..c.hidden)
            .map(|j| {
                let deq = if c.quant {
                    row.q[j] as f32 * row.scale
                } else {
                    decode(c.dtype, row.data[j])
                };
                decode(
                    c.dtype,
                    round_f32(c.dtype, deq * g, RoundingMode::NearestTiesToEven),
                )
            })
            .collect()
    }
}
