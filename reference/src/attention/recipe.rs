//! A [`Recipe`]: every numerically relevant choice of an attention kernel as a field, and the
//! named presets that reproduce specific kernels.
//!
//! Why each field exists: docs/numerics.md, "What changes the output bits" (KV tile,
//! block order, P dtype and rounding, rowsum source, exp flavour, reciprocal vs division,
//! output rounding, LSE formula, empty-row policy, mask value). Accumulators (row max, row sum,
//! S and every dot product) are f32 in every recipe, and O too except where the kernel holds it
//! in f16 ([`ORescale::VectorF16`]); the f64 ground truth is [`super::oracle`].

use super::ifa_tiling::{ifa_tiling, IfaShape};
use super::pfa_tiling::{pfa_kv_tile, PfaShape};
use crate::formats::{DType, Rounding};
use crate::knob::{rounding_name, Knob};

/// Names of the presets [`Recipe::preset`] knows.
pub const PRESETS: [&str; 7] = [
    "ascend_pfa_bf16",
    "ascend_ifa_bf16",
    "ascend_pfa_f16_high_perf",
    "fa2_cuda",
    "vllm_pa_v1",
    "vllm_pa_v2",
    "exact_f32",
];

/// The softmax algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// FlashAttention-2 online softmax over KV tiles (running max, rescaled O and row sum).
    Online,
    /// vLLM paged attention: all scores of a row (or partition) first, then max, exp, sum,
    /// normalised P, then P V (no rescaling).
    TwoPass,
}

/// The order KV tiles are visited in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockOrder {
    Forward,
    /// Last tile first (CUDA FlashAttention-2 forward).
    Reverse,
}

/// The order of the f32 additions of one Q.K dot product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReductionOrder {
    /// [`crate::dot::dot_f32`]: 16 lane accumulators (element j into lane j % 16), fixed tree.
    Lanes16,
    /// Strictly sequential in d.
    Sequential,
}

/// The order of the f32 additions of one row's P V product over the keys of a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PvOrder {
    /// Key by key: `acc[d] = 0; acc[d] += p[j] * v[j][d]` for j increasing (one f32 rounding
    /// for the product, one for the add).
    KeyByKey,
    /// 16 lane accumulators over the keys (key j of the tile into lane j % 16), combined by
    /// the halving tree of [`crate::dot::combine_lanes`].
    Lanes16,
}

/// How an f32 transcendental (exp, ln) is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MathImpl {
    /// The `libm` crate's f32 function: FreeBSD's `expf` / `logf`, within one ulp and not
    /// correctly rounded (docs/ascend.md gives the algorithm).
    LibmF32,
    /// The `libm` crate's f64 function rounded once to f32 (nearest even): correctly rounded
    /// except where the f64 value lies within an f64 ulp of an f32 midpoint.
    F64Rounded,
}

impl MathImpl {
    /// `e^x`, through [`crate::math`] (the pure-Rust `libm` crate).
    #[inline(always)]
    pub fn exp_of(self, x: f32) -> f32 {
        match self {
            MathImpl::LibmF32 => crate::math::exp_f32(x),
            MathImpl::F64Rounded => crate::math::exp_f64(x as f64) as f32,
        }
    }

    /// `ln x`, through [`crate::math`] (the pure-Rust `libm` crate).
    #[inline(always)]
    pub fn ln_of(self, x: f32) -> f32 {
        match self {
            MathImpl::LibmF32 => crate::math::ln_f32(x),
            MathImpl::F64Rounded => crate::math::ln_f64(x as f64) as f32,
        }
    }
}

/// The precision of scores and the softmax vector arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScorePrecision {
    /// S, the scaled/masked score, s - m, exp and the rescale factor are f32 values.
    F32,
    /// Ascend f16 high-performance mode: the f32 matmul result and every softmax vector result
    /// (scaled score, masked score, s - m, exp, rescale factor) are rounded to f16 (RNE); row
    /// sum and O stay f32.
    F16,
}

