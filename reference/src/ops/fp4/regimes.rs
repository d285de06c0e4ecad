//! The FP4 families' regimes: which a case can hold (`check_range`), how the range regimes
//! (`overflow_to_inf`, `subnormal_outputs`, `format_extremes`) and the ties are planted in the
//! codes and scales, and the checks of each construction with the recipe's own arithmetic.

use super::*;

/// The nonzero element codes (1..=7, positive) and their magnitudes.
fn magnitudes(element: Fp4Element) -> Vec<(u8, f64)> {
    (1u8..8)
        .map(|q| {
            let v = match element {
                Fp4Element::E2m1 => fp4_e2m1::e2m1_to_f64(q),
                Fp4Element::E1m2 => fp4_e1m2::e1m2_to_f64(q),
            };
            (q, v)
        })
        .collect()
}

/// The positive element code of largest magnitude.
fn max_code(element: Fp4Element) -> u8 {
    magnitudes(element)
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(7, |(q, _)| q)
}

/// The finite positive scale codes of a format, with their values.
fn scale_codes(format: Format) -> Vec<(u8, f64)> {
    match format {
        Format::Mx => (0u8..=254).map(|e| (e, e8m0::e8m0_to_f64(e))).collect(),
        Format::Nv => (1u8..=0x7E)
            .map(|s| (s, fp8_e4m3fn::e4m3fn_to_f64(s)))
            .collect(),
    }
}

/// The smallest and the largest finite positive scale code (`format_extremes`).
fn extreme_scales(format: Format) -> [u8; 2] {
    match format {
        Format::Mx => [0, 254],
        Format::Nv => [1, 0x7E],
    }
}

/// The finite scale codes `format_extremes` isolates in W4A16 output columns: E8M0 2^-127,
/// 2^-126 and 2^127; E4M3FN 2^-9 (the smallest subnormal) and 448. The NaN code gets a
/// column too ([`crate::ops::fp4_extremes::nan_scale`]).
fn extreme_scales_w4a16(format: Format) -> &'static [u8] {
    match format {
        Format::Mx => &[0, 1, 254],
        Format::Nv => &[1, 0x7E],
    }
}

/// (element code, scale code) pairs whose product times `global` lies in `[2^lo, 2^hi)`.
fn pairs(c: &Case, global: f64, (lo, hi): (i32, i32)) -> Vec<(u8, u8)> {
    let mut out = Vec::new();
    for (s, sv) in scale_codes(c.format) {
        for (q, qv) in magnitudes(c.element) {
            let v = qv * sv * global;
            if v >= pow2(lo) && v < pow2(hi) {
                out.push((q, s));
            }
        }
    }
    out
}

/// NVFP4: the exponents `k` of the global scale 2^k (a normal f32 whose product with 448
/// stays below 2^127, so no order of the scales overflows f32 in `s * g`) at which some
/// (code, block scale) pair lands in `band`; the three least extreme of them.
fn nv_global_exponents(c: &Case, r: Regime, band: (i32, i32)) -> Vec<i32> {
    let ks: Vec<i32> = (-126..=118)
        .filter(|&k| !pairs(c, pow2(k), band).is_empty())
        .collect();
    match r {
        Regime::OverflowToInf => ks.iter().copied().take(3).collect(),
        _ => ks.iter().rev().copied().take(3).collect(),
    }
}

/// Sets the codes of two distinct elements of scale group `gi` to `+q` and `-q`, at positions
/// the stream chooses, and marks them protected.
fn place_pair(
    c: &Case,
    gi: usize,
    q: u8,
    codes: &mut [u8],
    protected: &mut [bool],
    ctx: &mut GenContext,
) {
    let group = c.format.group();
    let gpr = c.k / group;
    let start = (gi / gpr) * c.k + (gi % gpr) * group;
    let p1 = ctx.below(group as u64) as usize;
    let p2 = (p1 + 1 + ctx.below(group as u64 - 1) as usize) % group;
    codes[start + p1] = q;
    codes[start + p2] = q | 8;
    protected[start + p1] = true;
    protected[start + p2] = true;
}

