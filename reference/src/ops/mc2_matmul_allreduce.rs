//! Op family `mc2_matmul_allreduce`: MatmulAllReduce over simulated ranks
//! (torch_npu `npu_mm_all_reduce_base`), see [`crate::mc2::matmul_all_reduce`].
//!
//! Params (JSON, unknown keys rejected):
//! `{"dtype": "f16"|"bf16", "ranks": 1|2|4|8, "m": M, "k": K, "n": N, "bias": false,
//!   "x3": false, "tiles": [M]}` — `k` is each rank's K (the shard of a tensor-parallel
//! row-split linear), `tiles` the kernel's M tiling (heights summing to M; default one tile).
//!
//! Inputs: `x1 [ranks, m, k]`, `x2 [ranks, k, n]`, optional `bias [n]`, `x3 [m, n]`, all in
//! `dtype`. Output: `out [m, n]` in `dtype`. CANN's formula is `allreduce(x1 @ x2 + bias + x3)`
//! per rank; the case's one `bias` and `x3` are rank 0's (the other ranks are given none), so
//! they enter rank 0's product before its rounding ([`EpiloguePlacement::IntoRankZero`]).
//!
//! Recipes: `kernel_rank_order`, `kernel_ring`, `kernel_binary_tree` (each rank's tile rounded
//! to the dtype, all-reduce summing in the dtype in that order; output rounding RNE) and
//! `high_precision_golden` (f32 sums rounded once, CANN's own test golden). `oracle`: the sum
//! over ranks and K in f64 (products of 16-bit floats are exact in f64), plus bias and x3,
//! returned unrounded as F64.
//!
//! Regimes ([`super::range_regimes`]): `overflow_to_inf` and `subnormal_outputs`, each on its
//! own output row (see [`impose`]); `rounding_ties` ([`super::mc2_ties`]); `mc2_add_ties` and
//! `order_witnesses` ([`super::mc2_witness`]), in cases of their own.

pub(crate) mod faults;
use super::path::{odd_above_one, ParamPath};
use super::range_regimes::{self as rr, pow2};
use super::regime::Regime;
use super::{
    input, parse_params, ElemType, GenContext, OpCost, OpDescription, OpError, OpFamily, Tensor,
    TensorMap, TensorSpec, ORACLE,
};
use crate::formats::{DType, Rounding};
use crate::gemm::{self, BLayout};
use crate::mc2::{
    self, Accumulation, EpiloguePlacement, Mc2Numerics, Mc2Shape, RankOperands, ReductionOrder,
    X3Entry,
};
use crate::parallel::Threads;

const NAME: &str = "mc2_matmul_allreduce";
const RECIPES: [&str; 4] = [
    "kernel_rank_order",
    "kernel_ring",
    "kernel_binary_tree",
    "high_precision_golden",
];

#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    dtype: String,
    ranks: usize,
    m: usize,
    k: usize,
    n: usize,
    #[serde(default)]
    bias: bool,
    #[serde(default)]
    x3: bool,
    #[serde(default)]
    tiles: Option<Vec<usize>>,
}

/// The `mc2_matmul_allreduce` op family.
pub struct Mc2MatmulAllReduce;

fn invalid(param: &str, message: impl Into<String>) -> OpError {
    OpError::invalid_param(NAME, param, message)
}

impl Params {
    fn parse(v: &serde_json::Value) -> Result<(Params, DType, ElemType), OpError> {
        let p: Params = parse_params(NAME, v)?;
        let dtype = match p.dtype.parse::<DType>() {
            Ok(d @ (DType::F16 | DType::Bf16)) => d,
            _ => {
                return Err(invalid(
                    "dtype",
                    format!("`{}`: MatmulAllReduce takes f16 or bf16", p.dtype),
                ))
            }
        };
        if ![1, 2, 4, 8].contains(&p.ranks) {
            return Err(invalid(
                "ranks",
                format!("{}: the kernel supports 1, 2, 4 or 8 ranks", p.ranks),
            ));
        }
        for (name, v) in [("m", p.m), ("k", p.k), ("n", p.n)] {
            if v == 0 {
                return Err(invalid(name, "must be positive"));
            }
            if v > 1 << 20 {
                return Err(invalid(
                    name,
                    format!("{v} is beyond the reference's limit 2^20"),
                ));
            }
        }
        if p.ranks * p.m * p.k > 1 << 31 || p.ranks * p.k * p.n > 1 << 31 {
            return Err(invalid("m/k/n", "operands beyond 2^31 elements"));
        }
        if let Some(t) = &p.tiles
            && (t.is_empty() || t.contains(&0) || t.iter().sum::<usize>() != p.m)
        {
            return Err(invalid(
                "tiles",
                format!("{t:?}: positive heights summing to m = {}", p.m),
            ));
        }
        Ok((p, dtype, ElemType::from(dtype)))
    }