/// Where the softmax scale is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalePlacement {
    /// s = f32(dot * scale) right after the matmul; max and exp on scaled scores.
    AfterMatmul,
    /// Max on raw dots; the exponent is `dot * sl2 - m * sl2` with `sl2 = f32(scale *
    /// log2(e))`, evaluated by `exp2` (CUDA FlashAttention-2). Requires [`ExpFlavour::Exp2`].
    FoldedIntoExp2,
}

/// The exponential used for P and the rescale factor (pure-Rust libm).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpFlavour {
    /// `expf(x)`.
    Exp,
    /// `exp2f(x * log2(e))` (or the folded exponent of [`ScalePlacement::FoldedIntoExp2`]).
    Exp2,
}

/// Which P the row sum adds up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowSumOf {
    /// The f32 exp values before the cast to the P dtype.
    RawP,
    /// The values after the cast (what the P V matmul sees).
    RoundedP,
}

/// How O is rescaled by exp(m_old - m_new).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ORescale {
    /// Element-wise f32 multiply on the vector unit.
    VectorF32,
    /// Seed 000 "diagonal matrix on Cube": diag(alpha) times O through the matmul unit, whose
    /// inputs are the P dtype: alpha and O are rounded to the P dtype (with the P rounding) and
    /// their product is accumulated in f32.
    DiagonalMatmul,
    /// Fault model: O is never rescaled (`O = O + P V`), the classic online-softmax bug. No
    /// preset uses it; the fault catalogue does.
    Skipped,
    /// Fault model: O held in the P dtype between tiles (`O = round_p(O * alpha + P V)`, the
    /// P V accumulation done at 16 bits). No preset uses it; the fault catalogue does.
    HeldInPDtype,
    /// Ascend f16 high-performance mode: O lives in f16 between tiles. The P V matmul result
    /// is rounded to f16 (RNE), the rescale `O * alpha` is an f16 multiply and the update
    /// `+ P V` an f16 add, each rounded to nearest even (three roundings per tile, where
    /// [`ORescale::HeldInPDtype`] has one). The first tile's O is its P V.
    VectorF16,
    /// Fault model: the rescale lags one KV tile, `O = O * alpha_prev + P V` with the factor
    /// of the previous tile (1 for the first), as [`ORescale::VectorF32`] otherwise; the row
    /// sum is rescaled on time. No preset uses it; the fault catalogue does.
    Lagged,
    /// Fault model: the running max is replaced by each tile's own maximum, and O and the row
    /// sum are rescaled (as [`ORescale::VectorF32`]) only when it rises: a later tile whose
    /// maximum is below the running one has its P taken against that lower maximum, weighted
    /// up against the earlier tiles. No preset uses it; the fault catalogue does.
    TileMaxNotCarried,
}

/// The final normalisation O / l.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Normalize {
    /// `O / (l + epsilon)` per element.
    Divide,
    /// `O * (1 / (l + epsilon))`.
    Reciprocal,
    /// Ascend f16 high-performance mode: the f32 row sum `l + epsilon` is rounded to f16 with
    /// `sum_rounding` and O (f16) is divided by it in f16 (one RNE rounding of the quotient).
    DivideF16 { sum_rounding: Rounding },
}

/// The LSE formula (natural log, in the scaled-score domain).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LseFormula {
    /// `ln(l) + m_scaled` (Ascend, FA2: `max * scale + log(sum)`).
    LnSumPlusMax,
    /// `(log2(l) + m * scale * log2(e)) * ln(2)` (FA3-style exp2 domain).
    Log2Domain,
}

/// What a row without any allowed key produces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EmptyRow {
    /// Output 0 and the given LSE (+inf for Ascend and FA2, -inf for FA3).
    Zero { lse: f32 },
    /// Whatever the arithmetic gives (e.g. the mean of V over the tiles visited with a
    /// -FLT_MAX mask; NaN with a -inf mask and no guard).
    Arithmetic,
    /// Ascend's decode kernel, which has no row-invalid correction: a row with no key at all
    /// (an empty KV, actual length 0) writes output 0 and `empty_kv_lse` (`InitAllZeroOutput`,
    /// -3.40e38); a row whose keys are all masked is computed as any other, every KV tile
    /// visited (masked scores at the fill value, so P = 1 on every key: the mean of V, and
    /// LSE = ln(n) + fill).
    DecodeKernel { empty_kv_lse: f32 },
}

