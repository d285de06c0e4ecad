//! Op families of the FP4 weight path: `mxfp4_dequant`, `nvfp4_dequant` and `w4a16_matmul`
//! (see [`crate::dequant`] and [`crate::matmul::w4a16`]).
//!
//! Params (JSON, unknown keys rejected):
//! - dequant: `{"n": N, "k": K, "dtype": "bf16"|"f16", "packing": "low_first"|"high_first"|
//!   "split_halves", "element": "e2m1"|"e1m2"}` (defaults: bf16, low_first, e2m1);
//! - w4a16: the same plus `"m": M` and `"format": "mxfp4"|"nvfp4"`;
//! - NVFP4 (either op): `"tie_global_scale": true` draws the global scale as a rounding
//!   midpoint of the output type, so elements with a power-of-two `q * s` land on exact ties;
//!   `"order_witness": "b_rne"` (order a/b/c/d, rounding rne/rna) constructs a global scale and
//!   a (code, scale) pair on which that order differs from the other exact-product orders (for
//!   d, the combined scale rounded to bf16: from each of a, b and c).
//!
//! `packing` is the byte layout of the `weight` tensor (it overrides the recipe's layout, so one
//! recipe can be checked under every packing a kernel may use; `split_halves` is the QingCheng
//! Ascend kernel's 64-byte tile). `dtype` is the output type. The recipe supplies the
//! numerics: group size, scale order, FP4 subnormal policy and the final rounding.
//!
//! Tensors (names shared with the worker protocol): `weight` U8 `[n, k/2]` packed codes,
//! `scale` U8 `[n, k/32]` E8M0 (MXFP4) or `block_scale` U8 `[n, k/16]` E4M3FN plus
//! `global_scale` F32 `[1]` (NVFP4); w4a16 takes `x` BF16 `[m, k]` and calls its scale tensor
//! `scale` for both formats. Outputs: `out` `[n, k]`, or `y` `[m, n]`.
//!
//! Regimes ([`super::range_regimes`]): the dequant ops hold `overflow_to_inf`,
//! `subnormal_outputs` and `format_extremes`, `w4a16_matmul` the first two (overflow with an
//! f16 output only). See [`Fp4Family::impose_dequant`] and [`Fp4Family::impose_w4a16`].
//!
//! `oracle`: the exact products (`q * 2^(e-127)`, `q * s * g`: at most 31 significant bits, so
//! exact in f64), and for w4a16 the f64 sum of `x * w_exact`, unrounded.

mod compute;
pub(crate) mod faults;
mod regimes;
use super::path::{odd_above_one, ParamPath};
use super::range_regimes::{self as rr, pow2};
use super::regime::Regime;
use super::{
    input, parse_params, ElemType, GenContext, OpCost, OpDescription, OpError, OpFamily, Tensor,
    TensorMap, TensorSpec, ORACLE,
};
use crate::dequant::{
    self, packing, Fp4DequantRecipe, Fp4Element, HalfType, PackingLayout, ScaleOrder, PRESET_NAMES,
};
use crate::formats::{e8m0, fp4_e1m2, fp4_e2m1, fp8_e4m3fn, Rounding, RoundingMode};
use crate::matmul::w4a16::{self, Fp4Scales, Fp4Weights};
use crate::parallel::Threads;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Mx,
    Nv,
}

impl Format {
    fn group(self) -> usize {
        match self {
            Format::Mx => dequant::mxfp4::MX_GROUP_SIZE,
            Format::Nv => dequant::nvfp4::NV_GROUP_SIZE,
        }
    }
}

