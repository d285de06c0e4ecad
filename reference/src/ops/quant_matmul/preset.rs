//! `quant_matmul` as a [`PresetFamily`]: a case parsed and checked against the API's rules,
//! the oracle and a recipe run on its inputs, the presets by name, and which knobs a case
//! reaches (the regimes are planted in `regimes.rs`).

use super::*;

impl PresetFamily for QuantMatmul {
    type Case = Case;
    type Recipe = QmmRecipe;
    const PRESETS: &'static [&'static str] = &PRESETS;

    fn case(&self, v: &serde_json::Value) -> Result<Case, OpError> {
        let p: Params = parse_params(OP, v)?;
        for (name, val) in [("m", p.m), ("k", p.k), ("n", p.n)] {
            if val == 0 {
                return Err(invalid(name, "must be positive"));
            }
        }
        if p.k > MAX_K {
            return Err(invalid(
                "k",
                format!("{} is above {MAX_K}: conform refuses a k where an int32 accumulator of int8 products could overflow (128 * 128 * k >= 2^31), rather than model the wrap", p.k),
            ));
        }
        let big = |a: usize, b: usize| a.checked_mul(b).is_none_or(|x| x > 1 << 28);
        if big(p.m, p.k) || big(p.k, p.n) || big(p.m, p.n) {
            return Err(invalid("m/k/n", "a tensor of more than 2^28 elements"));
        }
        let out = match p.out.as_str() {
            "bf16" => ElemType::Bf16,
            "f16" => ElemType::F16,
            "int8" => ElemType::I8,
            other => {
                return Err(invalid(
                    "out",
                    format!("`{other}`: bf16, f16 or int8 (the int32 output is not modelled)"),
                ))
            }
        };
        let scale = match p.scale.as_str() {
            "f32" => ScaleKind::F32,
            "bf16" => ScaleKind::Bf16,
            "packed" => ScaleKind::Packed,
            other => {
                return Err(invalid(
                    "scale",
                    format!("`{other}`: f32, bf16 or packed (npu_trans_quant_param's int64)"),
                ))
            }
        };
        let bias = match p.bias.as_str() {
            "none" => BiasKind::None,
            "i32" => BiasKind::I32,
            "f32" => BiasKind::F32,
            "bf16" => BiasKind::Bf16,
            other => {
                return Err(invalid(
                    "bias",
                    format!("`{other}`: none, i32, f32 or bf16"),
                ))
            }
        };
        // The API page's table of accepted combinations.
        if p.offset && out != ElemType::I8 {
            return Err(invalid(
                "offset",
                "an offset is for the int8 output only (the API's table)",
            ));
        }
        match (scale, out) {
            (ScaleKind::Packed, ElemType::F16 | ElemType::I8) => {
                if p.pertoken {
                    return Err(invalid("pertoken", "the packed (int64) scale takes no pertoken_scale (the API's table)"));
                }
                if !matches!(bias, BiasKind::None | BiasKind::I32) {
                    return Err(invalid("bias", "with the packed scale the bias is int32 or none (the API's table)"));
                }
            }
            (_, ElemType::I8) => {
                return Err(invalid("scale", "the int8 output needs the packed (int64) scale: the API page requires npu_trans_quant_param first"))
            }
            (ScaleKind::Packed, _) => {
                return Err(invalid("scale", "the packed (int64) scale is for an f16 (or int8) output (the API's table)"))
            }
            (ScaleKind::Bf16, ElemType::F16) => {
                return Err(invalid("scale", "a bf16 scale is for a bf16 output (the API's table)"))
            }
            (ScaleKind::F32, ElemType::F16) if !p.pertoken => {
                return Err(invalid("scale", "an f16 output without pertoken_scale needs the packed scale: the API page requires npu_trans_quant_param first"))
            }
            _ => {}
        }
        if out == ElemType::F16 && bias == BiasKind::Bf16 {
            return Err(invalid(
                "bias",
                "a bf16 bias is for a bf16 output (the API's table)",
            ));
        }
        Ok(Case {
            m: p.m,
            k: p.k,
            n: p.n,
            out,
            scale,
            pertoken: p.pertoken,
            bias,
            offset: p.offset,
        })
    }

    fn run_oracle(
        &self,
        c: &Case,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let d = self.decoded(c, inputs)?;
        let (m, k, n) = (c.m, c.k, c.n);
        // Only the packing of the scale is read here, the same in every variant.
        let kernel = QmmRecipe::kernel(ScaleOrder::ScaleThenToken);
        let x2t = transpose_widened(&d.x2, k, n, i32::MIN);
        let parts = map_tasks(m, threads, |i| {
            let a: Vec<i16> = d.x1[i * k..(i + 1) * k].iter().map(|&v| v as i16).collect();
            (0..n)
                .map(|j| {
                    // Exact: |sum| <= 2^14 * k <= 2^30.
                    let mut acc = dot_i16(&a, &x2t[j * k..(j + 1) * k]) as i64;
                    if let Some(b) = d.ibias.as_ref() {
                        acc += b[j] as i64;
                    }
                    let s = if c.scale == ScaleKind::Packed {
                        kernel.pack(d.scale[j])
                    } else {
                        d.scale[j]
                    };
                    if c.out == ElemType::I8 {
                        let off = d.offset.as_ref().map_or(0, |o| o[j]);
                        return oracle_requant(acc, s, off);
                    }
                    let t = d.pertoken.as_ref().map(|p| p[i]);
                    let fb = d.fbias.as_ref().map(|v| v[j]);
                    oracle_value(acc, s, t, fb)
                })
                .collect::<Vec<f64>>()
        });
        let y: Vec<f64> = parts.into_iter().flatten().collect();
        Ok(TensorMap::from([(
            "y".to_string(),
            Tensor::of_f64(vec![m, n], &y),
        )]))
    }

    /// Runs `r` (edited or not) on the inputs.
    fn run_recipe(
        &self,
        c: &Case,
        r: &QmmRecipe,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let d = self.decoded(c, inputs)?;
        let (m, k, n) = (c.m, c.k, c.n);
        let read = |v: i8| -> i32 { (v as i32).max(r.operand_min as i32) };
        let x2t = transpose_widened(&d.x2, k, n, r.operand_min as i32);
        let scales: Vec<f32> = (0..n)
            .map(|j| {
                let s = d.scale[if r.per_tensor_scale { 0 } else { j }];
                if c.scale == ScaleKind::Packed {
                    r.pack(s)
                } else {
                    s
                }
            })
            .collect();
        const ROWS: usize = 4;
        let parts = map_tasks(m.div_ceil(ROWS), threads, |task| {
            let mut out = Vec::with_capacity(ROWS * n);
            let mut a = vec![0i16; k];
            for i in task * ROWS..((task + 1) * ROWS).min(m) {
                for (p, v) in a.iter_mut().enumerate() {
                    *v = read(d.x1[i * k + p]) as i16;
                }
                for j in 0..n {
                    let b = &x2t[j * k..(j + 1) * k];
                    let ib = d.ibias.as_ref().map_or(0, |v| v[j]);
                    let before = r.int_bias == IntBiasPlace::BeforeDequant;
                    let acc = match r.accumulation {
                        Accumulation::Int32 => {
                            let s = dot_i16(&a, b);
                            i32_to_f32(if before { s.wrapping_add(ib) } else { s }, r.acc_to_f32)
                        }
                        Accumulation::F32Sequential => {
                            let mut s = 0.0f32;
                            for (&x, &y) in a.iter().zip(b) {
                                s += (x as i32 * y as i32) as f32; // exact products (< 2^15)
                            }
                            if before {
                                s + i32_to_f32(ib, r.acc_to_f32)
                            } else {
                                s
                            }
                        }
                    };
                    let t = d.pertoken.as_ref().map(|p| match r.token_axis {
                        TokenAxis::Row => p[i],
                        TokenAxis::ColumnModM => p[j % m],
                    });
                    let fb = d.fbias.as_ref().map(|v| v[j]);
                    let after = if before {
                        0.0
                    } else {
                        i32_to_f32(ib, r.acc_to_f32)
                    };
                    if c.out == ElemType::I8 {
                        let off = d.offset.as_ref().map_or(0, |o| o[j]);
                        out.push(r.requant(acc, scales[j], off) as u8 as u16);
                        continue;
                    }
                    let y = r.epilogue(acc, scales[j], t, fb, after);
                    out.push(r.cast_out(c.out, y));
                }
            }
            out
        });
        let y: Vec<u16> = parts.into_iter().flatten().collect();
        let y = if c.out == ElemType::I8 {
            let b: Vec<i8> = y.iter().map(|&v| v as u8 as i8).collect();
            Tensor::from_i8(vec![m, n], &b)
        } else {
            Tensor::from_bits16(c.out, vec![m, n], &y)
        };
        Ok(TensorMap::from([("y".to_string(), y)]))
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

    /// An edit of a knob this case does not reach changes nothing.
    fn edit_reaches(&self, c: &Case, r: &QmmRecipe, kernel: &QmmRecipe) -> bool {
        if r.int_bias != kernel.int_bias {
            c.bias == BiasKind::I32
        } else if r.float_bias != kernel.float_bias {
            matches!(c.bias, BiasKind::F32 | BiasKind::Bf16)
        } else if r.scale_pack != kernel.scale_pack {
            c.scale == ScaleKind::Packed
        } else if r.scale_order != kernel.scale_order || r.token_axis != kernel.token_axis {
            c.pertoken
        } else if r.offset_place != kernel.offset_place || r.offset_negated != kernel.offset_negated
        {
            c.offset
        } else if r.requant_rounding != kernel.requant_rounding || r.saturate != kernel.saturate {
            c.out == ElemType::I8
        } else if r.output_rounding != kernel.output_rounding {
            c.out != ElemType::I8
        } else {
            true
        }
    }

    fn recipe_preset(c: &Case, name: &str) -> Option<QmmRecipe> {
        if name == DISPATCHING {
            let d = crate::ops::quant_matmul_variants::dispatch(
                &c.shape(),
                &crate::ops::quant_matmul_variants::MODELLED,
            );
            return QmmRecipe::preset(d.variant.preset);
        }
        QmmRecipe::preset(name)
    }
}
