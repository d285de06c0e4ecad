//! `dynamic_quant` as a [`PresetFamily`]: a case parsed and checked against the API's rules,
//! the oracle and a recipe run on its inputs, the regimes planted, the presets by name.

use super::*;

impl PresetFamily for DynamicQuant {
    type Case = Case;
    type Recipe = DqRecipe;
    const PRESETS: &'static [&'static str] = &PRESETS;

    fn case(&self, v: &serde_json::Value) -> Result<Case, OpError> {
        let p: Params = parse_params(OP, v)?;
        let dtype = crate::ops::x_dtype_16(OP, &p.dtype)?;
        if p.tokens == 0 || p.hidden == 0 {
            return Err(invalid(
                if p.tokens == 0 { "tokens" } else { "hidden" },
                "must be positive",
            ));
        }
        if p.tokens.checked_mul(p.hidden).is_none_or(|n| n > 1 << 30) {
            return Err(invalid("tokens/hidden", "more than 2^30 elements"));
        }
        if let Some(e) = p.groups {
            if !p.smooth {
                return Err(invalid(
                    "groups",
                    "group_index selects smooth rows: it needs `smooth = true`",
                ));
            }
            if e == 0 || e > p.tokens {
                return Err(invalid(
                    "groups",
                    format!(
                        "{e}: between 1 and tokens ({}), every group non-empty",
                        p.tokens
                    ),
                ));
            }
        }
        Ok(Case {
            tokens: p.tokens,
            hidden: p.hidden,
            dtype,
            smooth: p.smooth,
            groups: p.groups,
        })
    }

    fn run_oracle(
        &self,
        c: &Case,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let (x, smooth, rows) = self.decoded(c, inputs, GroupLookup::FirstEndAbove)?;
        let h = c.hidden;
        let parts = map_tasks(c.tokens, threads, |t| {
            let v: Vec<f64> = (0..h)
                .map(|j| {
                    let a = decode(c.dtype, x[t * h + j]) as f64;
                    match smooth.as_ref() {
                        Some(s) => a * decode(c.dtype, s[rows[t] * h + j]) as f64,
                        None => a,
                    }
                })
                .collect();
            oracle_row(&v)
        });
        let mut y = Vec::with_capacity(c.tokens * h);
        let mut scale = Vec::with_capacity(c.tokens);
        for (s, row) in parts {
            scale.push(s);
            y.extend(row.into_iter().map(f64::from));
        }
        Ok(TensorMap::from([
            ("y".to_string(), Tensor::of_f64(vec![c.tokens, h], &y)),
            ("scale".to_string(), Tensor::of_f64(vec![c.tokens], &scale)),
        ]))
    }

    /// Runs `recipe` (edited or not) on the inputs.
    fn run_recipe(
        &self,
        c: &Case,
        r: &DqRecipe,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        let (x, smooth, rows) = self.decoded(c, inputs, r.group_lookup)?;
        let h = c.hidden;
        let dtype = c.dtype;
        let load = |bits: u16| -> f32 {
            if r.flush_input_subnormals && dtype.is_half_subnormal(bits) {
                if bits & 0x8000 != 0 {
                    -0.0
                } else {
                    0.0
                }
            } else {
                decode(dtype, bits)
            }
        };
        // The values the row max is taken of, per row (f32, the kernel's one rounding of
        // x * s), and the values quantised.
        let row_values = |t: usize| -> (Vec<f32>, Vec<f32>) {
            let xs: Vec<f32> = x[t * h..(t + 1) * h].iter().map(|&b| load(b)).collect();
            let Some(s) = smooth.as_ref() else {
                return (xs.clone(), xs);
            };
            let srow = &s[rows[t] * h..(rows[t] + 1) * h];
            let prod: Vec<f32> = xs
                .iter()
                .zip(srow)
                .map(|(&a, &b)| a * decode(dtype, b))
                .collect();
            match r.smooth {
                SmoothOrder::BeforeMax => (prod.clone(), prod),
                SmoothOrder::AfterMax => (xs, prod),
                SmoothOrder::Skipped => (xs.clone(), xs),
            }
        };
        let row_max = |vals: &[f32]| -> f32 {
            vals.iter().fold(0.0f32, |m, &v| {
                let a = if r.signed_max { v } else { v.abs() };
                if a > m {
                    a
                } else {
                    m
                }
            })
        };
        const ROWS_PER_TASK: usize = 16;
        let tasks = c.tokens.div_ceil(ROWS_PER_TASK);
        let global = if r.per_tensor {
            let maxima = map_tasks(tasks, threads, |i| {
                (i * ROWS_PER_TASK..((i + 1) * ROWS_PER_TASK).min(c.tokens))
                    .map(|t| row_max(&row_values(t).0))
                    .fold(0.0f32, f32::max)
            });
            Some(maxima.into_iter().fold(0.0f32, f32::max))
        } else {
            None
        };
        let parts = map_tasks(tasks, threads, |i| {
            let mut y = Vec::new();
            let mut scales = Vec::new();
            for t in i * ROWS_PER_TASK..((i + 1) * ROWS_PER_TASK).min(c.tokens) {
                let (for_max, vals) = row_values(t);
                let amax = global.unwrap_or_else(|| row_max(&for_max));
                let (scale, factor) = r.scale_and_factor(amax);
                let scale = if amax == 0.0 && r.zero_row == ZeroRow::NanScale {
                    f32::NAN
                } else {
                    scale
                };
                scales.push(scale);
                y.extend(vals.iter().map(|&v| r.to_int8(r.scaled(v, factor))));
            }
            (y, scales)
        });
        let (mut y, mut scale) = (Vec::with_capacity(c.tokens * h), Vec::new());
        for (py, ps) in parts {
            y.extend(py);
            scale.extend(ps);
        }
        Ok(TensorMap::from([
            ("y".to_string(), Tensor::from_i8(vec![c.tokens, h], &y)),
            (
                "scale".to_string(),
                Tensor::from_f32(vec![c.tokens], &scale),
            ),
        ]))
    }

    /// Makes every regime of `regimes` true (see the module doc and docs/suites.md).
    ///
    /// Chosen rows are rebuilt: one element at a "power-of-two column" (whose smooth scale,
    /// in every group, is set to exactly 1/2, so `x * s` is exact) carries the row max `A`,
    /// and every other element is `u * 0.95 * A` rounded to the dtype for a uniform `u` in
    /// (-1, 1) (so its product with a smooth scale below 1 stays below `A`). Then:
    /// - `rounding_ties`: `A = 127 * 2^-p`, so the recipe's quotient is exactly `2^p`, and 8
    ///   power-of-two columns hold `(2k + 1) * 2^(-p-1)` with `k` even: exact ties that ties
    ///   to even and ties away round apart. Checked with the recipe's own arithmetic.
    /// - `quant_edge_rows`: 8 all-zero rows (+0 or -0 per element); a row whose max is `-A`;
    ///   a row whose max is the dtype's largest finite value; a tiny row (f16: every element
    ///   subnormal; bf16: max 2^-118..2^-116, above 127 / f32max so the quotient stays
    ///   finite, with subnormal elements); 8 rows whose `A` gives a scale under the recipe's
    ///   scale form different from both other forms.
    fn impose(
        &self,
        c: &Case,
        regimes: &[Regime],
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError> {
        let rec = regime_recipe(c, ctx);
        let h = c.hidden;
        let dtype = c.dtype;
        let mut x = m
            .get("x")
            .ok_or_else(|| failed("no x"))?
            .bits16()
            .map_err(failed)?;
        // Power-of-two columns.
        let mut cols: Vec<usize> = (0..h).collect();
        ctx.shuffle(&mut cols);
        let p2: Vec<usize> = cols[..POW2_COLUMNS].to_vec();
        let half = encode(dtype, 0.5);
        let s_of = |_col: usize| if c.smooth { 0.5f64 } else { 1.0 };
        if c.smooth {
            let s = m
                .get_mut("smooth_scales")
                .ok_or_else(|| failed("no smooth_scales"))?;
            let mut bits = s.bits16().map_err(failed)?;
            for g in 0..c.smooth_rows() {
                for &col in &p2 {
                    bits[g * h + col] = half;
                }
            }
            *s = Tensor::from_bits16(dtype, s.shape.clone(), &bits);
        }
        let mut rows: Vec<usize> = (0..c.tokens).collect();
        ctx.shuffle(&mut rows);
        let mut next = rows.into_iter();
        let mut take = || {
            next.next()
                .ok_or_else(|| failed("out of rows (checked before)"))
        };
        // A row of `u * 0.95 * a` values with `x_amax = sign * a / s` at column `amax_col`.
        let fill = |x: &mut [u16], t: usize, a: f64, ctx: &mut GenContext| {
            for j in 0..h {
                let u = 2.0 * ctx.unit() - 1.0;
                x[t * h + j] = encode(dtype, u * 0.95 * a);
            }
        };
        let put = |x: &mut [u16], t: usize, col: usize, v: f64| -> Result<(), OpError> {
            let xv = v / s_of(col);
            let b = encode(dtype, xv);
            if decode(dtype, b) as f64 != xv {
                return Err(failed(format!("{xv} is not exact in {}", dtype.name())));
            }
            x[t * h + col] = b;
            Ok(())
        };
        let sign = |ctx: &mut GenContext| if ctx.below(2) == 0 { 1.0 } else { -1.0 };
        for r in regimes {
            match r {
                Regime::RoundingTies => {
                    for _ in 0..TIE_ROWS {
                        let t = take()?;
                        // f16 keeps 2^(-p-1) normal and 127 * 2^-p finite for p in -3..=10.
                        let p = ctx.below(14) as i32 - 3;
                        let a = 127.0 * pow2(-p);
                        fill(&mut x, t, a, ctx);
                        let (_, factor) = rec.scale_and_factor(a as f32);
                        let mut slots = p2.clone();
                        ctx.shuffle(&mut slots);
                        put(&mut x, t, slots[0], sign(ctx) * a)?;
                        for &col in &slots[1..=TIES_PER_ROW] {
                            let k = 2 * ctx.below(63) as i64; // even, 0..=124
                            let v = sign(ctx) * (2 * k + 1) as f64 * pow2(-p - 1);
                            put(&mut x, t, col, v)?;
                            let q = rec.scaled(v as f32, factor) as f64;
                            if q.abs() != k as f64 + 0.5 {
                                return Err(failed(format!(
                                    "rounding_ties: {v} scaled to {q}, not the tie {k}.5 under this recipe"
                                )));
                            }
                        }
                    }
                }
                Regime::QuantEdgeRows => {
                    for _ in 0..ZERO_ROWS {
                        let t = take()?;
                        for j in 0..h {
                            x[t * h + j] = if ctx.below(2) == 0 { 0 } else { 0x8000 };
                        }
                    }
                    // Negative max.
                    let t = take()?;
                    let a = decode(dtype, encode(dtype, 0.5 + 1.5 * ctx.unit())) as f64;
                    fill(&mut x, t, a, ctx);
                    put(&mut x, t, p2[ctx.below(POW2_COLUMNS as u64) as usize], -a)?;
                    // The dtype's largest finite value (as x; the product with 1/2 is the max).
                    let t = take()?;
                    let big = max_finite(dtype) as f64;
                    let a = big * s_of(0);
                    fill(&mut x, t, a, ctx);
                    put(
                        &mut x,
                        t,
                        p2[ctx.below(POW2_COLUMNS as u64) as usize],
                        sign(ctx) * a,
                    )?;
                    // Tiny.
                    let t = take()?;
                    match dtype {
                        ElemType::F16 => {
                            // Row max a subnormal of 2^-17..2^-15 (x = a / s stays subnormal),
                            // every element subnormal or zero.
                            let a = (32.0 + ctx.below(96) as f64) * pow2(-22);
                            fill(&mut x, t, a, ctx);
                            put(
                                &mut x,
                                t,
                                p2[ctx.below(POW2_COLUMNS as u64) as usize],
                                sign(ctx) * a,
                            )?;
                        }
                        _ => {
                            let a = (128.0 + ctx.below(128) as f64) * pow2(-125);
                            fill(&mut x, t, a, ctx);
                            // Subnormal elements in the first columns that are not power-of-two
                            // columns.
                            for &j in cols[POW2_COLUMNS..].iter().take(8) {
                                let sub = (1 + ctx.below(127)) as f64 * pow2(-133);
                                x[t * h + j] = encode(dtype, sign(ctx) * sub);
                            }
                            put(
                                &mut x,
                                t,
                                p2[ctx.below(POW2_COLUMNS as u64) as usize],
                                sign(ctx) * a,
                            )?;
                        }
                    }
                    // Scale-form witnesses.
                    for _ in 0..WITNESS_ROWS {
                        let t = take()?;
                        let a = self.witness(dtype, &rec, ctx)?;
                        fill(&mut x, t, a, ctx);
                        put(
                            &mut x,
                            t,
                            p2[ctx.below(POW2_COLUMNS as u64) as usize],
                            sign(ctx) * a,
                        )?;
                    }
                }
                other => {
                    return Err(OpError::Regime {
                        op: OP.into(),
                        regime: other.name().into(),
                        message: "does not apply to this op".into(),
                    })
                }
            }
        }
        let xt = m.get_mut("x").ok_or_else(|| failed("no x"))?;
        *xt = Tensor::from_bits16(dtype, xt.shape.clone(), &x);
        Ok(())
    }

    fn recipe_preset(c: &Case, name: &str) -> Option<DqRecipe> {
        if name == DISPATCHING {
            let d = crate::ops::dynamic_quant_variants::dispatch(
                &c.shape(),
                &crate::ops::dynamic_quant_variants::MODELLED,
            );
            return DqRecipe::preset(d.variant.preset);
        }
        DqRecipe::preset(name)
    }
}