#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    n: usize,
    k: usize,
    #[serde(default)]
    m: Option<usize>,
    #[serde(default)]
    format: Option<String>,
    #[serde(default = "default_dtype")]
    dtype: String,
    #[serde(default = "default_packing")]
    packing: String,
    #[serde(default = "default_element")]
    element: String,
    /// NVFP4: draw the global scale as a rounding midpoint of the output type (p + 1
    /// significant bits, the last one set), so that every element whose `q * s` is a power of
    /// two lands exactly on a tie and the final rounding's tie rule shows in the bits.
    #[serde(default)]
    tie_global_scale: bool,
    /// NVFP4: `"<order>_<rounding>"` (`a`, `b` or `c`; `rne` or `rna`): the inputs hold a
    /// global scale and one (code, block scale) pair on which that scale order under that
    /// rounding gives other bits than each other exact-product order
    /// ([`super::nvfp4_witness`]).
    #[serde(default)]
    order_witness: Option<String>,
}

fn default_dtype() -> String {
    super::DEFAULT_DTYPE.into()
}
fn default_packing() -> String {
    "low_first".into()
}
fn default_element() -> String {
    "e2m1".into()
}

/// Which of the three families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Mx,
    Nv,
    W4a16,
}

/// One FP4 op family.
pub struct Fp4Family(Kind);

/// `mxfp4_dequant`.
pub const MXFP4_DEQUANT: Fp4Family = Fp4Family(Kind::Mx);
/// `nvfp4_dequant`.
pub const NVFP4_DEQUANT: Fp4Family = Fp4Family(Kind::Nv);
/// `w4a16_matmul`.
pub const W4A16_MATMUL: Fp4Family = Fp4Family(Kind::W4a16);

/// A validated case.
struct Case {
    m: usize,
    n: usize,
    k: usize,
    format: Format,
    out_type: ElemType,
    half: HalfType,
    layout: PackingLayout,
    element: Fp4Element,
    tie_global_scale: bool,
    order_witness: Option<(ScaleOrder, RoundingMode)>,
}

