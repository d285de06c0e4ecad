//! `quant_matmul`'s regimes: how a case plants `rounding_ties`, `subnormal_outputs` and
//! `int_matmul_edges` in its generated inputs, and the witnesses each construction checks
//! with the recipe's own arithmetic.

use super::*;

impl QuantMatmul {
    /// Makes every regime of `regimes` true (see the module doc and docs/suites.md).
    ///
    /// Rows and columns are drawn from the stream, distinct across constructions; the
    /// constructed rows of `x1` are zero except at the positions a construction names, and
    /// only the constructed (row, column) elements are planned: the rest of those rows and
    /// columns is whatever the draw and the constructions give.
    /// - `rounding_ties`: 2 rows with a power-of-two per-token scale (when there is one),
    ///   8 columns with a power-of-two scale and no float bias, `x1[i, p0] = 64`,
    ///   `x1[i, p1] = 1`, and `x2[p0, j]`, `x2[p1, j]` chosen so that the accumulator (with
    ///   the int32 bias, drawn small there) is `+-(2q + 1)` with `q` even and `2q` one more
    ///   bit than the output has: an exact tie of the final cast, rounded apart by ties to
    ///   even and ties away, in every order of the scale products.
    /// - `int_matmul_edges`: 2 rows and 8 columns (no bias there) whose accumulator takes
    ///   1024 products `(-128) * (-128) = 2^14` (reaching 2^24), then 8 products `1 * 1`, then
    ///   1024 pairs `(-128) * 127 + (-128) * 1 = -2^14` (back to 8): exactly 8 in int32, 0 in a
    ///   sequential f32 sum (each `+1` at 2^24 is a tie that rounds to even, back to 2^24);
    ///   with a per-token scale, 10 elements (own rows and columns, no bias there) whose
    ///   accumulator, scale and per-token scale are searched so that `fl(fl(acc * s) * t)` and
    ///   `fl(acc * fl(s * t))` round to different outputs; 8 further columns whose scale
    ///   differs from column 0's.
    pub(super) fn impose_regimes(
        &self,
        c: &Case,
        regimes: &[Regime],
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError> {
        // The case's recipe, or the variant its shape lands on when it is judged against the
        // oracle.
        let rec = ctx
            .recipe
            .as_deref()
            .and_then(|name| QuantMatmul::recipe_preset(c, name))
            .or_else(|| QuantMatmul::recipe_preset(c, DISPATCHING))
            .expect("every case dispatches to a variant preset");
        let (mm, k, n) = (c.m, c.k, c.n);
        let get_i8 = |m: &TensorMap, name: &str| -> Result<Vec<i8>, OpError> {
            Ok(m.get(name)
                .ok_or_else(|| failed(format!("no {name}")))?
                .data
                .iter()
                .map(|&b| b as i8)
                .collect())
        };
        let mut x1 = get_i8(m, "x1")?;
        let mut x2 = get_i8(m, "x2")?;
        let mut scale: Vec<f32> = m
            .get("scale")
            .ok_or_else(|| failed("no scale"))?
            .to_f32_vec()
            .map_err(failed)?;
        let mut pertoken: Option<Vec<f32>> = match m.get("pertoken_scale") {
            Some(t) => Some(t.to_f32_vec().map_err(failed)?),
            None => None,
        };
        let mut ibias: Option<Vec<i32>> = match (c.bias, m.get("bias")) {
            (BiasKind::I32, Some(t)) => Some(
                t.to_i64_vec()
                    .map_err(failed)?
                    .into_iter()
                    .map(|v| v as i32)
                    .collect(),
            ),
            _ => None,
        };
        let mut fbias: Option<Vec<f32>> = match (c.bias, m.get("bias")) {
            (BiasKind::F32 | BiasKind::Bf16, Some(t)) => Some(t.to_f32_vec().map_err(failed)?),
            _ => None,
        };
        // Column 0 is never taken (the per-tensor fault reads its scale).
        let mut cols: Vec<usize> = (1..n).collect();
        ctx.shuffle(&mut cols);
        let mut cols = cols.into_iter();
        let mut rows: Vec<usize> = (0..mm).collect();
        ctx.shuffle(&mut rows);
        let mut rows = rows.into_iter();
        let short = || failed("out of rows or columns (checked before)");
        let zero_bias = |j: usize, ib: &mut Option<Vec<i32>>, fb: &mut Option<Vec<f32>>| {
            if let Some(b) = ib.as_mut() {
                b[j] = 0;
            }
            if let Some(b) = fb.as_mut() {
                b[j] = 0.0;
            }
        };
        let scale_exact = |v: f32| -> f32 {
            match c.scale {
                ScaleKind::Bf16 => bf16::bf16_to_f32(bf16::f32_to_bf16(v, Rounding::RNE)),
                _ => v,
            }
        };
        let offset: Option<Vec<f32>> = match m.get("offset") {
            Some(t) => Some(t.to_f32_vec().map_err(failed)?),
            None => None,
        };
        let sign = |ctx: &mut GenContext| if ctx.below(2) == 0 { 1i64 } else { -1 };
        for r in regimes {
            match r {
                Regime::RoundingTies => {
                    let p0 = ctx.below(k as u64) as usize;
                    let p1 = (p0 + 1 + ctx.below(k as u64 - 1) as usize) % k;
                    let tie_rows: Vec<usize> = (0..TIE_ROWS)
                        .map(|_| rows.next().ok_or_else(short))
                        .collect::<Result<_, _>>()?;
                    for &i in &tie_rows {
                        x1[i * k..(i + 1) * k].fill(0);
                        x1[i * k + p0] = 64;
                        x1[i * k + p1] = 1;
                        if let Some(t) = pertoken.as_mut() {
                            t[i] = pow2(-7 - ctx.below(3) as i32) as f32;
                        }
                    }
                    if c.out == ElemType::I8 {
                        self.int8_ties(
                            c,
                            &rec,
                            ctx,
                            &tie_rows,
                            (p0, p1),
                            &mut cols,
                            &mut x2,
                            &mut scale,
                            &mut ibias,
                            offset.as_deref(),
                        )?;
                        continue;
                    }
                    // Mantissa bits the output keeps (bf16 8, f16 11).
                    let keep = if c.out == ElemType::F16 { 11 } else { 8 };
                    for _ in 0..TIE_COLS {
                        let j = cols.next().ok_or_else(short)?;
                        scale[j] = pow2(-6 - ctx.below(4) as i32) as f32;
                        if let Some(b) = fbias.as_mut() {
                            b[j] = 0.0;
                        }
                        let ib = match ibias.as_mut() {
                            Some(b) => {
                                b[j] = ctx.below(2049) as i32 - 1024;
                                b[j] as i64
                            }
                            None => 0,
                        };
                        // Both tie rows share x2's column: one target per column.
                        let q = (1i64 << (keep - 1)) + 2 * ctx.below(1 << (keep - 2)) as i64;
                        let target = sign(ctx) * (2 * q + 1);
                        let want = target - ib;
                        let (hi, lo) = (want.div_euclid(64), want.rem_euclid(64));
                        if !(-128..=127).contains(&hi) {
                            return Err(failed(format!("rounding_ties: {want} is out of reach")));
                        }
                        x2[p0 * n + j] = hi as i8;
                        x2[p1 * n + j] = lo as i8;
                        for &i in &tie_rows {
                            // Check with the recipe's own arithmetic: an exact tie.
                            let acc = i32_to_f32(target as i32, rec.acc_to_f32);
                            let s = if c.scale == ScaleKind::Packed {
                                rec.pack(scale[j])
                            } else {
                                scale[j]
                            };
                            let t = pertoken.as_ref().map(|t| t[i]);
                            let y = rec.epilogue(acc, s, t, fbias.as_ref().map(|_| 0.0), 0.0);
                            let even = round_out(c.out, y, RoundingMode::NearestTiesToEven);
                            let away = round_out(c.out, y, RoundingMode::NearestTiesAway);
                            if even == away {
                                return Err(failed(format!(
                                    "rounding_ties: {target} at row {i}, column {j} is not a tie of the output"
                                )));
                            }
                        }
                    }
                }
                Regime::IntMatmulEdges => {
                    // k positions in increasing order: the big block, the ones, the pairs.
                    let mut pos: Vec<usize> = (0..k).collect();
                    ctx.shuffle(&mut pos);
                    let mut pos = pos[..EDGE_K].to_vec();
                    pos.sort_unstable();
                    let (big, rest) = pos.split_at(EDGE_BIG);
                    let (ones, pairs) = rest.split_at(EDGE_ONES);
                    let edge_rows: Vec<usize> = (0..EDGE_ROWS)
                        .map(|_| rows.next().ok_or_else(short))
                        .collect::<Result<_, _>>()?;
                    for &i in &edge_rows {
                        let row = &mut x1[i * k..(i + 1) * k];
                        row.fill(0);
                        for &p in big.iter().chain(pairs) {
                            row[p] = -128;
                        }
                        for &p in ones {
                            row[p] = 1;
                        }
                    }
                    for _ in 0..EDGE_COLS {
                        let j = cols.next().ok_or_else(short)?;
                        zero_bias(j, &mut ibias, &mut fbias);
                        for &p in big {
                            x2[p * n + j] = -128;
                        }
                        for &p in ones {
                            x2[p * n + j] = 1;
                        }
                        for (q, &p) in pairs.iter().enumerate() {
                            x2[p * n + j] = if q % 2 == 0 { 127 } else { 1 };
                        }
                    }
                    if c.out == ElemType::I8 {
                        // Saturation: SAT_COLS columns whose x2 is -1 or +1 at the big block
                        // (and 0 at the other constructed positions), so the edge rows'
                        // accumulator is +2^17 or -2^17; a scale that puts the rounded value
                        // at 180..215, beyond 127 + |offset|, so the clamp decides it and a
                        // wrap gives a negative (positive) int8.
                        for q in 0..SAT_COLS {
                            let j = cols.next().ok_or_else(short)?;
                            zero_bias(j, &mut ibias, &mut fbias);
                            let v: i8 = if q % 2 == 0 { -1 } else { 1 };
                            for &p in ones.iter().chain(pairs) {
                                x2[p * n + j] = 0;
                            }
                            for &p in big {
                                x2[p * n + j] = v;
                            }
                            scale[j] = ((1.4 + 0.25 * ctx.unit()) * pow2(-10)) as f32;
                            let acc = -128 * EDGE_BIG as i32 * v as i32;
                            let off = offset.as_ref().map_or(0, |o| pack_offset(o[j]));
                            let sat =
                                rec.requant(acc as f32, rec.pack(scale_bits(c, scale[j])), off);
                            let wrap = QmmRecipe {
                                saturate: false,
                                ..rec
                            }
                            .requant(
                                acc as f32,
                                rec.pack(scale_bits(c, scale[j])),
                                off,
                            );
                            if sat == wrap || !(sat == 127 || sat == -128) {
                                return Err(failed(format!("int_matmul_edges: column {j} does not saturate ({sat}, wrapped {wrap})")));
                            }
                        }
                    }
                    if let Some(t) = pertoken.as_mut() {
                        // Witnesses: x1 row zero but 64 at w0 and 1 at w1; x2 column set there.
                        let w0 = ctx.below(k as u64) as usize;
                        let w1 = (w0 + 1 + ctx.below(k as u64 - 1) as usize) % k;
                        for _ in 0..WITNESSES {
                            let i = rows.next().ok_or_else(short)?;
                            let j = cols.next().ok_or_else(short)?;
                            zero_bias(j, &mut ibias, &mut fbias);
                            let (acc, s, tv) = self.witness(c, &rec, ctx, &scale_exact)?;
                            let row = &mut x1[i * k..(i + 1) * k];
                            row.fill(0);
                            row[w0] = 64;
                            row[w1] = 1;
                            x2[w0 * n + j] = acc.div_euclid(64) as i8;
                            x2[w1 * n + j] = acc.rem_euclid(64) as i8;
                            scale[j] = s;
                            t[i] = tv;
                        }
                    }
                    for _ in 0..DISTINCT_SCALES {
                        let j = cols.next().ok_or_else(short)?;
                        while scale[j] == scale[0] || rec.pack(scale[j]) == rec.pack(scale[0]) {
                            scale[j] = scale_exact(((1.0 + ctx.unit()) * pow2(-9)) as f32);
                            if c.scale == ScaleKind::Packed {
                                scale[j] = f32::from_bits(scale[j].to_bits() | 0x1001);
                            }
                        }
                    }
                }
                Regime::SubnormalOutputs => {
                    let sub_rows: Vec<usize> = (0..SUB_ROWS)
                        .map(|_| rows.next().ok_or_else(short))
                        .collect::<Result<_, _>>()?;
                    let sub_cols: Vec<usize> = (0..SUB_COLS)
                        .map(|_| cols.next().ok_or_else(short))
                        .collect::<Result<_, _>>()?;
                    for &j in &sub_cols {
                        zero_bias(j, &mut ibias, &mut fbias);
                    }
                    self.subnormal_outputs(
                        c,
                        &rec,
                        ctx,
                        (&sub_rows, &sub_cols),
                        &mut x1,
                        &mut x2,
                        &mut scale,
                        pertoken.as_deref_mut(),
                        fbias.is_some(),
                    )?;
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
        m.insert("x1".into(), Tensor::from_i8(vec![mm, k], &x1));
        m.insert("x2".into(), Tensor::from_i8(vec![k, n], &x2));
        let sv: Vec<f64> = scale.iter().map(|&s| s as f64).collect();
        let st = scale_tensor(c, &sv);
        // The packed-scale bits were already set; scale_tensor sets them again (idempotent).
        m.insert("scale".into(), st);
        if let Some(t) = pertoken {
            m.insert("pertoken_scale".into(), Tensor::from_f32(vec![mm], &t));
        }
        if let Some(b) = ibias {
            m.insert("bias".into(), Tensor::from_i32(vec![n], &b));
        }
        if let Some(b) = fbias {
            let bv: Vec<f64> = b.iter().map(|&x| x as f64).collect();
            m.insert("bias".into(), float_bias_tensor(c, &bv));
        }
        Ok(())
    }

    /// `subnormal_outputs` (bf16/f16 outputs): on the `SUB_ROWS` rows (`x1` zero but for one
    /// position `p` the seed chooses, holding `u` in 64..=127) and the `SUB_COLS` columns
    /// (their bias zero; `x2[p, j] = +-v`, `v` in 16..=127, the signs alternating), every
    /// accumulator is the single product `+-u v`, and the column's scale (with a per-token
    /// scale, the rows' shared power of two `2^-e`) puts the exact output at `(1.25 + 0.75 w)
    /// 2^E` to twice that in magnitude, `E` three binades or more below the smallest normal and
    /// at least the lower end of [`crate::ops::range_regimes::band`]: a nonzero subnormal of the
    /// output, computed from the recipe's f32 products (bf16: the products themselves are f32
    /// subnormals, and the merged-scales order rounds `scale * pertoken` as one), then rounded
    /// into the subnormal range by the output cast. Checked with the recipe's own arithmetic:
    /// each of the elements is a nonzero subnormal of the output.
    ///
    /// bf16: with a per-token scale of `2^-(18..21)` the column scale stays a normal f32
    /// (about 2^-120); without one it is an f32 subnormal (a bf16 scale cannot hold it).
    #[allow(clippy::too_many_arguments)]
    fn subnormal_outputs(
        &self,
        c: &Case,
        rec: &QmmRecipe,
        ctx: &mut GenContext,
        (sub_rows, sub_cols): (&[usize], &[usize]),
        x1: &mut [i8],
        x2: &mut [i8],
        scale: &mut [f32],
        pertoken: Option<&mut [f32]>,
        float_bias: bool,
    ) -> Result<(), OpError> {
        let (k, n) = (c.k, c.n);
        let r = Regime::SubnormalOutputs;
        let (lo, hi) = crate::ops::range_regimes::band(r, c.out).ok_or_else(|| {
            failed("subnormal_outputs: needs a bf16 or f16 output (checked before)")
        })?;
        let p = ctx.below(k as u64) as usize;
        let mut us = Vec::with_capacity(sub_rows.len());
        for &i in sub_rows {
            let row = &mut x1[i * k..(i + 1) * k];
            row.fill(0);
            let u = 64 + ctx.below(64) as i8;
            row[p] = u;
            us.push(u as i64);
        }
        // The rows' per-token scale: a power of two (f16: of the drawn size; bf16: small
        // enough that the column scale stays normal).
        let t = pertoken.map(|t| {
            let e = if c.out == ElemType::Bf16 {
                18 + ctx.below(4) as i32
            } else {
                7 + ctx.below(3) as i32
            };
            let tv = pow2(-e) as f32;
            for &i in sub_rows {
                t[i] = tv;
            }
            tv
        });
        for (q, &j) in sub_cols.iter().enumerate() {
            let v = 16 + ctx.below(112) as i64;
            let sign = if q % 2 == 0 { 1 } else { -1 };
            x2[p * n + j] = (sign * v) as i8;
            // The target for the smallest u (64): 2^E (1.25 + 0.75 w), E in [lo, hi - 3], so
            // that the scale's rounding (a bf16 or f32 subnormal scale: a few bits) keeps it
            // at least 2^lo and u up to 127 keeps it below 2^(hi - 1).
            let e = lo + ctx.below((hi - 3 - lo + 1) as u64) as i32;
            let target = (1.25 + 0.75 * ctx.unit()) * pow2(e);
            let s = target / (64.0 * v as f64 * t.map_or(1.0, |t| t as f64));
            scale[j] = match c.scale {
                ScaleKind::Bf16 => bf16::bf16_to_f32(bf16::f64_to_bf16(s, Rounding::RNE)),
                _ => s as f32,
            };
            let s_kernel = if c.scale == ScaleKind::Packed {
                rec.pack(scale_bits(c, scale[j]))
            } else {
                scale[j]
            };
            for (&i, &u) in sub_rows.iter().zip(&us) {
                let acc = sign * u * v;
                let exact = acc as f64 * s_kernel as f64 * t.map_or(1.0, |t| t as f64);
                let y = rec.epilogue(
                    i32_to_f32(acc as i32, rec.acc_to_f32),
                    s_kernel,
                    t,
                    float_bias.then_some(0.0),
                    0.0,
                );
                let bits = rec.cast_out(c.out, y);
                if !crate::ops::range_regimes::holds(r, c.out, &[exact, -exact])
                    || !c.out.is_half_subnormal(bits)
                {
                    return Err(failed(format!(
                        "subnormal_outputs: row {i}, column {j} (exact {exact:e}) is not a nonzero subnormal of the output (bits {bits:#06x})"
                    )));
                }
            }
        }
        Ok(())
    }

    /// `rounding_ties` for the int8 output: on the two tie rows (`x1 = 64` at `p0`, 1 at `p1`),
    /// `TIE_COLS` columns with a power-of-two scale `2^-(1 + d)` and an accumulator (int32 bias
    /// included) `+-(2q + 1) * 2^d`, `q` even and at most 58: the scaled value is `+-(q + 1/2)`,
    /// an exact tie of the rounding to an integer that ties to even and ties away round apart,
    /// and with an offset of at most 32 nothing saturates.
    #[allow(clippy::too_many_arguments)]
    fn int8_ties(
        &self,
        c: &Case,
        rec: &QmmRecipe,
        ctx: &mut GenContext,
        tie_rows: &[usize],
        (p0, p1): (usize, usize),
        cols: &mut impl Iterator<Item = usize>,
        x2: &mut [i8],
        scale: &mut [f32],
        ibias: &mut Option<Vec<i32>>,
        offset: Option<&[f32]>,
    ) -> Result<(), OpError> {
        let n = c.n;
        for _ in 0..TIE_COLS {
            let j = cols
                .next()
                .ok_or_else(|| failed("out of columns (checked before)"))?;
            let d = ctx.below(4) as i32;
            scale[j] = pow2(-1 - d) as f32;
            let ib = match ibias.as_mut() {
                Some(b) => {
                    b[j] = ctx.below(2049) as i32 - 1024;
                    b[j] as i64
                }
                None => 0,
            };
            let q = 2 * ctx.below(30) as i64;
            let target = (if ctx.below(2) == 0 { 1 } else { -1 } * (2 * q + 1)) << d;
            let want = target - ib;
            let (hi, lo) = (want.div_euclid(64), want.rem_euclid(64));
            if !(-128..=127).contains(&hi) {
                return Err(failed(format!("rounding_ties: {want} is out of reach")));
            }
            x2[p0 * n + j] = hi as i8;
            x2[p1 * n + j] = lo as i8;
            // Check with the recipe's own arithmetic: an exact tie, not saturated.
            let off = offset.map_or(0, |o| pack_offset(o[j]));
            let s = rec.pack(scale_bits(c, scale[j]));
            let acc = i32_to_f32(target as i32, rec.acc_to_f32);
            let even = rec.requant(acc, s, off);
            let away = QmmRecipe {
                requant_rounding: RoundingMode::NearestTiesAway,
                ..*rec
            }
            .requant(acc, s, off);
            if even == away || even.unsigned_abs() >= 127 || away.unsigned_abs() >= 127 {
                return Err(failed(format!(
                    "rounding_ties: {target} at column {j} (rows {tie_rows:?}) is not an unsaturated tie of the int8 rounding"
                )));
            }
        }
        Ok(())
    }

    /// An accumulator (`-8128..=8191`, reachable as `64 * x + y` with int8 `x` and `y` in
    /// `0..64`), a scale and a per-token scale whose two product orders round to different
    /// outputs, drawn from the stream until found (the per-token scale is set so that the
    /// exact product lies on a midpoint of the output dtype, where a few f32 ulps decide).
    fn witness(
        &self,
        c: &Case,
        rec: &QmmRecipe,
        ctx: &mut GenContext,
        scale_exact: &dyn Fn(f32) -> f32,
    ) -> Result<(i64, f32, f32), OpError> {
        let other = QmmRecipe {
            scale_order: match rec.scale_order {
                ScaleOrder::ScaleThenToken => ScaleOrder::MergedFirst,
                ScaleOrder::MergedFirst => ScaleOrder::ScaleThenToken,
            },
            ..*rec
        };
        for _ in 0..100_000 {
            let acc = (1024 + ctx.below(7104) as i64) * if ctx.below(2) == 0 { 1 } else { -1 };
            let s = scale_exact(((1.0 + ctx.unit()) * pow2(-9)) as f32);
            let t0 = (0.25 + 0.75 * ctx.unit()) * pow2(-6);
            let mid = midpoint_near(c.out, acc as f64 * s as f64 * t0);
            let t = (mid / (acc as f64 * s as f64)) as f32;
            let a = acc as f32;
            let y1 = rec.epilogue(a, s, Some(t), None, 0.0);
            let y2 = other.epilogue(a, s, Some(t), None, 0.0);
            let mode = rec.output_rounding;
            if round_out(c.out, y1, mode) != round_out(c.out, y2, mode) {
                return Ok((acc, s, t));
            }
        }
        Err(failed(
            "int_matmul_edges: no scale-order witness found within the search bound",
        ))
    }
}