impl EmptyRow {
    /// Whether KV tiles whose keys are all masked for every row of a query tile are skipped
    /// (kernels with a row-invalid correction skip them; the decode kernel visits them).
    pub fn skips_masked_tiles(self) -> bool {
        !matches!(self, EmptyRow::DecodeKernel { .. })
    }
}

/// The LSE Ascend's decode kernel writes for an empty KV: `InitAllZeroOutput` duplicates the
/// float literal -3.40E+38, i.e. the f32 0xFF7FC99E.
pub const DECODE_EMPTY_KV_LSE: f32 = -3.40e38;

/// The value masked scores take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaskFill {
    /// -inf (with the FA2 guard: a row max of -inf is treated as 0 in the exponent).
    NegInf,
    /// -FLT_MAX (0xFF7FFFFF), Ascend's select.
    NegFltMax,
    /// Ascend half masks: s + mask * -10000, in the score precision.
    AdditiveMinus10000,
    /// -1e12 (f32), what the incre (decode) flash attention kernel selects for a bool mask.
    SelectMinus1e12,
    /// -65504 (f16 0xFBFF, the lowest f16), what the prompt kernel selects for a bool mask in
    /// f16 high-performance mode.
    SelectF16Lowest,
}

/// How split-KV partial results are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// Flash-decoding: M = max lse_s; L = ln(sum exp(lse_s - M)) + M; O = sum exp(lse_s - L) O_s.
    Lse,
    /// vLLM v2 reduce: w_s = sum_s * exp(m_s - M); O = sum O_s * w_s * (1 / (sum w + 1e-6)).
    VllmExpSum,
    /// Ascend incre flash attention's flash-decode combine: M = max_s m_s; w_s = l_s *
    /// exp(m_s - M); W = sum_s w_s; O = sum_s (w_s / W) O_s; lse = ln(W) + M.
    AscendSumMax,
}

/// How the KV axis is tiled (and split) for a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvTiling {
    /// `kv_tile` keys per tile over contiguous K/V; the cache block size under
    /// PagedAttention; the recipe's own `split`.
    Fixed,
    /// Ascend incre flash attention's run-time tiling ([`super::ifa_tiling`]): the KV tile is
    /// the kernel's sInner size and long contexts are split across `vector_cores` cores
    /// (flash decode) when batch x KV heads leaves cores idle; `kv_tile` and `split` are
    /// ignored. The count is the SoC's, which the reference does not know: 0 (the preset's)
    /// until the caller sets it ([`Recipe::on_vector_cores`]; a case gets it from its suite's
    /// hardware profile), and [`Recipe::validate`] refuses 0.
    AscendIfa { vector_cores: usize },
    /// Ascend prompt flash attention's run-time tiling ([`super::pfa_tiling`]): the KV tile is
    /// the CV-diff template's sInner block (512, 1024 or 2048 keys by dtype, precision mode and
    /// shape), divided by `tile_divisor` (1; a fault halves the tile with 2); `kv_tile` is
    /// ignored.
    AscendPfa { tile_divisor: usize },
}

/// Split-KV (flash-decoding / vLLM v2) partitioning.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SplitKv {
    /// Keys per partition (the last may be shorter).
    pub partition: usize,
    /// dtype and rounding the partial outputs are stored in.
    pub partial_dtype: DType,
    pub partial_rounding: Rounding,
    pub combine: Combine,
}

