//! `pa_decode_int8`'s computation: a case's tensors, its decoded inputs and quantisation
//! parameters, the INT8 cache write and the dequantisation the attention half reads.

use super::*;

impl PaDecodeInt8 {
    pub(super) fn specs(&self, c: &Case) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
        let g = &c.plan.g;
        let et = ElemType::from(g.dtype);
        let cache_axes: &[&str] = match c.p.cache_layout {
            KvCacheLayout::BnNBsD => &["block", "n", "slot", "d"],
            _ => &["block", "slot", "h"],
        };
        let cshape = c.p.cache_layout.shape(&c.cache());
        let rows = c.rows();
        let mut inputs = vec![
            TensorSpec::new("query", et, g.q_shape(), g.in_axes()),
            TensorSpec::new(
                "key",
                et,
                vec![rows, g.kv_heads, g.head_dim],
                &["t", "n", "d"],
            ),
            TensorSpec::new(
                "value",
                et,
                vec![rows, g.kv_heads, g.head_dim],
                &["t", "n", "d"],
            ),
            TensorSpec::new("slot_mapping", ElemType::I32, vec![rows], &["t"]),
            TensorSpec::new("key_cache_in", ElemType::I8, cshape.clone(), cache_axes),
            TensorSpec::new("value_cache_in", ElemType::I8, cshape.clone(), cache_axes),
            TensorSpec::new(
                "block_table",
                ElemType::I32,
                vec![g.batch, c.plan.max_blocks],
                &["b", "block"],
            ),
        ];
        for (which, mode) in [("key", c.key_mode), ("value", c.value_mode)] {
            let (dt, shape, axes) = c.param_shape(mode);
            inputs.push(TensorSpec::new(
                &format!("{which}_antiquant_scale"),
                dt,
                shape.clone(),
                axes,
            ));
            if c.p.antiquant_offset {
                inputs.push(TensorSpec::new(
                    &format!("{which}_antiquant_offset"),
                    dt,
                    shape,
                    axes,
                ));
            }
        }
        let mut outputs = vec![
            TensorSpec::new("key_cache_out", ElemType::I8, cshape.clone(), cache_axes),
            TensorSpec::new("value_cache_out", ElemType::I8, cshape, cache_axes),
        ];
        outputs.extend(output_specs(g));
        (inputs, outputs)
    }

    pub(super) fn decoded(&self, c: &Case, inputs: &TensorMap) -> Result<Decoded, OpError> {
        let (specs, _) = self.specs(c);
        let get = |name: &str| -> Result<&Tensor, OpError> {
            let spec = specs
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| failed(format!("no input `{name}`")))?;
            input(OP, inputs, spec)
        };
        let f32s = |name: &str| -> Result<Vec<f32>, OpError> {
            get(name)?.to_f32_vec().map_err(|e| OpError::InvalidInput {
                op: OP.into(),
                input: name.into(),
                message: e.to_string(),
            })
        };
        let ints = |name: &str| -> Result<Vec<i64>, OpError> {
            get(name)?.to_i64_vec().map_err(|e| OpError::InvalidInput {
                op: OP.into(),
                input: name.into(),
                message: e.to_string(),
            })
        };
        Ok(Decoded {
            query: f32s("query")?,
            key: get("key")?.bits16().map_err(failed)?,
            value: get("value")?.bits16().map_err(failed)?,
            slots: ints("slot_mapping")?,
            key_cache: i8_values(get("key_cache_in")?),
            value_cache: i8_values(get("value_cache_in")?),
            table: ints("block_table")?,
            kp: self.quant_params(c, inputs, "key", c.key_mode)?,
            vp: self.quant_params(c, inputs, "value", c.value_mode)?,
        })
    }

    /// The scale and offset of `which` (`key` / `value`), checked: scales finite and
    /// positive, offsets finite.
    pub(super) fn quant_params(
        &self,
        c: &Case,
        inputs: &TensorMap,
        which: &str,
        mode: u32,
    ) -> Result<QuantParams, OpError> {
        let (specs, _) = self.specs(c);
        let f32s = |name: &str| -> Result<Vec<f32>, OpError> {
            let spec = specs
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| failed(format!("no input `{name}`")))?;
            input(OP, inputs, spec)?
                .to_f32_vec()
                .map_err(|e| OpError::InvalidInput {
                    op: OP.into(),
                    input: name.into(),
                    message: e.to_string(),
                })
        };
        let sname = format!("{which}_antiquant_scale");
        let scale = f32s(&sname)?;
        if let Some(i) = scale.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(OpError::InvalidInput {
                op: OP.into(),
                input: sname,
                message: format!(
                    "element {i} is {}: scales must be finite and positive",
                    scale[i]
                ),
            });
        }
        let offset = if c.p.antiquant_offset {
            let oname = format!("{which}_antiquant_offset");
            let o = f32s(&oname)?;
            if let Some(i) = o.iter().position(|v| !v.is_finite()) {
                return Err(OpError::InvalidInput {
                    op: OP.into(),
                    input: oname,
                    message: format!("element {i} is {}: offsets must be finite", o[i]),
                });
            }
            Some(o)
        } else {
            None
        };
        Ok(QuantParams {
            mode,
            scale,
            offset,
        })
    }

    pub(super) fn decode16(c: &Case, bits: u16) -> f32 {
        match c.p.dtype {
            DType::F16 => f16::f16_to_f32(bits),
            _ => bf16::bf16_to_f32(bits),
        }
    }

    /// The (block, slot) of slot-mapping entry `r`, after `shift`.
    pub(super) fn slot_of(
        c: &Case,
        slots: &[i64],
        r: usize,
        shift: usize,
    ) -> Result<(usize, usize), OpError> {
        let cg = c.cache();
        let total = cg.num_blocks * cg.block_size;
        let s = slots[r];
        if s < 0 || s as usize >= total {
            return Err(OpError::InvalidInput {
                op: OP.into(),
                input: "slot_mapping".into(),
                message: format!(
                    "entry {r} is {s}, outside the cache's {total} slots ({} blocks of {})",
                    cg.num_blocks, cg.block_size
                ),
            });
        }
        let s = (s as usize + shift) % total;
        Ok((s / cg.block_size, s % cg.block_size))
    }

    /// The write of the recipe: the new rows quantised into copies of the caches.
    pub(super) fn write(
        &self,
        c: &Case,
        r: &C8Recipe,
        d: &Decoded,
    ) -> Result<(Vec<i8>, Vec<i8>), OpError> {
        let g = &c.plan.g;
        let cg = c.cache();
        let layout = c.p.cache_layout;
        let (kvh, hd) = (g.kv_heads, g.head_dim);
        let mut out = [d.key_cache.clone(), d.value_cache.clone()];
        for (which, (rows, qp)) in [(&d.key, &d.kp), (&d.value, &d.vp)].into_iter().enumerate() {
            for row in 0..c.rows() {
                let (b, pos) = c.row_position(row);
                let (blk, slot) = Self::slot_of(c, &d.slots, row, r.slot_shift)?;
                for h in 0..kvh {
                    for e in 0..hd {
                        let x = Self::decode16(c, rows[(row * kvh + h) * hd + e]);
                        let (s, o) = qp.at(qp.index(c, r, b, pos, h, e));
                        let y = quantise(c.p.dtype, qp.mode, r, x, s, o);
                        out[which][layout.offset(&cg, blk, slot, h, e)] = y;
                    }
                }
            }
        }
        let [k, v] = out;
        Ok((k, v))
    }

    /// The caches dequantised by the recipe (NaN at slots no valid token occupies).
    pub(super) fn dequantise(
        &self,
        c: &Case,
        r: &C8Recipe,
        d: &Decoded,
        caches: [&[i8]; 2],
        threads: Threads,
    ) -> Result<[Vec<f32>; 2], OpError> {
        let g = &c.plan.g;
        let cg = c.cache();
        let layout = c.p.cache_layout;
        let width = c.plan.max_blocks;
        let (kvh, hd) = (g.kv_heads, g.head_dim);
        let mut out = [
            vec![f32::NAN; caches[0].len()],
            vec![f32::NAN; caches[1].len()],
        ];
        for which in 0..2 {
            let qp = if which == 1 && !r.value_uses_key_params {
                &d.vp
            } else {
                &d.kp
            };
            // Per batch entry, the (offset, value) pairs; batch entries own distinct blocks.
            let parts = map_tasks(g.batch, threads, |b| {
                let mut v = Vec::with_capacity(g.lk[b] * kvh * hd);
                for pos in 0..g.lk[b] {
                    let blk = d.table[b * width + pos / cg.block_size] as usize;
                    for h in 0..kvh {
                        for e in 0..hd {
                            let at = layout.offset(&cg, blk, pos % cg.block_size, h, e);
                            let (s, o) = qp.at(qp.index(c, r, b, pos, h, e));
                            let y = caches[which][at] as f32;
                            v.push((at, dequantise_one(c.p.dtype, r, y, s, o)));
                        }
                    }
                }
                v
            });
            for part in parts {
                for (at, x) in part {
                    out[which][at] = x;
                }
            }
        }
        Ok(out)
    }

    /// Checks that the block table's live entries name blocks inside the cache.
    pub(super) fn check_table(&self, c: &Case, table: &[i64]) -> Result<(), OpError> {
        let width = c.plan.max_blocks;
        for b in 0..c.p.batch {
            for j in 0..c.plan.used[b] {
                let e = table[b * width + j];
                if e < 0 || e as usize >= c.cache().num_blocks {
                    return Err(OpError::InvalidInput {
                        op: OP.into(),
                        input: "block_table".into(),
                        message: format!(
                            "entry [{b}][{j}] is {e}, outside the cache's {} blocks",
                            c.cache().num_blocks
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}
