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

    fn run(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<TensorMap, OpError> {
        self.run_edited(params, recipe, None, inputs, threads)
            .map(|o| o.expect("an unedited run always has outputs"))
    }

    fn run_with_recipe_edit(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        edit: &crate::ops::RecipeEdit,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<Option<TensorMap>, OpError> {
        match edit.of() {
            Some(f) if recipe != ORACLE => {
                self.run_edited(params, recipe, Some(f), inputs, threads)
            }
            _ => Ok(None),
        }
    }
}

impl Fp4Family {
    /// [`OpFamily::run`], with the recipe changed by `edit` first (`None` when the edit
    /// changes nothing).
    fn run_edited(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        edit: Option<fn(&mut Fp4DequantRecipe) -> bool>,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<Option<TensorMap>, OpError> {
        let op = self.op();
        let c = self.case(params)?;
        let (specs, outs) = self.specs(&c);
        let get = |name: &str| -> Result<&Tensor, OpError> {
            let spec = specs
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| failed(op, format!("no input `{name}`")))?;
            input(op, inputs, spec)
        };
        let weight = &get("weight")?.data;
        let scale_name = if c.format == Format::Nv && self.0 != Kind::W4a16 {
            "block_scale"
        } else {
            "scale"
        };
        let scales = &get(scale_name)?.data;
        let global = if c.format == Format::Nv {
            get("global_scale")?
                .to_f32_vec()
                .map_err(|e| failed(op, e))?[0]
        } else {
            1.0
        };
        let out_spec = &outs[0];
        if recipe == ORACLE {
            let codes = packing::unpack(weight, c.n * c.k, &c.layout).map_err(|e| failed(op, e))?;
            let w = self.exact_weights(&c, &codes, scales, global as f64);
            let values = if self.0 == Kind::W4a16 {
                // x is BF16, so exact in f32; w holds the exact weights `[n, k]`.
                let x = get("x")?.to_f32_vec().map_err(|e| failed(op, e))?;
                crate::gemm::matmul_sequential_f64(
                    &x,
                    &w,
                    crate::gemm::BLayout::NByK,
                    c.m,
                    c.n,
                    c.k,
                    threads,
                )
            } else {
                w
            };
            return Ok(Some(TensorMap::from([(
                out_spec.name.clone(),
                Tensor::of_f64(out_spec.shape.clone(), &values),
            )])));
        }
        let mut r = self.recipe(recipe, &c)?;
        if let Some(edit) = edit
            && !edit(&mut r)
        {
            return Ok(None);
        }
        let bits = match self.0 {
            Kind::Mx => dequant::mxfp4::dequantize(weight, scales, c.n, c.k, &r, threads),
            Kind::Nv => dequant::nvfp4::dequantize(weight, scales, global, c.n, c.k, &r, threads),
            Kind::W4a16 => {
                let x = get("x")?.bits16().map_err(|e| failed(op, e))?;
                let scales = match c.format {
                    Format::Mx => Fp4Scales::Mx { scales },
                    Format::Nv => Fp4Scales::Nv {
                        block_scales: scales,
                        global_scale: global,
                    },
                };
                let w = Fp4Weights {
                    packed: weight,
                    scales,
                    n: c.n,
                    k: c.k,
                };
                w4a16::matmul(&x, c.m, &w, &r, threads)
            }
        }
        .map_err(|e| failed(op, e))?;
        Ok(Some(TensorMap::from([(
            out_spec.name.clone(),
            Tensor::from_bits16(c.out_type, out_spec.shape.clone(), &bits),
        )])))
    }
}

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
/// column too ([`super::fp4_extremes::nan_scale`]).
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

impl Fp4Family {
    /// Whether the case `c` can hold `regimes` (from its shape and parameters alone).
    fn check_range(&self, c: &Case, regimes: &[Regime]) -> Result<(), OpError> {
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
                super::fp4_ties::check_w4a16(op, &self.tie_shape(c))?;
            }
        }
        if self.0 == Kind::W4a16 {
            if regimes.contains(&Regime::FormatExtremes) {
                super::fp4_extremes::check_w4a16(
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
    fn impose_dequant(
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
            let tie_groups: Vec<usize> = (0..super::fp4_ties::GROUPS)
                .map_while(|_| free.pop())
                .collect();
            let g = m
                .get_mut("global_scale")
                .ok_or_else(|| failed(op, "no global_scale"))?;
            let mut gv = g.to_f32_vec().map_err(|e| failed(op, e))?[0];
            super::fp4_ties::impose_dequant(
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
    fn impose_w4a16(
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
            super::fp4_ties::impose_w4a16(
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
            super::fp4_extremes::impose_w4a16(
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
    fn tie_shape(&self, c: &Case) -> super::fp4_ties::TieShape {
        super::fp4_ties::TieShape {
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
    /// rounding's tie rule swapped differ on [`super::fp4_ties::FLOOR`] or more outputs (a
    /// recipe that rounds the planted midpoint away first, as order D's bf16 combined scale
    /// does, is refused here).
    fn verify_ties(
        &self,
        params: &serde_json::Value,
        recipe: Option<&str>,
        m: &TensorMap,
    ) -> Result<(), OpError> {
        let op = self.op();
        let recipe = match recipe {
            None => {
                return Err(super::fp4_ties::err(
                    op,
                    "needs the case's recipe (none was given to the generator)",
                ))
            }
            Some(ORACLE) => {
                return Err(super::fp4_ties::err(
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
        if ties < super::fp4_ties::FLOOR {
            return Err(super::fp4_ties::err(
                op,
                format!(
                    "recipe `{recipe}` meets {ties} of the planted ties (fewer than {}): its final rounding must round to nearest, and its scales must reach it exactly (order D's bf16 combined scale rounds the midpoint away)",
                    super::fp4_ties::FLOOR
                ),
            ));
        }
        Ok(())
    }

    /// Checks the regimes on the generated inputs: the exact outputs (the oracle) hold each
    /// banded regime, and the extreme scale codes sit in groups with both largest codes.
    fn verify_range(
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
            let nan = super::fp4_extremes::nan_scale(c.format == Format::Mx);
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