/// Every numerically relevant choice of an attention kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Recipe {
    pub name: String,
    pub algorithm: Algorithm,
    /// Query rows per tile (KV tiles fully masked for every row of a tile are skipped).
    pub q_tile: usize,
    /// Keys per KV tile (the paged path uses the cache block size instead), under
    /// [`KvTiling::Fixed`].
    pub kv_tile: usize,
    pub kv_tiling: KvTiling,
    pub block_order: BlockOrder,
    pub qk_order: ReductionOrder,
    /// The order of a tile's row sum of P.
    pub rowsum_order: ReductionOrder,
    pub pv_order: PvOrder,
    pub score_precision: ScorePrecision,
    pub scale_placement: ScalePlacement,
    pub exp: ExpFlavour,
    /// Whether the folded exp2 exponent is one fused multiply-add (`fmaf(s, sl2, -m*sl2)`).
    pub exp_fma: bool,
    /// The exp of P, of the rescale factor and of the split combine's weights.
    pub exp_impl: MathImpl,
    /// The ln of the LSE.
    pub ln_impl: MathImpl,
    /// dtype P is cast to before P V, and the rounding of that cast.
    pub p_dtype: DType,
    pub p_rounding: Rounding,
    pub rowsum_of: RowSumOf,
    pub o_rescale: ORescale,
    pub normalize: Normalize,
    /// Added to the row sum before the normalisation (vLLM: 1e-6).
    pub epsilon: f32,
    /// Rounding of the final cast to the output dtype.
    pub output_rounding: Rounding,
    pub lse: LseFormula,
    pub empty_row: EmptyRow,
    pub mask_fill: MaskFill,
    pub split: Option<SplitKv>,
}

impl Recipe {
    /// The preset `name` for output dtype `dtype`, or None.
    pub fn preset(name: &str, dtype: DType) -> Option<Recipe> {
        Some(match name {
            "ascend_pfa_bf16" => Recipe::ascend_pfa_bf16(dtype),
            "ascend_ifa_bf16" => Recipe::ascend_ifa_bf16(dtype),
            "ascend_pfa_f16_high_perf" => Recipe::ascend_pfa_f16_high_perf(),
            "fa2_cuda" => Recipe::fa2_cuda(dtype),
            "vllm_pa_v1" => Recipe::vllm_pa_v1(dtype),
            "vllm_pa_v2" => Recipe::vllm_pa_v2(dtype),
            "exact_f32" => Recipe::exact_f32(),
            _ => return None,
        })
    }

    /// Ascend prompt flash attention (A2, ops-transformer), bf16 inputs (or f16 with
    /// inner_precise = 0). numerics.md "Ascend FA kernels": S = QK^T in f32; S *= scale after
    /// the matmul; masked scores selected to -FLT_MAX; natural exp; P cast with CAST_ROUND
    /// (ties away) before P V; O = O * exp(m_old - m) + P V in f32 (vector multiply); one
    /// division by l at the end; output cast CAST_ROUND; LSE = log(sum) + max, +inf for
    /// invalid rows (output 0, the inner_precise 2/3 row correction). Query tiles of 128 rows;
    /// the KV tile is the kernel's run-time sInner block ([`KvTiling::AscendPfa`],
    /// [`super::pfa_tiling`]).
    /// The row sum adds the f32 exp values (the vector unit sums before the cast).
    pub fn ascend_pfa_bf16(dtype: DType) -> Recipe {
        let p = if dtype == DType::F16 {
            DType::F16
        } else {
            DType::Bf16
        };
        Recipe {
            name: "ascend_pfa_bf16".into(),
            algorithm: Algorithm::Online,
            q_tile: 128,
            kv_tile: 512,
            kv_tiling: KvTiling::AscendPfa { tile_divisor: 1 },
            block_order: BlockOrder::Forward,
            qk_order: ReductionOrder::Lanes16,
            rowsum_order: ReductionOrder::Lanes16,
            pv_order: PvOrder::KeyByKey,
            score_precision: ScorePrecision::F32,
            scale_placement: ScalePlacement::AfterMatmul,
            exp: ExpFlavour::Exp,
            exp_fma: false,
            exp_impl: MathImpl::LibmF32,
            ln_impl: MathImpl::LibmF32,
            p_dtype: p,
            p_rounding: Rounding::RNA,
            rowsum_of: RowSumOf::RawP,
            o_rescale: ORescale::VectorF32,
            normalize: Normalize::Divide,
            epsilon: 0.0,
            output_rounding: Rounding::RNA,
            lse: LseFormula::LnSumPlusMax,
            empty_row: EmptyRow::Zero { lse: f32::INFINITY },
            mask_fill: MaskFill::NegFltMax,
            split: None,
        }
    }