    fn tie_shape(&self, dtype: DType) -> super::mc2_ties::Shape {
        super::mc2_ties::Shape {
            dtype,
            ranks: self.ranks,
            m: self.m,
            k: self.k,
            n: self.n,
        }
    }

    fn witness_shape(&self, dtype: DType) -> super::mc2_witness::Shape {
        super::mc2_witness::Shape {
            base: self.tie_shape(dtype),
            x3: self.x3,
            tiles: self.tiles.clone().unwrap_or_else(|| vec![self.m]),
        }
    }

    fn specs(&self, et: ElemType) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
        let mut inputs = vec![
            TensorSpec::new("x1", et, vec![self.ranks, self.m, self.k], &["r", "m", "k"]),
            TensorSpec::new("x2", et, vec![self.ranks, self.k, self.n], &["r", "k", "n"]),
        ];
        if self.bias {
            inputs.push(TensorSpec::new("bias", et, vec![self.n], &["n"]));
        }
        if self.x3 {
            inputs.push(TensorSpec::new("x3", et, vec![self.m, self.n], &["m", "n"]));
        }
        (
            inputs,
            vec![TensorSpec::new(
                "out",
                et,
                vec![self.m, self.n],
                &["m", "n"],
            )],
        )
    }
}

fn numerics(recipe: &str, dtype: DType) -> Option<Mc2Numerics> {
    let accumulation = match recipe {
        "kernel_rank_order" => Accumulation::Kernel(ReductionOrder::RankOrder),
        "kernel_ring" => Accumulation::Kernel(ReductionOrder::Ring),
        "kernel_binary_tree" => Accumulation::Kernel(ReductionOrder::BinaryTree),
        "high_precision_golden" => Accumulation::HighPrecisionGolden,
        _ => return None,
    };
    Some(Mc2Numerics {
        dtype,
        output_rounding: Rounding::RNE,
        accumulation,
        epilogue: EpiloguePlacement::IntoRankZero,
        x3_entry: X3Entry::RoundedResult,
        x3_rounding: Rounding::RNE,
        reduce_rounding: Rounding::RNE,
    })
}

