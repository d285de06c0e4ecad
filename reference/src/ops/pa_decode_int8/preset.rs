//! `pa_decode_int8` as a [`PresetFamily`]: a case parsed and checked against the API's rules,
//! the oracle and a recipe run on its inputs, the regimes planted, the presets by name, and an
//! attention edit run on the attention half.

use super::*;

impl PresetFamily for PaDecodeInt8 {
    type Case = Case;
    type Recipe = C8Recipe;
    const PRESETS: &'static [&'static str] = &PRESETS;

    fn case(&self, v: &serde_json::Value) -> Result<Case, OpError> {
        let p: Params = parse_params(OP, v)?;
        if !matches!(p.dtype, DType::Bf16 | DType::F16) {
            return Err(invalid(
                OP,
                "dtype",
                "the query and the new rows are bf16 or f16 (the page's antiquant query types)",
            ));
        }
        if !matches!(
            p.input_layout,
            InputLayout::Bsnd | InputLayout::Bnsd | InputLayout::Bsh
        ) {
            return Err(invalid(OP, "input_layout", "must be BSND, BNSD or BSH"));
        }
        if p.cache_layout == KvCacheLayout::BnNBsD && p.input_layout != InputLayout::Bnsd {
            return Err(invalid(
                OP,
                "cache_layout",
                "BnNBsD (blocknum, KV_N, block_size, D) is allowed only with BNSD queries (FIA page, PagedAttention)",
            ));
        }
        if !p.block_size.is_multiple_of(32) {
            return Err(invalid(
                OP,
                "block_size",
                &format!(
                    "{}: an INT8 cache needs a multiple of 32 (FIA page, PagedAttention)",
                    p.block_size
                ),
            ));
        }
        let (k, v2) = (p.key_antiquant_mode, p.value_antiquant_mode);
        if k > 1 || v2 > 1 {
            return Err(invalid(
                OP,
                if k > 1 {
                    "key_antiquant_mode"
                } else {
                    "value_antiquant_mode"
                },
                "0 (per-channel) or 1 (per-token); the page's modes 2..6 are not modelled",
            ));
        }
        if k != v2 && !(k == 0 && v2 == 1) {
            return Err(invalid(
                OP,
                "value_antiquant_mode",
                "must equal key_antiquant_mode, except key 0 with value 1 (FIA page)",
            ));
        }
        if k == 0 && v2 == 1 && p.dtype != DType::F16 {
            return Err(invalid(
                OP,
                "dtype",
                "key per-channel with value per-token over INT8 needs an f16 query and output (FIA page, mode 3)",
            ));
        }
        check_new_tokens(OP, p.new_tokens, &p.actual_seq_lengths_kv)?;
        let pd = PaDecodeParams {
            dtype: p.dtype,
            input_layout: p.input_layout,
            batch: p.batch,
            q_seq: 1,
            num_heads: p.num_heads,
            num_key_value_heads: p.num_key_value_heads,
            head_dim: p.head_dim,
            scale: p.scale,
            sparse_mode: 0,
            pre_tokens: None,
            next_tokens: None,
            actual_seq_lengths_kv: p.actual_seq_lengths_kv.clone(),
            actual_seq_lengths: None,
            block_size: p.block_size,
            cache_layout: p.cache_layout,
            num_blocks: p.num_blocks,
            max_blocks: p.max_blocks,
            shared_prefix_blocks: 0,
            atten_mask: false,
            softmax_lse_flag: false,
            q_tile: None,
            vector_cores: p.vector_cores,
        };
        let plan = pd.plan().map_err(|e| match e {
            OpError::InvalidParam { param, message, .. } => OpError::InvalidParam {
                op: OP.into(),
                param,
                message,
            },
            other => other,
        })?;
        Ok(Case {
            key_mode: k,
            value_mode: v2,
            p,
            plan,
        })
    }

    fn run_oracle(
        &self,
        c: &Case,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let d = self.decoded(c, inputs)?;
        self.check_table(c, &d.table)?;
        let g = &c.plan.g;
        let cg = c.cache();
        let layout = c.p.cache_layout;
        let (kvh, hd) = (g.kv_heads, g.head_dim);
        // The write is bit-defined (vLLM-Ascend's torch ops on the rows' dtype), so the oracle
        // writes as the kernel preset does; only the dequantisation and the attention are exact.
        let kernel = C8Recipe::preset("ascend_ifa_c8").expect("the kernel preset exists");
        let (kc, vc) = self.write(c, &kernel, &d)?;
        let caches = [kc, vc];
        // The exact dequantisation: (y + o) * s is exact in f64; its f32 form must be too.
        let mut deq = [
            vec![f32::NAN; caches[0].len()],
            vec![f32::NAN; caches[1].len()],
        ];
        let width = c.plan.max_blocks;
        for which in 0..2 {
            let qp = if which == 0 { &d.kp } else { &d.vp };
            for b in 0..g.batch {
                for pos in 0..g.lk[b] {
                    let blk = d.table[b * width + pos / cg.block_size] as usize;
                    for h in 0..kvh {
                        for e in 0..hd {
                            let at = layout.offset(&cg, blk, pos % cg.block_size, h, e);
                            let (s, o) = qp.at(qp.index(c, &kernel, b, pos, h, e));
                            let v = (caches[which][at] as f64 + o as f64) * s as f64;
                            if (v as f32) as f64 != v {
                                return Err(failed(format!(
                                    "the oracle needs (y + offset) * scale exact in f32; ({} + {o}) * {s} is not",
                                    caches[which][at]
                                )));
                            }
                            deq[which][at] = v as f32;
                        }
                    }
                }
            }
        }
        let kv = PagedKv {
            key_cache: CacheData::F32(&deq[0]),
            value_cache: CacheData::F32(&deq[1]),
            layout,
            cache: cg,
            block_table: &d.table,
            max_blocks: c.plan.max_blocks,
        };
        let (k, v) = gather_contiguous(g, &kv).map_err(|e| op_error(OP, e))?;
        let ins = AttentionInputs {
            query: &d.query,
            key: &k,
            value: &v,
            atten_mask: None,
        };
        let o = oracle(g, &ins, threads).map_err(|e| op_error(OP, e))?;
        let mut m = oracle_outputs(g, &o.out, &o.lse);
        let shape = layout.shape(&cg);
        for (name, cache) in ["key_cache_out", "value_cache_out"]
            .into_iter()
            .zip(&caches)
        {
            let vals: Vec<f64> = cache.iter().map(|&y| y as f64).collect();
            m.insert(name.into(), Tensor::of_f64(shape.clone(), &vals));
        }
        Ok(m)
    }

    fn run_recipe(
        &self,
        c: &Case,
        r: &C8Recipe,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let attn = self.attention_recipe(c, r)?;
        self.run_recipe_with(c, r, &attn, inputs, threads)
    }

    /// Makes every regime of `regimes` true among the new rows (see the module doc).
    ///
    /// - `rounding_ties`: per cache, 8 elements at distinct (row, head, d) get a power-of-two
    ///   scale `2^-e` (their channel's, per-channel; their token's, per-token) and the value
    ///   `x = (k + 1/2 + o) * 2^-e` with `k` even: `x * inv` is then exact and the write's
    ///   value before the cast is the tie `k + 1/2` (checked with the recipe's arithmetic).
    /// - `kv_int8_edges`: per cache, 8 other elements get `x = +-150 * s` (rounded to the
    ///   dtype): their scaled value is far beyond the int8 range, so the clamp decides them.
    fn impose(
        &self,
        c: &Case,
        regimes: &[Regime],
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError> {
        if regimes
            .iter()
            .any(|&r| attention_half::is_attention_half(r))
        {
            return attention_half::impose(c, regimes, m, ctx);
        }
        let rec = regime_recipe(ctx);
        let g = &c.plan.g;
        let (kvh, hd) = (g.kv_heads, g.head_dim);
        let dtype = g.dtype;
        let et = ElemType::from(dtype);
        let per_row = kvh * hd;
        for (which, mode) in [("key", c.key_mode), ("value", c.value_mode)] {
            // Distinct elements of the new rows, in random order.
            let mut cells: Vec<usize> = (0..c.rows() * per_row).collect();
            ctx.shuffle(&mut cells);
            let mut cells = cells.into_iter();
            let sname = format!("{which}_antiquant_scale");
            let oname = format!("{which}_antiquant_offset");
            let mut scale = m
                .get(&sname)
                .ok_or_else(|| failed(format!("no {sname}")))?
                .to_f64_vec();
            let offset = m.get(&oname).map(|t| t.to_f64_vec());
            let mut x: Vec<f64> = m
                .get(which)
                .ok_or_else(|| failed(format!("no {which}")))?
                .to_f64_vec();
            let index = |cell: usize| -> usize {
                let (row, h, e) = (cell / per_row, (cell % per_row) / hd, cell % hd);
                let (b, pos) = c.row_position(row);
                if mode == 0 {
                    h * hd + e
                } else {
                    b * c.token_len() + pos
                }
            };
            // Parameters the ties fix: no edge element may share them afterwards with a
            // different scale, so the ties go first and the edges read the final scales.
            let mut fixed: Vec<usize> = Vec::new();
            if regimes.contains(&Regime::RoundingTies) {
                let mut planted = 0;
                for cell in cells.by_ref() {
                    if planted == TIE_ELEMENTS {
                        break;
                    }
                    let i = index(cell);
                    // A parameter another tie fixed keeps its scale; a fresh one gets 2^-e.
                    if !fixed.contains(&i) {
                        scale[i] = pow2(-(5 + ctx.below(3) as i32));
                        fixed.push(i);
                    }
                    let s = scale[i];
                    let o = offset.as_ref().map_or(0.0, |v| v[i]);
                    let k = 2 * ctx.below(4) as i64; // even, 0..=6
                    let sign = if ctx.below(2) == 0 { 1.0 } else { -1.0 };
                    let t = sign * (k as f64 + 0.5);
                    let xv = (t + o) * s;
                    // x must be exact in the dtype and the write must see the tie.
                    let xr =
                        Tensor::round_values(et, vec![1], &[xv], Rounding::RNE).to_f64_vec()[0];
                    if xr != xv {
                        continue;
                    }
                    let before = pre_cast(dtype, mode, &rec, xv as f32, s as f32, o as f32);
                    if before as f64 != t {
                        return Err(failed(format!(
                            "rounding_ties: {xv} scaled to {before}, not the tie {t} under this recipe"
                        )));
                    }
                    x[cell] = xv;
                    planted += 1;
                }
                if planted < TIE_ELEMENTS {
                    return Err(failed(
                        "rounding_ties: not enough new-row elements for the ties",
                    ));
                }
            }
            if regimes.contains(&Regime::KvInt8Edges) {
                for k in 0..2 * EDGE_ELEMENTS {
                    let cell = cells
                        .next()
                        .ok_or_else(|| failed("kv_int8_edges: out of new-row elements"))?;
                    let i = index(cell);
                    let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
                    x[cell] = sign * 150.0 * scale[i];
                }
            }
            let dt = m.get(&sname).map(|t| t.dtype).unwrap_or(ElemType::F32);
            let pshape = m.get(&sname).map(|t| t.shape.clone()).unwrap_or_default();
            m.insert(sname, param_tensor(dt, pshape, &scale));
            m.insert(
                which.into(),
                Tensor::round_values(et, vec![c.rows(), kvh, hd], &x, Rounding::RNE),
            );
        }
        Ok(())
    }

    fn recipe_preset(_: &Case, name: &str) -> Option<C8Recipe> {
        C8Recipe::preset(name)
    }

    /// The attention recipe's edits (a tie rule, a rescale): the attention half runs that
    /// recipe on the dequantised cache, so they are faults of this family too.
    fn run_other_edit(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        edit: &crate::ops::RecipeEdit,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<Option<TensorMap>, OpError> {
        let Some(apply) = edit.of::<crate::attention::Recipe>() else {
            return Ok(None);
        };
        if recipe == crate::ops::ORACLE {
            return Ok(None);
        }
        let c = self.case(params)?;
        let r = preset_family::preset(self, &c, recipe)?;
        let mut attn = self.attention_recipe(&c, &r)?;
        if !apply(&mut attn) {
            return Ok(None);
        }
        self.run_recipe_with(&c, &r, &attn, inputs, threads)
            .map(Some)
    }
}