    /// Ascend incre (decode) flash attention: as [`Recipe::ascend_pfa_bf16`] with one query
    /// row per tile, the output cast CAST_RINT for bf16, CAST_ROUND for f16, and masked scores
    /// selected to -1e12 (the kernel's bool-mask value; sources in docs/ascend.md). The KV
    /// tile and the flash-decode split follow the kernel's tiling ([`super::ifa_tiling`]) on
    /// the vector cores of the SoC it models, which the caller gives
    /// ([`Recipe::on_vector_cores`]): the preset holds no count of its own.
    pub fn ascend_ifa_bf16(dtype: DType) -> Recipe {
        Recipe {
            name: "ascend_ifa_bf16".into(),
            q_tile: 1,
            kv_tiling: KvTiling::AscendIfa { vector_cores: 0 },
            mask_fill: MaskFill::SelectMinus1e12,
            empty_row: EmptyRow::DecodeKernel {
                empty_kv_lse: DECODE_EMPTY_KV_LSE,
            },
            output_rounding: if dtype == DType::F16 {
                Rounding::RNA
            } else {
                Rounding::RNE
            },
            ..Recipe::ascend_pfa_bf16(dtype)
        }
    }

    /// Ascend prompt flash attention, f16 inputs, high-performance mode (inner_precise = 1):
    /// QK and the softmax in f16 (numerics.md "f16 high-performance mode computes QK and
    /// softmax in f16"), masked scores selected to the lowest f16 (-65504, what the kernel
    /// does with the bool masks FIA takes), P in f16 (CAST_ROUND), O held in f16 (the P V
    /// result, the rescale and the update each rounded to f16), the f32 row sum cast to f16
    /// with CAST_ROUND and O divided by it in f16; the quotient is written as it is (the
    /// output cast of an f16 value to f16 is exact). Sources: docs/ascend.md.
    pub fn ascend_pfa_f16_high_perf() -> Recipe {
        Recipe {
            name: "ascend_pfa_f16_high_perf".into(),
            score_precision: ScorePrecision::F16,
            p_dtype: DType::F16,
            o_rescale: ORescale::VectorF16,
            normalize: Normalize::DivideF16 {
                sum_rounding: Rounding::RNA,
            },
            mask_fill: MaskFill::SelectF16Lowest,
            ..Recipe::ascend_pfa_bf16(DType::F16)
        }
    }

    /// CUDA FlashAttention-2 forward (numerics.md "CUDA FlashAttention-2"): scale * log2(e)
    /// folded into an FMA exponent for exp2; KV tiles from last to first; row sum of the
    /// unrounded P; P converted with RNE for P V; O multiplied by 1/l; output RNE; masked
    /// scores -inf with the max guard; empty rows output 0 with lse +inf. Tiles 128 x 64 (the
    /// hdim-128 forward kernel traits). exp2f / logf here are correctly rounded libm, not the
    /// GPU's approximate intrinsics, so bits can differ by an ulp in P.
    pub fn fa2_cuda(dtype: DType) -> Recipe {
        Recipe {
            name: "fa2_cuda".into(),
            algorithm: Algorithm::Online,
            q_tile: 128,
            kv_tile: 64,
            kv_tiling: KvTiling::Fixed,
            block_order: BlockOrder::Reverse,
            qk_order: ReductionOrder::Lanes16,
            rowsum_order: ReductionOrder::Lanes16,
            pv_order: PvOrder::KeyByKey,
            score_precision: ScorePrecision::F32,
            scale_placement: ScalePlacement::FoldedIntoExp2,
            exp: ExpFlavour::Exp2,
            exp_fma: true,
            exp_impl: MathImpl::LibmF32,
            ln_impl: MathImpl::LibmF32,
            p_dtype: if dtype == DType::F16 {
                DType::F16
            } else {
                DType::Bf16
            },
            p_rounding: Rounding::RNE,
            rowsum_of: RowSumOf::RawP,
            o_rescale: ORescale::VectorF32,
            normalize: Normalize::Reciprocal,
            epsilon: 0.0,
            output_rounding: Rounding::RNE,
            lse: LseFormula::LnSumPlusMax,
            empty_row: EmptyRow::Zero { lse: f32::INFINITY },
            mask_fill: MaskFill::NegInf,
            split: None,
        }
    }