impl OpFamily for Mc2MatmulAllReduce {
    fn faults(&self) -> Vec<&'static crate::ops::fault::Fault> {
        faults::FAULTS.iter().collect()
    }

    fn knob_family(&self) -> &'static str {
        "mc2"
    }
    fn kernel_variants(&self) -> &'static [&'static crate::variant::KernelVariant] {
        static VARIANTS: [&crate::variant::KernelVariant; 3] = [
            &super::preset_variants::MC2_RANK_ORDER,
            &super::preset_variants::MC2_RING,
            &super::preset_variants::MC2_BINARY_TREE,
        ];
        &VARIANTS
    }
    fn preset_knobs(
        &self,
        preset: &str,
        dtype: crate::formats::DType,
        edit: Option<&crate::recipe_edit::RecipeEdit>,
    ) -> Option<Vec<crate::knob::Knob>> {
        recipe_numerics(preset, dtype).map(|n| crate::recipe_edit::edited(n, edit).knobs(preset))
    }
    fn knob_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = RECIPES
            .iter()
            .filter_map(|p| recipe_numerics(p, DType::Bf16).map(|n| (p, n)))
            .flat_map(|(p, n)| n.knobs(p).into_iter().map(|k| k.id))
            .collect();
        ids.extend(
            crate::mc2::planner::PlannerConfig::default()
                .knobs()
                .into_iter()
                .map(|k| k.id),
        );
        ids.extend(
            crate::mc2::planner::PLANNER_CLAIMS
                .iter()
                .map(|(id, _)| id.to_string()),
        );
        ids.extend(
            crate::mc2::cost_model::COST_MODEL_CLAIMS
                .iter()
                .map(|(id, _)| id.to_string()),
        );
        ids
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn recipes(&self) -> Vec<&'static str> {
        RECIPES.to_vec()
    }

    fn paths(&self, params: &serde_json::Value) -> Result<Vec<ParamPath>, OpError> {
        let (p, _, _) = Params::parse(params)?;
        let uneven = p
            .tiles
            .as_ref()
            .is_some_and(|t| t.windows(2).any(|w| w[0] != w[1]));
        Ok(vec![
            ParamPath::new("odd_m", "an odd number of rows above 1: the M split and its tail tile", odd_above_one(p.m)),
            ParamPath::new("odd_k", "an odd reduction length above 1: no power-of-two K block hides a stride", odd_above_one(p.k)),
            ParamPath::new("odd_n", "an odd number of columns above 1: the output and bias strides", odd_above_one(p.n)),
            ParamPath::new(
                "uneven_m_tiles",
                "an M split into tiles of different sizes: each tile's offset into the output is judged",
                uneven,
            ),
        ])
    }

    fn describe(&self, params: &serde_json::Value) -> Result<OpDescription, OpError> {
        let (p, _, et) = Params::parse(params)?;
        let (inputs, outputs) = p.specs(et);
        let (r, m, k, n) = (p.ranks as f64, p.m as f64, p.k as f64, p.n as f64);
        let elems: f64 = inputs
            .iter()
            .chain(&outputs)
            .map(|s| s.shape.iter().product::<usize>() as f64)
            .sum();
        Ok(OpDescription {
            inputs,
            outputs,
            // Every rank's matmul plus the reduction's adds.
            cost: OpCost {
                flops: 2.0 * r * m * k * n + (r - 1.0) * m * n,
                bytes: elems * et.size_bytes() as f64,
                compute: et,
            },
        })
    }

    fn generate(
        &self,
        params: &serde_json::Value,
        ctx: &mut GenContext,
    ) -> Result<TensorMap, OpError> {
        let (p, _, et) = Params::parse(params)?;
        let special = super::special_values(et);
        let mut out = TensorMap::new();
        for spec in p.specs(et).0 {
            out.insert(
                spec.name.clone(),
                ctx.rounded_tensor(et, spec.shape.clone(), &special, Rounding::RNE),
            );
        }
        Ok(out)
    }

    fn regimes(&self) -> &'static [Regime] {
        &[
            Regime::RoundingTies,
            Regime::OverflowToInf,
            Regime::SubnormalOutputs,
            Regime::OrderWitnesses,
            Regime::Mc2AddTies,
        ]
    }

    fn check_regimes(&self, params: &serde_json::Value, regimes: &[Regime]) -> Result<(), OpError> {
        let (p, dtype, _) = Params::parse(params)?;
        check(&p, regimes)?;
        if regimes.contains(&Regime::RoundingTies) {
            super::mc2_ties::check(NAME, &p.tie_shape(dtype))?;
        }
        super::mc2_witness::check(NAME, &p.witness_shape(dtype), regimes)?;
        Ok(())
    }

    fn generate_with_regimes(
        &self,
        params: &serde_json::Value,
        regimes: &[Regime],
        ctx: &mut GenContext,
    ) -> Result<TensorMap, OpError> {
        self.check_regimes(params, regimes)?;
        let (p, dtype, et) = Params::parse(params)?;
        let mut m = self.generate(params, ctx)?;
        if regimes.contains(&Regime::RoundingTies) {
            super::mc2_ties::impose(NAME, &p.tie_shape(dtype), &mut m, ctx)?;
        }
        super::mc2_witness::impose(NAME, &p.witness_shape(dtype), regimes, &mut m, ctx)?;
        if rr::banded(regimes).is_empty() {
            return Ok(m);
        }
        impose(&p, et, regimes, &mut m, ctx)?;
        let exact = self.run(params, ORACLE, &m, Threads::ONE)?["out"].to_f64_vec();
        for r in rr::banded(regimes) {
            if !rr::holds(r, et, &exact) {
                return Err(rr::broken(NAME, r, "the exact outputs miss a sign"));
            }
        }
        Ok(m)
    }

    crate::ops::preset_family::editable_family_methods!();
}

impl crate::ops::preset_family::EditableRun for Mc2MatmulAllReduce {
    type Recipe = Mc2Numerics;

    fn run_edited(
        &self,
        params: &serde_json::Value,
        recipe: &str,
        edit: Option<fn(&mut Mc2Numerics) -> bool>,
        inputs: &TensorMap,
        threads: Threads,
    ) -> Result<Option<TensorMap>, OpError> {
        run_edited(params, recipe, edit, inputs, threads)
    }
}