impl Fp4Family {
    fn op(&self) -> &'static str {
        match self.0 {
            Kind::Mx => "mxfp4_dequant",
            Kind::Nv => "nvfp4_dequant",
            Kind::W4a16 => "w4a16_matmul",
        }
    }

    fn invalid(&self, param: &str, message: impl Into<String>) -> OpError {
        OpError::InvalidParam {
            op: self.op().into(),
            param: param.into(),
            message: message.into(),
        }
    }

    fn case(&self, v: &serde_json::Value) -> Result<Case, OpError> {
        let p: Params = parse_params(self.op(), v)?;
        let format = match (self.0, p.format.as_deref()) {
            (Kind::Mx, None) => Format::Mx,
            (Kind::Nv, None) => Format::Nv,
            (Kind::W4a16, Some("mxfp4")) => Format::Mx,
            (Kind::W4a16, Some("nvfp4")) => Format::Nv,
            (Kind::W4a16, other) => {
                return Err(self.invalid(
                    "format",
                    format!("{other:?}: w4a16_matmul needs `mxfp4` or `nvfp4`"),
                ))
            }
            (_, Some(_)) => return Err(self.invalid("format", "only w4a16_matmul takes `format`")),
        };
        let m = match (self.0, p.m) {
            (Kind::W4a16, Some(m)) if m > 0 => m,
            (Kind::W4a16, _) => return Err(self.invalid("m", "w4a16_matmul needs a positive `m`")),
            (_, Some(_)) => return Err(self.invalid("m", "only w4a16_matmul takes `m`")),
            (_, None) => 0,
        };
        let half: HalfType = p.dtype.parse().map_err(|_| {
            self.invalid("dtype", format!("`{}`: the output is bf16 or f16", p.dtype))
        })?;
        let out_type = ElemType::from(half);
        let layout = match p.packing.as_str() {
            "low_first" => PackingLayout::LOW_FIRST,
            "high_first" => PackingLayout::HIGH_FIRST,
            "split_halves" => {
                PackingLayout::split_halves(dequant::recipe::QINGCHENG_SPLIT_HALVES_BYTES)
            }
            other => {
                return Err(self.invalid(
                    "packing",
                    format!("`{other}`: low_first, high_first or split_halves"),
                ))
            }
        };
        let element = match p.element.as_str() {
            "e2m1" => Fp4Element::E2m1,
            "e1m2" => Fp4Element::E1m2,
            other => return Err(self.invalid("element", format!("`{other}`: e2m1 or e1m2"))),
        };
        if p.n == 0 || p.k == 0 {
            return Err(self.invalid(if p.n == 0 { "n" } else { "k" }, "must be positive"));
        }
        if !p.k.is_multiple_of(format.group()) {
            return Err(self.invalid(
                "k",
                format!(
                    "{} is not a multiple of the group size {}",
                    p.k,
                    format.group()
                ),
            ));
        }
        if p.n.checked_mul(p.k).is_none_or(|x| x > 1 << 30)
            || m.checked_mul(p.k).is_none_or(|x| x > 1 << 30)
        {
            return Err(self.invalid("n/k/m", "more than 2^30 elements"));
        }
        let order_witness = match p.order_witness.as_deref() {
            None => None,
            Some(w) => {
                let bad = || {
                    self.invalid(
                        "order_witness",
                        format!("`{w}`: a, b, c or d, then _rne or _rna (e.g. b_rne)"),
                    )
                };
                let (o, r) = w.split_once('_').ok_or_else(bad)?;
                let order = match o {
                    "a" => ScaleOrder::BlockThenGlobalF32,
                    "b" => ScaleOrder::CombinedScaleF32,
                    "c" => ScaleOrder::ExactOnce,
                    "d" => ScaleOrder::CombinedScaleBf16,
                    _ => return Err(bad()),
                };
                let mode = match r {
                    "rne" => RoundingMode::NearestTiesToEven,
                    "rna" => RoundingMode::NearestTiesAway,
                    _ => return Err(bad()),
                };
                if format != Format::Nv || element != Fp4Element::E2m1 {
                    return Err(self.invalid("order_witness", "only NVFP4 with E2M1 elements"));
                }
                Some((order, mode))
            }
        };
        if p.tie_global_scale && format != Format::Nv {
            return Err(self.invalid("tie_global_scale", "only NVFP4 has a global scale"));
        }
        if layout.tile_len() > 0 && !p.k.is_multiple_of(layout.tile_len()) {
            return Err(self.invalid(
                "k",
                format!(
                    "{} is not a multiple of the packing tile {}",
                    p.k,
                    layout.tile_len()
                ),
            ));
        }
        Ok(Case {
            m,
            n: p.n,
            k: p.k,
            format,
            out_type,
            half,
            layout,
            element,
            tie_global_scale: p.tie_global_scale,
            order_witness,
        })
    }

    fn specs(&self, c: &Case) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
        let groups = c.k / c.format.group();
        let mut inputs = Vec::new();
        if self.0 == Kind::W4a16 {
            inputs.push(TensorSpec::new(
                "x",
                ElemType::Bf16,
                vec![c.m, c.k],
                &["m", "k"],
            ));
        }
        inputs.push(TensorSpec::new(
            "weight",
            ElemType::U8,
            vec![c.n, c.k / 2],
            &["n", "k2"],
        ));
        let scale_name = if c.format == Format::Nv && self.0 != Kind::W4a16 {
            "block_scale"
        } else {
            "scale"
        };
        inputs.push(TensorSpec::new(
            scale_name,
            ElemType::U8,
            vec![c.n, groups],
            &["n", "g"],
        ));
        if c.format == Format::Nv {
            inputs.push(TensorSpec::new(
                "global_scale",
                ElemType::F32,
                vec![1],
                &["one"],
            ));
        }
        let outputs = if self.0 == Kind::W4a16 {
            vec![TensorSpec::new(
                "y",
                c.out_type,
                vec![c.m, c.n],
                &["m", "n"],
            )]
        } else {
            vec![TensorSpec::new(
                "out",
                c.out_type,
                vec![c.n, c.k],
                &["n", "k"],
            )]
        };
        (inputs, outputs)
    }

    /// The recipe with the case's packing, element and output type.
    fn recipe(&self, name: &str, c: &Case) -> Result<Fp4DequantRecipe, OpError> {
        let mut r = Fp4DequantRecipe::preset(name).ok_or_else(|| OpError::UnknownRecipe {
            op: self.op().into(),
            recipe: name.into(),
            known: PRESET_NAMES.join(", "),
        })?;
        if r.group_size != c.format.group() {
            return Err(OpError::InvalidParam {
                op: self.op().into(),
                param: "recipe".into(),
                message: format!(
                    "recipe `{name}` has group size {}, this format {}",
                    r.group_size,
                    c.format.group()
                ),
            });
        }
        r.layout = c.layout.clone();
        r.element = c.element;
        r.output = c.half;
        Ok(r)
    }

    fn code_f64(&self, code: u8, c: &Case) -> f64 {
        match c.element {
            Fp4Element::E2m1 => fp4_e2m1::e2m1_to_f64(code),
            Fp4Element::E1m2 => fp4_e1m2::e1m2_to_f64(code),
        }
    }

    /// Exact dequantised weights `[n, k]` in f64 (codes in logical order).
    fn exact_weights(&self, c: &Case, codes: &[u8], scales: &[u8], global: f64) -> Vec<f64> {
        let groups = c.k / c.format.group();
        (0..c.n * c.k)
            .map(|i| {
                crate::cancel::checkpoint_every(i);
                let (row, col) = (i / c.k, i % c.k);
                let s = scales[row * groups + col / c.format.group()];
                let q = self.code_f64(codes[i], c);
                match c.format {
                    Format::Mx => q * e8m0::e8m0_to_f64(s),
                    Format::Nv => q * fp8_e4m3fn::e4m3fn_to_f64(s) * global,
                }
            })
            .collect()
    }
}