    /// vLLM paged attention v1 (numerics.md "vLLM paged attention"): two passes over the whole
    /// row, qk = scale * dot in f32, e = exp(qk - max), p = e * (1 / (sum + 1e-6)), p cast to
    /// the cache dtype (RNE), f32 accumulation of p * v, output RNE. Sums run in key order.
    pub fn vllm_pa_v1(dtype: DType) -> Recipe {
        Recipe {
            name: "vllm_pa_v1".into(),
            algorithm: Algorithm::TwoPass,
            q_tile: 1,
            kv_tile: 16,
            kv_tiling: KvTiling::Fixed,
            block_order: BlockOrder::Forward,
            qk_order: ReductionOrder::Lanes16,
            rowsum_order: ReductionOrder::Lanes16,
            pv_order: PvOrder::KeyByKey,
            score_precision: ScorePrecision::F32,
            scale_placement: ScalePlacement::AfterMatmul,
            exp: ExpFlavour::Exp,
            exp_fma: false,
            exp_impl: MathImpl::LibmF32,
            ln_impl: MathImpl::LibmF32,
            p_dtype: if dtype == DType::F16 {
                DType::F16
            } else {
                DType::Bf16
            },
            p_rounding: Rounding::RNE,
            rowsum_of: RowSumOf::RawP,
            o_rescale: ORescale::VectorF32,
            normalize: Normalize::Reciprocal,
            epsilon: 1e-6,
            output_rounding: Rounding::RNE,
            lse: LseFormula::LnSumPlusMax,
            empty_row: EmptyRow::Zero { lse: f32::INFINITY },
            mask_fill: MaskFill::NegInf,
            split: None,
        }
    }

    /// vLLM paged attention v2: v1 per 512-key partition, partial outputs stored in the cache
    /// dtype (RNE), combined with the exp-sum weights w_j = exp_sum_j * exp(m_j - M) and
    /// 1 / (sum w + 1e-6) (numerics.md "v2: partition size 512; partial outputs stored in
    /// bf16/f16").
    pub fn vllm_pa_v2(dtype: DType) -> Recipe {
        let v1 = Recipe::vllm_pa_v1(dtype);
        Recipe {
            name: "vllm_pa_v2".into(),
            split: Some(SplitKv {
                partition: 512,
                partial_dtype: v1.p_dtype,
                partial_rounding: Rounding::RNE,
                combine: Combine::VllmExpSum,
            }),
            ..v1
        }
    }

    /// FlashAttention-2 with no intermediate rounding: P stays f32, division at the end,
    /// output rounded once (RNE). Differs from the oracle only by f32 arithmetic error, so
    /// after the output rounding it matches the oracle to within one output ulp.
    pub fn exact_f32() -> Recipe {
        Recipe {
            name: "exact_f32".into(),
            kv_tile: 128,
            kv_tiling: KvTiling::Fixed,
            p_dtype: DType::F32,
            p_rounding: Rounding::RNE,
            output_rounding: Rounding::RNE,
            mask_fill: MaskFill::NegInf,
            ..Recipe::ascend_pfa_bf16(DType::Bf16)
        }
    }

    /// The same recipe with split-KV partitions of `partition` keys, combined by LSE, partial
    /// outputs kept in f32.
    pub fn with_split(mut self, partition: usize) -> Recipe {
        self.split = Some(SplitKv {
            partition,
            partial_dtype: DType::F32,
            partial_rounding: Rounding::RNE,
            combine: Combine::Lse,
        });
        self
    }