/// Whether a case of `p` can hold `regimes`: one output row per regime, two output columns,
/// and (with both regimes) two distinct (rank, k) positions.
fn check(p: &Params, regimes: &[Regime]) -> Result<(), OpError> {
    for &r in regimes {
        if !r.applies_to(NAME) {
            return Err(OpError::regime_not_for(NAME, r));
        }
    }
    let own = [Regime::Mc2AddTies, Regime::OrderWitnesses];
    if let Some(&r) = regimes.iter().find(|r| own.contains(*r))
        && let Some(&other) = regimes
            .iter()
            .find(|o| !own.contains(*o) && **o != Regime::RepeatedCall)
    {
        return Err(rr::regime_err(
            NAME,
            r,
            format!(
                "cannot share a case with {} (both rebuild rows of x1 and columns of x2); declare it in another case",
                other.name()
            ),
        ));
    }
    let banded = rr::banded(regimes);
    let Some(&first) = banded.first() else {
        return Ok(());
    };
    if regimes.contains(&Regime::RoundingTies) {
        return Err(rr::regime_err(
            NAME,
            first,
            "cannot share a case with rounding_ties (the range rows would overwrite planted ties)",
        ));
    }
    if p.m < banded.len() {
        return Err(rr::regime_err(
            NAME,
            banded[p.m],
            format!(
                "needs m >= {} (one output row per range regime), this case has m = {}",
                banded.len(),
                p.m
            ),
        ));
    }
    if p.n < 2 {
        return Err(rr::regime_err(
            NAME,
            first,
            "needs n >= 2 (one output column per sign)",
        ));
    }
    if p.ranks * p.k < banded.len() {
        return Err(rr::regime_err(
            NAME,
            banded[1],
            "needs ranks * k >= 2 (each range regime its own rank and k position)",
        ));
    }
    Ok(())
}

/// The range regimes on drawn MC2 inputs. Each regime takes its own output row `i`, a rank
/// `r` and a reduction index `c` (distinct from the other regime's), and up to
/// [`rr::BANDED_COLUMNS`] output columns of alternating sign ([`rr::signed_columns`]): row `i`
/// of `x1` becomes zero on every rank except `x1[r, i, c] = 2^a`, and `x2[r, c, j] = +-B` with
/// `B = 2^b (1 + t/8)`, so `out[i, j]` is the
/// single product `+-2^a B` (plus no bias or x3: those are zero at `j+-`), in the band of
/// the dtype, exact in f32 and in the dtype for the subnormal band. The rest of row `i` is
/// `2^a x2[r, c, j]`: finite, and never summed with another large term.
fn impose(
    p: &Params,
    et: ElemType,
    regimes: &[Regime],
    m: &mut TensorMap,
    ctx: &mut GenContext,
) -> Result<(), OpError> {
    let banded = rr::banded(regimes);
    let mut x1 = m["x1"].to_f64_vec();
    let mut x2 = m["x2"].to_f64_vec();
    let mut bias = m.get("bias").map(Tensor::to_f64_vec);
    let mut x3 = m.get("x3").map(Tensor::to_f64_vec);
    let (mm, k, n) = (p.m, p.k, p.n);
    let mut rows: Vec<usize> = (0..mm).collect();
    ctx.shuffle(&mut rows);
    let mut positions: Vec<usize> = (0..p.ranks * k).collect();
    ctx.shuffle(&mut positions);
    for (idx, &reg) in banded.iter().enumerate() {
        let (lo, _) = rr::band(reg, et).expect("f16/bf16");
        let i = rows[idx];
        let (r, c) = (positions[idx] / k, positions[idx] % k);
        let cols = rr::signed_columns(n, ctx);
        // 2^a in the dtype's normal range, then B = 2^b (1 + t/8) with a + b = lo + 1 or
        // lo + 2: the product is in [2^(lo + 1), 2^(lo + 3)), inside the band, with 4
        // significant bits (its last one at 2^(lo - 2) or above: exact in f16 and bf16).
        let a = match (reg, et) {
            (Regime::OverflowToInf, ElemType::F16) => 7 + ctx.below(2) as i32,
            (Regime::OverflowToInf, _) => 64 + ctx.below(2) as i32,
            (_, ElemType::F16) => -8 - ctx.below(2) as i32,
            _ => -64 - ctx.below(2) as i32,
        };
        let b = lo + 1 - a + ctx.below(2) as i32;
        let big = pow2(b) * (1.0 + ctx.below(8) as f64 / 8.0);
        for rank in 0..p.ranks {
            let o = (rank * mm + i) * k;
            x1[o..o + k].fill(0.0);
        }
        x1[(r * mm + i) * k + c] = pow2(a);
        for &(j, sign) in &cols {
            x2[(r * k + c) * n + j] = sign * big;
        }
        for &(j, _) in &cols {
            if let Some(bv) = bias.as_mut() {
                bv[j] = 0.0;
            }
            if let Some(xv) = x3.as_mut() {
                xv[i * n + j] = 0.0;
            }
        }
    }
    let mut put = |name: &str, v: &[f64]| {
        let t = m.get_mut(name).expect("drawn above");
        *t = Tensor::round_values(et, t.shape.clone(), v, Rounding::RNE);
    };
    put("x1", &x1);
    put("x2", &x2);
    if let Some(v) = bias {
        put("bias", &v);
    }
    if let Some(v) = x3 {
        put("x3", &v);
    }
    Ok(())
}