fn failed(op: &str, e: impl std::fmt::Display) -> OpError {
    OpError::failed(op, e)
}

/// The FP4 presets an Ascend kernel is judged against: the two QingCheng Ascend kernels, and
/// the OCP MXFP4 recipe the torch_npu worker's `npu_dtype_cast` path is judged against.
pub const ASCEND_DEQUANT_PRESETS: [&str; 3] = [
    "mx_ocp",
    "ascend_qingcheng_fp4_dequant",
    "ascend_qingcheng_w4a16",
];

/// Claims about the CANN cast used for FP4 (`npu_dtype_cast` / aclnnCast), fixed in the code.
pub const CAST_CLAIMS: [&str; 2] = ["dq.cann_cast.fp4_exact", "dq.cann_cast.devices"];

impl OpFamily for Fp4Family {
    fn faults(&self) -> Vec<&'static crate::ops::fault::Fault> {
        faults::FAULTS.iter().collect()
    }

    fn knob_family(&self) -> &'static str {
        "dq"
    }
    fn kernel_variants(&self) -> &'static [&'static crate::variant::KernelVariant] {
        static VARIANTS: [&crate::variant::KernelVariant; 2] = [
            &super::preset_variants::QINGCHENG_FP4_DEQUANT,
            &super::preset_variants::QINGCHENG_W4A16,
        ];
        &VARIANTS
    }
    fn preset_knobs(
        &self,
        preset: &str,
        dtype: crate::formats::DType,
        edit: Option<&crate::recipe_edit::RecipeEdit>,
    ) -> Option<Vec<crate::knob::Knob>> {
        let _ = dtype;
        if !ASCEND_DEQUANT_PRESETS.contains(&preset) {
            return None;
        }
        Fp4DequantRecipe::preset(preset).map(|r| crate::recipe_edit::edited(r, edit).knobs(preset))
    }
    fn knob_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = ASCEND_DEQUANT_PRESETS
            .iter()
            .filter_map(|p| Fp4DequantRecipe::preset(p).map(|r| r.knobs(p)))
            .flat_map(|k| k.into_iter().map(|k| k.id))
            .collect();
        ids.extend(CAST_CLAIMS.iter().map(|id| id.to_string()));
        ids
    }

    fn name(&self) -> &'static str {
        self.op()
    }

    fn default_dtype(&self) -> Option<&'static str> {
        Some(super::DEFAULT_DTYPE)
    }

    fn recipes(&self) -> Vec<&'static str> {
        PRESET_NAMES
            .iter()
            .copied()
            .filter(|n| {
                let g = Fp4DequantRecipe::preset(n).map(|r| r.group_size);
                match self.0 {
                    Kind::Mx => g == Some(Format::Mx.group()),
                    Kind::Nv => g == Some(Format::Nv.group()),
                    Kind::W4a16 => true,
                }
            })
            .collect()
    }

    fn paths(&self, params: &serde_json::Value) -> Result<Vec<ParamPath>, OpError> {
        let c = self.case(params)?;
        Ok(vec![
            ParamPath::new(
                "odd_groups_per_row",
                "an odd number of scale groups per row above 1 (K / 32 for MXFP4, K / 16 for NVFP4): a scale stride that pads to 2, 4 or 8 groups shows",
                odd_above_one(c.k / c.format.group()),
            ),
            ParamPath::new(
                "odd_n",
                "an odd number of rows (dequant) or output columns (W4A16) above 1: the row stride of packed codes and scales",
                odd_above_one(c.n),
            ),
        ])
    }

    fn describe(&self, params: &serde_json::Value) -> Result<OpDescription, OpError> {
        let c = self.case(params)?;
        let (inputs, outputs) = self.specs(&c);
        let bytes = super::io_bytes(&inputs, &outputs);
        let flops = match self.0 {
            Kind::W4a16 => 2.0 * (c.m * c.n * c.k) as f64 + (c.n * c.k) as f64,
            _ => (c.n * c.k) as f64 * if c.format == Format::Nv { 2.0 } else { 1.0 },
        };
        Ok(OpDescription {
            inputs,
            outputs,
            cost: OpCost {
                flops,
                bytes,
                compute: c.out_type,
            },
        })
    }

    fn generate(
        &self,
        params: &serde_json::Value,
        ctx: &mut GenContext,
    ) -> Result<TensorMap, OpError> {
        let c = self.case(params)?;
        let (specs, _) = self.specs(&c);
        // The special distribution's settings: the share of scale groups given an extreme
        // code, and whether the NaN scale is among them.
        let special = match ctx.dist {
            super::ValueDist::Special {
                fraction,
                non_finite,
            } => Some((fraction, non_finite)),
            _ => None,
        };
        let mut codes: Vec<u8> = (0..c.n * c.k).map(|_| ctx.below(16) as u8).collect();
        // Every FP4 code, whatever the seed (a case too small for 16 holds what fits).
        let all_codes: Vec<u8> = (0..16).collect();
        let fit = all_codes.len().min(codes.len());
        let _ = ctx.place_all(&mut codes, &all_codes[..fit]);
        let groups = c.n * (c.k / c.format.group());
        let extremes = scale_extremes(c.format, special.is_some_and(|(_, nf)| nf));
        let ordinary = |ctx: &mut GenContext| match c.format {
            // E8M0 around 2^0 (weights of order 1e-3..1e3).
            Format::Mx => 117 + ctx.below(21) as u8,
            // E4M3FN positive finite codes of ordinary size.
            Format::Nv => 0x20 + ctx.below(0x50) as u8,
        };
        let mut scales: Vec<u8> = (0..groups).map(|_| ordinary(ctx)).collect();
        if let Some((fraction, _)) = special {
            // Exactly round(fraction x groups) groups get an extreme code, every extreme at
            // least once, whatever the seed: the seed chooses which groups and which extremes
            // fill the rest, never how many.
            let count = (fraction * groups as f64).round() as usize;
            if count < extremes.len() {
                return Err(failed(
                    self.op(),
                    format!(
                        "special inputs with fraction {fraction} give {count} of {groups} scale \
                         groups an extreme code, fewer than the {} extreme codes {extremes:?} \
                         every special case holds; raise `fraction` or the number of groups",
                        extremes.len()
                    ),
                ));
            }
            let mut positions: Vec<usize> = (0..groups).collect();
            ctx.shuffle(&mut positions);
            let mut chosen = extremes.clone();
            while chosen.len() < count {
                chosen.push(extremes[ctx.below(extremes.len() as u64) as usize]);
            }
            for (&p, v) in positions.iter().zip(chosen) {
                scales[p] = v;
            }
        }
        let witness = match c.order_witness {
            Some((order, mode)) => Some(
                super::nvfp4_witness::find(ctx, order, mode, c.half).ok_or_else(|| {
                    failed(
                        self.op(),
                        "no scale-order witness found within the search bound",
                    )
                })?,
            ),
            None => None,
        };
        let mut witness_pos = None;
        if let Some(w) = witness {
            // One group gets the witness's block scale and, at a position whose code occurs
            // elsewhere too (so every FP4 code stays present), the witness's code.
            let group = c.format.group();
            let gi = ctx.below(groups as u64) as usize;
            scales[gi] = w.block_scale;
            let (row, gcol) = (gi / (c.k / group), gi % (c.k / group));
            let start = row * c.k + gcol * group;
            let first = ctx.below(group as u64) as usize;
            let pos = (0..group)
                .map(|i| start + (first + i) % group)
                .find(|&p| codes.iter().filter(|&&x| x == codes[p]).count() > 1)
                .unwrap_or(start + first);
            codes[pos] = w.code;
            witness_pos = Some(pos);
        }
        let packed = packing::pack(&codes, &c.layout).map_err(|e| failed(self.op(), e))?;
        let mut out = TensorMap::new();
        for s in &specs {
            let t = match s.name.as_str() {
                "weight" => Tensor::from_u8(s.shape.clone(), packed.clone()),
                "scale" | "block_scale" => Tensor::from_u8(s.shape.clone(), scales.clone()),
                "global_scale" => {
                    // A per-tensor scale like amax / (448 * 6) in f32, from the distribution.
                    let v = ctx.values(1, &super::SpecialValues::default())[0].abs();
                    let g = crate::formats::f32::f64_to_f32((v + 0.05) / 2688.0, Rounding::RNE);
                    let g = if let Some(w) = witness {
                        w.global_scale
                    } else if c.tie_global_scale {
                        // Keep the output type's significant bits and set the next one.
                        super::fp4_ties::midpoint(g, c.half, false)
                    } else {
                        g
                    };
                    Tensor::from_f32(vec![1], &[g])
                }
                "x" => {
                    let v = ctx.values(c.m * c.k, &super::special_values(ElemType::Bf16));
                    Tensor::round_values(ElemType::Bf16, s.shape.clone(), &v, Rounding::RNE)
                }
                other => return Err(failed(self.op(), format!("no generator for `{other}`"))),
            };
            out.insert(s.name.clone(), t);
        }
        if let (Kind::W4a16, Some(pos)) = (self.0, witness_pos) {
            // The witness weight alone in a whole output column: every other code of its
            // weight row zero and x[i, pos % k] = +-2^0..2^3 in every row, so each y[i, j] is
            // the dequantised weight times a power of two (exact in any summation order) and
            // the scale order shows bit for bit in all m rows.
            let mut protected = vec![false; codes.len()];
            let xs = out.get_mut("x").ok_or_else(|| failed(self.op(), "no x"))?;
            let mut x = xs.to_f64_vec();
            super::fp4_extremes::isolate(
                &self.tie_shape(&c),
                pos / c.k,
                pos % c.k,
                false,
                &mut |ctx| ctx.below(4) as i32,
                &mut codes,
                &mut x,
                &mut protected,
                ctx,
            );
            *xs = Tensor::round_values(ElemType::Bf16, xs.shape.clone(), &x, Rounding::RNE);
            restore_every_code(&mut codes, &protected, ctx);
            let packed = packing::pack(&codes, &c.layout).map_err(|e| failed(self.op(), e))?;
            out.get_mut("weight")
                .ok_or_else(|| failed(self.op(), "no weight"))?
                .data = packed;
        }
        Ok(out)
    }

    fn regimes(&self) -> &'static [Regime] {
        use Regime::*;
        match self.0 {
            // No tie: MXFP4 dequantisation is exact (a scaled FP4 code fits the output type).
            Kind::Mx => &[OverflowToInf, SubnormalOutputs, FormatExtremes],
            Kind::Nv | Kind::W4a16 => &[
                RoundingTies,
                OverflowToInf,
                SubnormalOutputs,
                FormatExtremes,
            ],
        }
    }

    fn check_regimes(&self, params: &serde_json::Value, regimes: &[Regime]) -> Result<(), OpError> {
        let c = self.case(params)?;
        self.check_range(&c, regimes)
    }

    fn generate_with_regimes(
        &self,
        params: &serde_json::Value,
        regimes: &[Regime],
        ctx: &mut GenContext,
    ) -> Result<TensorMap, OpError> {
        let c = self.case(params)?;
        self.check_range(&c, regimes)?;
        let mut m = self.generate(params, ctx)?;
        if regimes.is_empty() {
            return Ok(m);
        }
        let special = matches!(ctx.dist, super::ValueDist::Special { .. });
        match self.0 {
            Kind::W4a16 => self.impose_w4a16(&c, regimes, &mut m, ctx)?,
            _ => self.impose_dequant(&c, regimes, special, &mut m, ctx)?,
        }
        self.verify_range(params, &c, regimes, &m)?;
        if regimes.contains(&Regime::RoundingTies) {
            self.verify_ties(params, ctx.recipe.as_deref(), &m)?;
        }
        Ok(m)
    }

    crate::ops::preset_family::editable_family_methods!();
}

