//! `mla_decode` as a [`PresetFamily`]: a case parsed and checked against the API's rules, the
//! oracle and a recipe run on its inputs, the regimes planted (`regimes.rs`), the preset by
//! name.

use super::*;

impl PresetFamily for MlaDecode {
    type Case = Case;
    type Recipe = MlaRecipe;
    const PRESETS: &'static [&'static str] = &PRESETS;

    fn case(&self, v: &serde_json::Value) -> Result<Case, OpError> {
        let p: Params = parse_params(OP, v)?;
        if !matches!(p.dtype, DType::Bf16 | DType::F16) {
            return Err(invalid(
                OP,
                "dtype",
                "query, rope and caches are bf16 or f16 (FIA page, MLA)",
            ));
        }
        if !matches!(p.input_layout, InputLayout::Bnsd | InputLayout::Bsnd) {
            return Err(invalid(OP, "input_layout", "must be BNSD or BSND"));
        }
        if !HEADS.contains(&p.num_heads) {
            return Err(invalid(
                OP,
                "num_heads",
                &format!(
                    "{} is not one of the MLA path's head counts {HEADS:?} (FIA page)",
                    p.num_heads
                ),
            ));
        }
        if p.block_size != 16 && p.block_size != 128 {
            return Err(invalid(
                OP,
                "block_size",
                &format!(
                    "{}: the MLA path takes block_size 16 or 128 (FIA page)",
                    p.block_size
                ),
            ));
        }
        if !p.scale.is_finite() || p.scale <= 0.0 {
            return Err(invalid(
                OP,
                "scale",
                &format!("{} must be finite and positive", p.scale),
            ));
        }
        if p.batch == 0 {
            return Err(invalid(OP, "batch", "must be positive"));
        }
        check_new_tokens(OP, p.new_tokens, &p.actual_seq_lengths_kv)?;
        // The block arithmetic is pa_decode's (one KV head, the latent width).
        let pd = PaDecodeParams {
            dtype: p.dtype,
            input_layout: p.input_layout,
            batch: p.batch,
            q_seq: 1,
            num_heads: p.num_heads,
            // Only the block arithmetic is used; 0 keeps the head-ratio limit out of it.
            num_key_value_heads: 0,
            head_dim: LATENT,
            scale: Some(p.scale),
            sparse_mode: 0,
            pre_tokens: None,
            next_tokens: None,
            actual_seq_lengths_kv: p.actual_seq_lengths_kv.clone(),
            actual_seq_lengths: None,
            block_size: p.block_size,
            cache_layout: KvCacheLayout::BnNBsD,
            num_blocks: p.num_blocks,
            max_blocks: p.max_blocks,
            shared_prefix_blocks: 0,
            atten_mask: false,
            softmax_lse_flag: p.softmax_lse_flag,
            q_tile: None,
            vector_cores: None,
        };
        let plan = pd.plan().map_err(|e| match e {
            OpError::InvalidParam { param, message, .. } => OpError::InvalidParam {
                op: OP.into(),
                param,
                message,
            },
            other => other,
        })?;
        let mut c = AttentionConfig::new(
            p.dtype,
            p.batch,
            1,
            plan.max_blocks * p.block_size,
            p.num_heads,
            1,
            KEY,
        );
        c.value_head_dim = LATENT;
        c.input_layout = p.input_layout;
        c.scale = Some(p.scale);
        c.actual_seq_lengths_kv = Some(p.actual_seq_lengths_kv.clone());
        c.softmax_lse_flag = p.softmax_lse_flag;
        let g = c.geometry().map_err(|e| op_error(OP, e))?;
        Ok(Case {
            num_blocks: plan.cache.num_blocks,
            max_blocks: plan.max_blocks,
            used: plan.used,
            p,
            g,
        })
    }

    fn run_oracle(
        &self,
        c: &Case,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let d = self.decoded(c, inputs)?;
        let (kv_cache, rope_cache) = self.write(c, &d, 0)?;
        let blocks = self.blocks(c, &d.table)?;
        let g = &c.g;
        let exact = MlaRecipe::preset("ascend_mla", c.p.dtype).expect("the preset exists");
        // Contiguous query, key and value tensors in the geometry's layout.
        let mut query = vec![0.0f32; g.q_len()];
        let mut key = vec![0.0f32; g.kv_len()];
        let mut value = vec![0.0f32; g.v_len()];
        for (b, blk) in blocks.iter().enumerate() {
            let q = Self::query_rows(c, &d, b);
            for h in 0..c.p.num_heads {
                let o = g.q_offset(b, 0, h);
                query[o..o + KEY].copy_from_slice(&q[h * KEY..(h + 1) * KEY]);
            }
            let (k, v) = Self::gather(c, &exact, blk, b, 0, &kv_cache, &rope_cache);
            for j in 0..g.lk[b] {
                let o = g.kv_offset(b, j, 0);
                key[o..o + KEY].copy_from_slice(&k[j * KEY..(j + 1) * KEY]);
                let o = g.v_offset(b, j, 0);
                value[o..o + LATENT].copy_from_slice(&v[j * LATENT..(j + 1) * LATENT]);
            }
        }
        let ins = AttentionInputs {
            query: &query,
            key: &key,
            value: &value,
            atten_mask: None,
        };
        let o = oracle(g, &ins, threads).map_err(|e| op_error(OP, e))?;
        let mut m = oracle_outputs(g, &o.out, &o.lse);
        for (name, cache, width) in [
            ("kv_cache_out", &kv_cache, LATENT),
            ("rope_cache_out", &rope_cache, ROPE),
        ] {
            let vals: Vec<f64> = cache.iter().map(|&x| Self::decode16(c, x) as f64).collect();
            m.insert(name.into(), Tensor::of_f64(c.cache_shape(width), &vals));
        }
        Ok(m)
    }

    fn run_recipe(
        &self,
        c: &Case,
        r: &MlaRecipe,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let d = self.decoded(c, inputs)?;
        let (kv_cache, rope_cache) = self.write(c, &d, r.slot_shift)?;
        let blocks = self.blocks(c, &d.table)?;
        let mut g = c.g.clone();
        if r.scale_from_width {
            g.scale = (1.0 / crate::math::sqrt_f64(KEY as f64)) as f32;
        }
        let mut queries: Vec<Vec<f32>> =
            (0..c.p.batch).map(|b| Self::query_rows(c, &d, b)).collect();
        if r.flushes_subnormal_inputs {
            for x in queries.iter_mut().flatten() {
                *x = Self::flushed(c, *x);
            }
        }
        let (out, lse) = if r.kv_head_per_query_head {
            // Every head reads its own (wrong) KV rows: one problem per (batch, head).
            let mut out = vec![0.0f32; g.out_len()];
            let mut lse = vec![0.0f32; g.lse_len()];
            let mut one = AttentionConfig::new(c.p.dtype, 1, 1, g.kv_seq, 1, 1, KEY);
            one.value_head_dim = LATENT;
            one.scale = Some(g.scale as f64);
            one.input_layout = InputLayout::Bnsd;
            for b in 0..c.p.batch {
                one.actual_seq_lengths_kv = Some(vec![g.lk[b] as i64]);
                let g1 = one.geometry().map_err(|e| op_error(OP, e))?;
                for h in 0..c.p.num_heads {
                    let (keys, values) =
                        Self::gather(c, r, &blocks[b], b, h, &kv_cache, &rope_cache);
                    let p = [MlaBatch {
                        query: &queries[b][h * KEY..(h + 1) * KEY],
                        keys: &keys,
                        values: &values,
                        lk: g.lk[b],
                    }];
                    let (o, l) = mla::mla_decode(&g1, &r.kernel, &p, threads)
                        .map_err(|e| op_error(OP, e))?;
                    let off = g.out_offset(b, 0, h);
                    out[off..off + LATENT].copy_from_slice(&o);
                    lse[g.lse_index(b, 0, h)] = l[0];
                }
            }
            (out, lse)
        } else {
            let kvs: Vec<(Vec<f32>, Vec<f32>)> = (0..c.p.batch)
                .map(|b| Self::gather(c, r, &blocks[b], b, 0, &kv_cache, &rope_cache))
                .collect();
            let problems: Vec<MlaBatch> = (0..c.p.batch)
                .map(|b| MlaBatch {
                    query: &queries[b],
                    keys: &kvs[b].0,
                    values: &kvs[b].1,
                    lk: g.lk[b],
                })
                .collect();
            mla::mla_decode(&g, &r.kernel, &problems, threads).map_err(|e| op_error(OP, e))?
        };
        let mut m = recipe_outputs(&g, &out, g.softmax_lse_flag.then_some(&lse[..]));
        let et = ElemType::from(c.p.dtype);
        m.insert(
            "kv_cache_out".into(),
            Tensor::from_bits16(et, c.cache_shape(LATENT), &kv_cache),
        );
        m.insert(
            "rope_cache_out".into(),
            Tensor::from_bits16(et, c.cache_shape(ROPE), &rope_cache),
        );
        Ok(m)
    }

    fn impose(
        &self,
        c: &Case,
        regimes: &[Regime],
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError> {
        if regimes.contains(&Regime::MlaRopeLateMax) {
            self.impose_rope_late_max(c, m, ctx)?;
        }
        regimes::impose(self, c, regimes, m, ctx)
    }

    fn recipe_preset(c: &Case, name: &str) -> Option<MlaRecipe> {
        MlaRecipe::preset(name, c.p.dtype)
    }
}