/// [`OpFamily::run`] of MC2, with the numerics changed by `edit` first (`None` when the edit
/// changes nothing).
fn run_edited(
    params: &serde_json::Value,
    recipe: &str,
    edit: Option<fn(&mut Mc2Numerics) -> bool>,
    inputs: &TensorMap,
    threads: Threads,
) -> Result<Option<TensorMap>, OpError> {
    {
        let (p, dtype, et) = Params::parse(params)?;
        let (specs, outs) = p.specs(et);
        let get = |name: &str| -> Result<Option<&Tensor>, OpError> {
            match specs.iter().find(|s| s.name == name) {
                Some(s) => input(NAME, inputs, s).map(Some),
                None => Ok(None),
            }
        };
        let f32s = |t: &Tensor| {
            t.to_f32_vec().map_err(|e| OpError::Failed {
                op: NAME.into(),
                message: e.to_string(),
            })
        };
        let x1 = f32s(get("x1")?.expect("x1 spec"))?;
        let x2 = f32s(get("x2")?.expect("x2 spec"))?;
        let bias = get("bias")?.map(f32s).transpose()?;
        let x3 = get("x3")?.map(f32s).transpose()?;
        let (m, k, n) = (p.m, p.k, p.n);
        if recipe == ORACLE {
            // The sum over ranks then K is one sequential f64 sum over the concatenated
            // reduction axis: x1 laid out as [m, ranks * k] against x2 read as [ranks * k, n]
            // (its own layout).
            let rk = p.ranks * k;
            let mut a = vec![0.0f32; m * rk];
            for r in 0..p.ranks {
                for i in 0..m {
                    a[i * rk + r * k..i * rk + (r + 1) * k]
                        .copy_from_slice(&x1[(r * m + i) * k..(r * m + i + 1) * k]);
                }
            }
            let mut out = gemm::matmul_sequential_f64(&a, &x2, BLayout::KByN, m, n, rk, threads);
            for i in 0..m {
                for j in 0..n {
                    let s = &mut out[i * n + j];
                    if let Some(b) = &bias {
                        *s += b[j] as f64;
                    }
                    if let Some(x) = &x3 {
                        *s += x[i * n + j] as f64;
                    }
                }
            }
            return Ok(Some(TensorMap::from([(
                "out".to_string(),
                Tensor::of_f64(outs[0].shape.clone(), &out),
            )])));
        }
        let mut numerics = numerics(recipe, dtype).ok_or_else(|| OpError::UnknownRecipe {
            op: NAME.into(),
            recipe: recipe.into(),
            known: RECIPES.join(", "),
        })?;
        if let Some(edit) = edit
            && !edit(&mut numerics)
        {
            return Ok(None);
        }
        let ranks: Vec<RankOperands> = (0..p.ranks)
            .map(|r| RankOperands {
                x1: &x1[r * m * k..(r + 1) * m * k],
                x2: &x2[r * k * n..(r + 1) * k * n],
            })
            .collect();
        let ins = mc2::MatmulAllReduceInputs {
            shape: Mc2Shape::new(m, k, n),
            ranks: &ranks,
            bias: bias.as_deref(),
            x3: x3.as_deref(),
        };
        let tiles = p.tiles.clone().unwrap_or_else(|| vec![m]);
        let schedule: Vec<usize> = (0..tiles.len()).collect();
        let fail = |e: mc2::Mc2Error| OpError::Failed {
            op: NAME.into(),
            message: e.to_string(),
        };
        let values = mc2::matmul_all_reduce_tiled(&ins, &numerics, &tiles, &schedule, threads)
            .map_err(fail)?;
        let bits = mc2::encode_bits(&values, dtype).map_err(fail)?;
        Ok(Some(TensorMap::from([(
            "out".to_string(),
            Tensor::from_bits16(et, outs[0].shape.clone(), &bits),
        )])))
    }
}

/// The numerics of MC2 recipe `recipe` for `dtype` (`None` for the oracle or an unknown name):
/// what a case of this family is judged against, for the fidelity ledger's knobs.
pub fn recipe_numerics(recipe: &str, dtype: DType) -> Option<Mc2Numerics> {
    numerics(recipe, dtype)
}