impl crate::ops::preset_family::EditableRun for Fp4Family {
    type Recipe = Fp4DequantRecipe;

    fn run_edited(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        edit: Option<fn(&mut Fp4DequantRecipe) -> bool>,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<Option<TensorMap>, OpError> {
        Fp4Family::run_edited(self, params, recipe, edit, inputs, threads)
    }
}

/// Puts back every FP4 code the regimes overwrote (where the case holds 16 codes or more),
/// at unprotected positions whose code occurs more than once.
fn restore_every_code(codes: &mut [u8], protected: &[bool], ctx: &mut GenContext) {
    if codes.len() < 16 {
        return;
    }
    let mut count = [0usize; 16];
    codes.iter().for_each(|&x| count[x as usize] += 1);
    for code in 0u8..16 {
        if count[code as usize] > 0 {
            continue;
        }
        let spare: Vec<usize> = (0..codes.len())
            .filter(|&p| !protected[p] && count[codes[p] as usize] > 1)
            .collect();
        if spare.is_empty() {
            return;
        }
        let p = spare[ctx.below(spare.len() as u64) as usize];
        count[codes[p] as usize] -= 1;
        codes[p] = code;
        count[code as usize] += 1;
    }
}

/// The scale codes a `special` case must hold. E8M0 (MXFP4): 2^-127 (code 0, an f32
/// subnormal: a kernel building the scale as `e << 23` gets 0), 2^-126, 2^0, 2^126, 2^127
/// (overflows BF16/F16 for |P| >= 2), and with `non_finite` the NaN code 0xFF (a kernel
/// reading it as +Inf is caught). E4M3FN (NVFP4): zero, the smallest and largest subnormal,
/// the smallest normal, 448, and with `non_finite` the NaN code 0x7F.
fn scale_extremes(format: Format, non_finite: bool) -> Vec<u8> {
    let mut v = match format {
        Format::Mx => vec![0u8, 1, 127, 253, 254],
        Format::Nv => vec![0u8, 1, 7, 8, 0x7E],
    };
    if non_finite {
        v.push(match format {
            Format::Mx => 0xFF,
            Format::Nv => 0x7F,
        });
    }
    v
}