    /// Every field as a ledger knob `fa.<preset>.<field>` (docs/ascend.md), its value as the
    /// ledger words it. The destructuring makes a new field a compile error until it is a knob.
    pub fn knobs(&self) -> Vec<Knob> {
        let Recipe {
            name,
            algorithm,
            q_tile,
            kv_tile,
            kv_tiling,
            block_order,
            qk_order,
            rowsum_order,
            pv_order,
            score_precision,
            scale_placement,
            exp,
            exp_fma,
            exp_impl,
            ln_impl,
            p_dtype,
            p_rounding,
            rowsum_of,
            o_rescale,
            normalize,
            epsilon,
            output_rounding,
            lse,
            empty_row,
            mask_fill,
            split,
        } = self;
        let k = |field: &str, value: String| Knob::new(format!("fa.{name}.{field}"), value);
        vec![
            k("algorithm", format!("{algorithm:?}")),
            k("q_tile", q_tile.to_string()),
            k(
                "kv_tile",
                match kv_tiling {
                    KvTiling::Fixed => kv_tile.to_string(),
                    KvTiling::AscendIfa { .. } => "the decode kernel's sInner size: 8192 keys, \
                        or 8192/4096/2048 by query heads per KV head (below 5, below 10, more), \
                        aligned down to a multiple of the cache block size"
                        .to_string(),
                    KvTiling::AscendPfa { tile_divisor } => {
                        let mode = if *score_precision == ScorePrecision::F16 {
                            "1024 keys (512 when the key sequence is at most 1024)"
                        } else {
                            "512 keys"
                        };
                        let cut = if *tile_divisor > 1 {
                            format!(", divided by {tile_divisor}")
                        } else {
                            String::new()
                        };
                        format!(
                            "the prompt kernel's sInner block: {mode}; 2048 keys for at most 16 \
                             query rows over more than 2048 keys without a mask{cut}"
                        )
                    }
                },
            ),
            k("block_order", format!("{block_order:?}")),
            k("qk_order", format!("{qk_order:?}")),
            k("rowsum_order", format!("{rowsum_order:?}")),
            k("pv_order", format!("{pv_order:?}")),
            k("score_precision", format!("{score_precision:?}")),
            k("scale_placement", format!("{scale_placement:?}")),
            k("exp", format!("{exp:?}")),
            k("exp_fma", exp_fma.to_string()),
            k("exp_impl", format!("{exp_impl:?}")),
            k("ln_impl", format!("{ln_impl:?}")),
            k("p_dtype", p_dtype.name().to_string()),
            k("p_rounding", rounding_name(p_rounding)),
            k("rowsum_of", format!("{rowsum_of:?}")),
            k("o_rescale", format!("{o_rescale:?}")),
            k(
                "normalize",
                match normalize {
                    Normalize::DivideF16 { sum_rounding } => format!(
                        "row sum cast to f16 ({}), O divided in f16",
                        rounding_name(sum_rounding)
                    ),
                    other => format!("{other:?}"),
                },
            ),
            k("epsilon", epsilon.to_string()),
            k(
                "output_rounding",
                if *o_rescale == ORescale::VectorF16
                    && matches!(normalize, Normalize::DivideF16 { .. })
                {
                    "none: the f16 quotient is written as it is".to_string()
                } else {
                    rounding_name(output_rounding)
                },
            ),
            k("lse", format!("{lse:?}")),
            k(
                "empty_row",
                match empty_row {
                    EmptyRow::Zero { lse } => format!("output 0, lse {lse}"),
                    EmptyRow::Arithmetic => "Arithmetic".to_string(),
                    EmptyRow::DecodeKernel { empty_kv_lse } => format!(
                        "no row-invalid correction: an empty KV gives output 0 and lse \
                         {empty_kv_lse:e}; a fully masked row the mean of V and lse ln(n) + fill"
                    ),
                },
            ),
            k("mask_fill", format!("{mask_fill:?}")),
            k(
                "split",
                match (kv_tiling, split) {
                    (KvTiling::AscendIfa { vector_cores: 0 }, _) => {
                        "flash decode on the vector cores of the SoC the case's hardware \
                         profile names when batch x KV heads leaves cores idle; partials f32, \
                         AscendSumMax"
                            .to_string()
                    }
                    (KvTiling::AscendIfa { vector_cores }, _) => format!(
                        "flash decode on {vector_cores} vector cores when batch x KV heads \
                         leaves cores idle; partials f32, AscendSumMax"
                    ),
                    (KvTiling::Fixed | KvTiling::AscendPfa { .. }, None) => "none".to_string(),
                    (KvTiling::Fixed | KvTiling::AscendPfa { .. }, Some(s)) => format!(
                        "{} keys, partials {} {}, {:?}",
                        s.partition,
                        s.partial_dtype.name(),
                        rounding_name(&s.partial_rounding),
                        s.combine
                    ),
                },
            ),
        ]
    }