impl Fp4Family {
    /// Whether the case `c` can hold `regimes` (from its shape and parameters alone).
    pub(super) fn check_range(&self, c: &Case, regimes: &[Regime]) -> Result<(), OpError> {
        let op = self.op();
        for &r in regimes {
            if !r.applies_to(op) {
                return Err(OpError::regime_not_for(op, r));
            }
            if c.order_witness.is_some() {
                return Err(rr::regime_err(
                    op,
                    r,
                    "cannot share a case with `order_witness` (the witness places its own scale group and global scale)",
                ));
            }
        }
        let banded = rr::banded(regimes);
        if regimes.contains(&Regime::RoundingTies) {
            if let Some(&r) = banded.first() {
                return Err(rr::regime_err(
                    op,
                    r,
                    "cannot share a case with rounding_ties: both set the global scale or the rows of x (declare them in two cases)",
                ));
            }
            if self.0 == Kind::W4a16 {
                crate::ops::fp4_ties::check_w4a16(op, &self.tie_shape(c))?;
            }
        }
        if self.0 == Kind::W4a16 {
            if regimes.contains(&Regime::FormatExtremes) {
                crate::ops::fp4_extremes::check_w4a16(
                    op,
                    regimes,
                    &self.tie_shape(c),
                    extreme_scales_w4a16(c.format).len(),
                    c.format == Format::Mx && c.out_type != ElemType::Bf16,
                )?;
            }
            if banded.contains(&Regime::OverflowToInf) && c.out_type != ElemType::F16 {
                return Err(rr::regime_err(
                    op,
                    Regime::OverflowToInf,
                    "needs dtype = \"f16\": bf16 shares f32's exponent range, so a bf16 output overflows only where the kernel's f32 accumulator does (the f16 output's overflow is the final cast's, which the regime is about)",
                ));
            }
            if let Some(&r) = banded.first() {
                if c.m < banded.len() {
                    return Err(rr::regime_err(
                        op,
                        banded[c.m],
                        format!(
                            "needs m >= {} (one row of x per range regime), this case has m = {}",
                            banded.len(),
                            c.m
                        ),
                    ));
                }
                if c.n < 2 {
                    return Err(rr::regime_err(
                        op,
                        r,
                        "needs n >= 2 (one output column per sign)",
                    ));
                }
            }
            return Ok(());
        }
        let groups = c.n * (c.k / c.format.group());
        let extremes = regimes.contains(&Regime::FormatExtremes);
        let needed = banded.len() + 2 * extremes as usize;
        if needed > groups {
            return Err(rr::regime_err(
                op,
                *regimes.last().expect("needed > 0"),
                format!(
                    "needs {needed} scale groups (one per overflow/subnormal regime, two for format_extremes), this shape has {groups}"
                ),
            ));
        }
        if c.format == Format::Nv && !banded.is_empty() {
            if banded.len() > 1 {
                return Err(rr::regime_err(
                    op,
                    banded[1],
                    "cannot share an NVFP4 case with overflow_to_inf: both set the one global scale, and the products q * s of the codes span 2^21, less than the distance between the two bands (declare them in two cases)",
                ));
            }
            if c.tie_global_scale {
                return Err(rr::regime_err(
                    op,
                    banded[0],
                    "cannot share a case with `tie_global_scale` (both set the global scale)",
                ));
            }
        }
        for &r in &banded {
            let band = rr::band(r, c.out_type).expect("f16/bf16 output");
            let feasible = match c.format {
                Format::Mx => !pairs(c, 1.0, band).is_empty(),
                Format::Nv => !nv_global_exponents(c, r, band).is_empty(),
            };
            if !feasible {
                return Err(rr::regime_err(
                    op,
                    r,
                    format!(
                        "no code and scale of this format give a {} output of magnitude 2^{}..2^{} (with E1M2 elements the largest MXFP4 product, 1.75 x 2^127, stays finite in bf16)",
                        c.out_type.name(),
                        band.0,
                        band.1
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The dequant ops' regimes, on the drawn inputs (see the module documentation of
    /// [`super::range_regimes`]): each banded regime takes one scale group the stream
    /// chooses, gives it a scale code and two of its elements the codes `+q` and `-q` such
    /// that `q * scale` (times the global scale, set to a power of two 2^k for NVFP4) lies in
    /// the band; `format_extremes` takes two more groups, for the smallest and the largest
    /// finite scale code, each with the largest element magnitude of both signs. Groups that
    /// hold an extreme code of a `special` draw are left alone. Every FP4 code stays present.
    pub(super) fn impose_dequant(
        &self,
        c: &Case,
        regimes: &[Regime],
        special: bool,
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError> {
        let op = self.op();
        let scale_name = if c.format == Format::Nv {
            "block_scale"
        } else {
            "scale"
        };
        let weight = m.get("weight").ok_or_else(|| failed(op, "no weight"))?;
        let mut codes =
            packing::unpack(&weight.data, c.n * c.k, &c.layout).map_err(|e| failed(op, e))?;
        let mut scales = m
            .get(scale_name)
            .ok_or_else(|| failed(op, "no scale"))?
            .data
            .clone();
        let reserved = scale_extremes(c.format, true);
        let mut free: Vec<usize> = (0..scales.len())
            .filter(|&gi| !special || !reserved.contains(&scales[gi]))
            .collect();
        ctx.shuffle(&mut free);
        let mut protected = vec![false; codes.len()];
        let banded = rr::banded(regimes);
        let mut global = 1.0f64;
        if let (Format::Nv, Some(&r)) = (c.format, banded.first()) {
            let band = rr::band(r, c.out_type).expect("checked");
            let ks = nv_global_exponents(c, r, band);
            let k = ks[ctx.below(ks.len() as u64) as usize];
            global = pow2(k);
            let g = m
                .get_mut("global_scale")
                .ok_or_else(|| failed(op, "no global_scale"))?;
            *g = Tensor::from_f32(vec![1], &[global as f32]);
        } else if c.format == Format::Nv {
            global = m
                .get("global_scale")
                .ok_or_else(|| failed(op, "no global_scale"))?
                .to_f64_vec()[0];
        }
        if regimes.contains(&Regime::RoundingTies) {
            let tie_groups: Vec<usize> = (0..crate::ops::fp4_ties::GROUPS)
                .map_while(|_| free.pop())
                .collect();
            let g = m
                .get_mut("global_scale")
                .ok_or_else(|| failed(op, "no global_scale"))?;
            let mut gv = g.to_f32_vec().map_err(|e| failed(op, e))?[0];
            crate::ops::fp4_ties::impose_dequant(
                op,
                &self.tie_shape(c),
                &tie_groups,
                &mut codes,
                &mut scales,
                &mut gv,
                &mut protected,
                ctx,
            )?;
            *g = Tensor::from_f32(vec![1], &[gv]);
        }
        let mut take = |r: Regime| {
            free.pop().ok_or_else(|| {
                rr::regime_err(
                    op,
                    r,
                    "no scale group is left for it (a special draw holds the others)",
                )
            })
        };
        for &r in &banded {
            let band = rr::band(r, c.out_type).expect("checked");
            let gi = take(r)?;
            let ps = pairs(c, global, band);
            let (q, s) = ps[ctx.below(ps.len() as u64) as usize];
            scales[gi] = s;
            place_pair(c, gi, q, &mut codes, &mut protected, ctx);
        }
        if regimes.contains(&Regime::FormatExtremes) {
            for s in extreme_scales(c.format) {
                let gi = take(Regime::FormatExtremes)?;
                scales[gi] = s;
                place_pair(c, gi, max_code(c.element), &mut codes, &mut protected, ctx);
            }
        }
        restore_every_code(&mut codes, &protected, ctx);
        let packed = packing::pack(&codes, &c.layout).map_err(|e| failed(op, e))?;
        m.get_mut("weight").expect("read above").data = packed;
        m.get_mut(scale_name).expect("read above").data = scales;
        Ok(())
    }

    /// `w4a16_matmul`'s regimes: each banded regime takes its own row `i` of `x` (the stream
    /// chooses it, a column `c` and two output columns), makes the weights at `(j+, c)` and
    /// `(j-, c)` the largest code of each sign in scale groups given one common scale code,
    /// and sets row `i` of `x` to zero except `x[i, c] = 2^a`, with `a` such that the single
    /// product `y[i, j] = 2^a w[j, c]` lies in the band.
    pub(super) fn impose_w4a16(
        &self,
        c: &Case,
        regimes: &[Regime],
        m: &mut TensorMap,
        ctx: &mut GenContext,
    ) -> Result<(), OpError> {
        let op = self.op();
        let weight = m.get("weight").ok_or_else(|| failed(op, "no weight"))?;
        let mut codes =
            packing::unpack(&weight.data, c.n * c.k, &c.layout).map_err(|e| failed(op, e))?;
        let mut scales = m
            .get("scale")
            .ok_or_else(|| failed(op, "no scale"))?
            .data
            .clone();
        let global = match c.format {
            Format::Nv => m
                .get("global_scale")
                .ok_or_else(|| failed(op, "no global_scale"))?
                .to_f64_vec()[0],
            Format::Mx => 1.0,
        };
        let mut x = m.get("x").ok_or_else(|| failed(op, "no x"))?.to_f64_vec();
        if regimes.contains(&Regime::RoundingTies) {
            // check_range keeps the banded regimes out of such a case.
            let mut protected = vec![false; codes.len()];
            let mut g = match c.format {
                Format::Nv => Some(global as f32),
                Format::Mx => None,
            };
            crate::ops::fp4_ties::impose_w4a16(
                op,
                &self.tie_shape(c),
                &mut codes,
                &mut scales,
                g.as_mut(),
                &mut x,
                &mut protected,
                ctx,
            )?;
            restore_every_code(&mut codes, &protected, ctx);
            if let Some(g) = g {
                *m.get_mut("global_scale").expect("read above") = Tensor::from_f32(vec![1], &[g]);
            }
        }
        if regimes.contains(&Regime::FormatExtremes) {
            let value = |q: u8, s: u8| {
                let sv = match c.format {
                    Format::Mx => e8m0::e8m0_to_f64(s),
                    Format::Nv => fp8_e4m3fn::e4m3fn_to_f64(s),
                };
                self.code_f64(q, c) * sv * global
            };
            let q = max_code(c.element);
            // Below 2^128 / 2^127 for the top E8M0 code: the largest code whose product stays
            // a finite weight (E2M1 1.5, E1M2 1.75).
            let q_top = magnitudes(c.element)
                .into_iter()
                .filter(|&(_, v)| v < 2.0)
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map_or(q, |(q, _)| q);
            let mut protected = vec![false; codes.len()];
            crate::ops::fp4_extremes::impose_w4a16(
                &self.tie_shape(c),
                extreme_scales_w4a16(c.format),
                q,
                q_top,
                &value,
                &mut codes,
                &mut scales,
                &mut x,
                &mut protected,
                ctx,
            );
            restore_every_code(&mut codes, &protected, ctx);
        }
        let banded = rr::banded(regimes);
        let group = c.format.group();
        let gpr = c.k / group;
        // One scale code for every group the regimes touch, so they never undo each other;
        // small for a bf16 subnormal output, so that x[i, c] stays a normal bf16.
        let small = c.out_type == ElemType::Bf16 && banded.contains(&Regime::SubnormalOutputs);
        let s = match c.format {
            Format::Mx if small => 112 + ctx.below(5) as u8,
            Format::Mx => 125 + ctx.below(5) as u8,
            Format::Nv => 0x30 + ctx.below(0x10) as u8,
        };
        let sv = match c.format {
            Format::Mx => e8m0::e8m0_to_f64(s),
            Format::Nv => fp8_e4m3fn::e4m3fn_to_f64(s),
        };
        let q = max_code(c.element);
        let w = self.code_f64(q, c) * sv * global;
        let mut rows: Vec<usize> = (0..c.m).collect();
        ctx.shuffle(&mut rows);
        let mut cols: Vec<usize> = (0..c.k).collect();
        ctx.shuffle(&mut cols);
        for (idx, &r) in banded.iter().enumerate() {
            let (lo, hi) = rr::band(r, c.out_type).expect("checked");
            let i = rows[idx];
            let col = cols[idx];
            let signed = rr::signed_columns(c.n, ctx);
            for &(j, sign) in &signed {
                codes[j * c.k + col] = if sign > 0.0 { q } else { q | 8 };
                scales[j * gpr + col / group] = s;
            }
            // The row's other outputs are exactly 0: as single products of a drawn weight
            // they could land where the output's rounding depends on the kernel's own
            // intermediate precision (between the largest finite value and the overflow
            // threshold, or at a subnormal rounding boundary), and an honest kernel with
            // other intermediates would be judged wrong there.
            for j in (0..c.n).filter(|&j| !signed.iter().any(|&(s, _)| s == j)) {
                codes[j * c.k + col] = 0;
            }
            let e = rr::exponent(w);
            let (a_lo, a_hi) = (lo - e, hi - e - 2);
            if a_lo > a_hi || a_lo < -133 || a_hi > 127 {
                return Err(rr::broken(
                    op,
                    r,
                    "no power of two of bf16 reaches the band",
                ));
            }
            let a = a_lo + ctx.below((a_hi - a_lo + 1) as u64) as i32;
            let sign = if ctx.next_u64() & 1 == 0 { 1.0 } else { -1.0 };
            x[i * c.k..(i + 1) * c.k].fill(0.0);
            x[i * c.k + col] = sign * pow2(a);
        }
        let packed = packing::pack(&codes, &c.layout).map_err(|e| failed(op, e))?;
        m.get_mut("weight").expect("read above").data = packed;
        m.get_mut("scale").expect("read above").data = scales;
        let xs = m.get_mut("x").expect("read above");
        *xs = Tensor::round_values(ElemType::Bf16, xs.shape.clone(), &x, Rounding::RNE);
        Ok(())
    }

    /// The case as the tie and `format_extremes` constructions see it.
    pub(super) fn tie_shape(&self, c: &Case) -> crate::ops::fp4_ties::TieShape {
        crate::ops::fp4_ties::TieShape {
            m: c.m,
            n: c.n,
            k: c.k,
            group: c.format.group(),
            mx: c.format == Format::Mx,
            element: c.element,
            half: c.half,
        }
    }

    /// `rounding_ties` under the case's own recipe: the recipe and the recipe with its final
    /// rounding's tie rule swapped differ on [`crate::ops::fp4_ties::FLOOR`] or more outputs (a
    /// recipe that rounds the planted midpoint away first, as order D's bf16 combined scale
    /// does, is refused here).
    pub(super) fn verify_ties(
        &self,
        params: &serde_json::Value,
        recipe: Option<&str>,
        m: &TensorMap,
    ) -> Result<(), OpError> {
        let op = self.op();
        let recipe = match recipe {
            None => {
                return Err(crate::ops::fp4_ties::err(
                    op,
                    "needs the case's recipe (none was given to the generator)",
                ))
            }
            Some(ORACLE) => {
                return Err(crate::ops::fp4_ties::err(
                    op,
                    "needs a recipe preset (the oracle has no final rounding to tie)",
                ))
            }
            Some(r) => r,
        };
        let swap: fn(&mut Fp4DequantRecipe) -> bool = |r| {
            r.rounding.mode = match r.rounding.mode {
                RoundingMode::NearestTiesToEven => RoundingMode::NearestTiesAway,
                RoundingMode::NearestTiesAway => RoundingMode::NearestTiesToEven,
                _ => return false,
            };
            true
        };
        let plain = self.run_edited(params, recipe, None, m, Threads::ONE)?;
        let swapped = self.run_edited(params, recipe, Some(swap), m, Threads::ONE)?;
        let ties = match (plain, swapped) {
            (Some(a), Some(b)) => a
                .values()
                .zip(b.values())
                .map(|(x, y)| {
                    x.data
                        .chunks_exact(2)
                        .zip(y.data.chunks_exact(2))
                        .filter(|(p, q)| p != q)
                        .count()
                })
                .sum(),
            _ => 0,
        };
        if ties < crate::ops::fp4_ties::FLOOR {
            return Err(crate::ops::fp4_ties::err(
                op,
                format!(
                    "recipe `{recipe}` meets {ties} of the planted ties (fewer than {}): its final rounding must round to nearest, and its scales must reach it exactly (order D's bf16 combined scale rounds the midpoint away)",
                    crate::ops::fp4_ties::FLOOR
                ),
            ));
        }
        Ok(())
    }

    /// Checks the regimes on the generated inputs: the exact outputs (the oracle) hold each
    /// banded regime, and the extreme scale codes sit in groups with both largest codes.
    pub(super) fn verify_range(
        &self,
        params: &serde_json::Value,
        c: &Case,
        regimes: &[Regime],
        m: &TensorMap,
    ) -> Result<(), OpError> {
        let op = self.op();
        let banded = rr::banded(regimes);
        if !banded.is_empty() {
            let exact = self.run(params, ORACLE, m, Threads::ONE)?;
            let values = exact
                .values()
                .next()
                .map(Tensor::to_f64_vec)
                .unwrap_or_default();
            for r in banded {
                if !rr::holds(r, c.out_type, &values) {
                    return Err(rr::broken(op, r, "the exact outputs miss a sign"));
                }
            }
        }
        if regimes.contains(&Regime::FormatExtremes) && self.0 == Kind::W4a16 {
            let nan = crate::ops::fp4_extremes::nan_scale(c.format == Format::Mx);
            for &s in extreme_scales_w4a16(c.format).iter().chain([&nan]) {
                if !m["scale"].data.contains(&s) {
                    return Err(rr::broken(
                        op,
                        Regime::FormatExtremes,
                        &format!("no group with scale code {s:#04x}"),
                    ));
                }
            }
        } else if regimes.contains(&Regime::FormatExtremes) {
            let scale_name = if c.format == Format::Nv {
                "block_scale"
            } else {
                "scale"
            };
            let scales = &m
                .get(scale_name)
                .ok_or_else(|| failed(op, "no scale"))?
                .data;
            let codes = packing::unpack(&m["weight"].data, c.n * c.k, &c.layout)
                .map_err(|e| failed(op, e))?;
            let group = c.format.group();
            let q = max_code(c.element);
            for s in extreme_scales(c.format) {
                let ok = scales.iter().enumerate().any(|(gi, &x)| {
                    let g = &codes[gi * group..(gi + 1) * group];
                    x == s && g.contains(&q) && g.contains(&(q | 8))
                });
                if !ok {
                    return Err(rr::broken(
                        op,
                        Regime::FormatExtremes,
                        &format!("no group with scale code {s:#04x} and both largest codes"),
                    ));
                }
            }
        }
        Ok(())
    }
}