    /// The recipe on a SoC with `vector_cores` vector cores: sets the count a
    /// [`KvTiling::AscendIfa`] tiling splits over (`None` leaves the recipe as it is; a
    /// recipe with fixed tiles ignores it).
    pub fn on_vector_cores(mut self, vector_cores: Option<usize>) -> Recipe {
        if let (KvTiling::AscendIfa { vector_cores: n }, Some(v)) =
            (&mut self.kv_tiling, vector_cores)
        {
            *n = v;
        }
        self
    }

    /// The recipe as it runs on a problem of `shape`, and its KV tile: under
    /// [`KvTiling::AscendIfa`] the kernel's tiling sets the tile and the split (partials in
    /// f32, [`Combine::AscendSumMax`]); under [`KvTiling::Fixed`] the recipe itself with
    /// `fixed_tile` (its `kv_tile`, or the cache block size under PagedAttention).
    pub fn for_problem(&self, shape: &IfaShape, fixed_tile: usize) -> (Recipe, usize) {
        match self.kv_tiling {
            KvTiling::Fixed => (self.clone(), fixed_tile),
            KvTiling::AscendPfa { tile_divisor } => {
                let (tile, _) = pfa_kv_tile(&PfaShape {
                    q_seq: shape.q_seq,
                    kv_seq: shape.kv_capacity,
                    masked: shape.masked,
                    high_performance: self.score_precision == ScorePrecision::F16,
                });
                let tile = (tile / tile_divisor.max(1)).max(1);
                (
                    Recipe {
                        kv_tile: tile,
                        ..self.clone()
                    },
                    tile,
                )
            }
            KvTiling::AscendIfa { vector_cores } => {
                let t = ifa_tiling(shape, vector_cores);
                let recipe = Recipe {
                    kv_tile: t.kv_tile,
                    split: t.split.map(|partition| SplitKv {
                        partition,
                        partial_dtype: DType::F32,
                        partial_rounding: Rounding::RNE,
                        combine: Combine::AscendSumMax,
                    }),
                    ..self.clone()
                };
                (recipe, t.kv_tile)
            }
        }
    }

    /// Checks the field combination.
    pub fn validate(&self) -> Result<(), super::AttentionError> {
        let bad = |field: &'static str, message: &str| {
            Err(super::AttentionError::InvalidRecipe {
                recipe: self.name.clone(),
                field,
                message: message.to_string(),
            })
        };
        if self.q_tile == 0 {
            return bad("q_tile", "must be positive");
        }
        if self.kv_tile == 0 {
            return bad("kv_tile", "must be positive");
        }
        if self.scale_placement == ScalePlacement::FoldedIntoExp2 && self.exp != ExpFlavour::Exp2 {
            return bad(
                "scale_placement",
                "folding log2(e) into the scale needs exp2",
            );
        }
        if self.score_precision == ScorePrecision::F16
            && self.scale_placement == ScalePlacement::FoldedIntoExp2
        {
            return bad(
                "score_precision",
                "f16 scores are modelled with the scale after the matmul",
            );
        }
        if self.algorithm == Algorithm::TwoPass
            && (self.rowsum_order != ReductionOrder::Lanes16 || self.pv_order != PvOrder::KeyByKey)
        {
            return bad(
                "pv_order",
                "the two-pass algorithm is modelled with the 16-lane row sum and the key-by-key P V only",
            );
        }
        if !(self.epsilon >= 0.0 && self.epsilon.is_finite()) {
            return bad("epsilon", "must be finite and non-negative");
        }
        if let Some(s) = &self.split
            && s.partition == 0
        {
            return bad("split", "partition must be positive");
        }
        if let KvTiling::AscendIfa { vector_cores: 0 } = self.kv_tiling {
            return bad(
                "vector_cores",
                "the kernel's tiling splits over the vector cores of the SoC it models, and \
                 none were given: a case takes the count from the hardware profile its suite \
                 names (`recipe_hardware`), or sets `vector_cores`",
            );
        }
        if let KvTiling::AscendPfa { tile_divisor: 0 } = self.kv_tiling {
            return bad("kv_tiling", "the tile divisor must be positive");
        }

        Ok(())
    }
}
